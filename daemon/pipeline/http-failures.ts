// What an agent is told when an HTTP request fails upstream (SPEC §6.3):
// undici's error codes, Node's errno and OpenSSL's certificate verdicts, as
// one table read top to bottom. `sent` is the line between "not sent" and
// "may have executed": undici had begun writing the request.
import { Refusal } from '../../shared/errors';
import { unreachableRows } from './connect-errors';
import { codeIs, codeLike, refusalFor, type FailureTable } from './failure-table';

export interface HttpFailure {
  host: string;
  code: string; // undici's code, its cause's, or the error's name
  message: string;
  timedOut: boolean; // the request's deadline passed
  sent: boolean;
}

// Certificate verdicts: the handshake reached the certificate and postern
// refused it; nothing was sent. A code is one of them only if it also names
// TLS at all (TLS).
const TLS = /CERT|TLS|SSL|UNABLE_TO_VERIFY|SELF_SIGNED|HOSTNAME|DEPTH_ZERO/i;
const UNTRUSTED_CA =
  /UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|SELF_SIGNED|DEPTH_ZERO|CERT_UNTRUSTED|CERT_CHAIN_TOO_LONG|CERT_SIGNATURE_FAILURE|CERT_REJECTED|INVALID_CA/;
const WRONG_NAME = /ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH|ALTNAME/;
const OUT_OF_DATE = /CERT_HAS_EXPIRED|CERT_NOT_YET_VALID/;
const tlsAnd =
  (verdict: RegExp) =>
  (f: HttpFailure): boolean =>
    TLS.test(f.code) && verdict.test(f.code);
// Node's message when the socket closes before the TLS handshake ends: a
// reset that came before anything could be sent.
const BEFORE_TLS = /before secure TLS connection was established/;

export const HTTP_FAILURES: FailureTable<HttpFailure> = {
  rows: [
    {
      covers: (f) => f.code === 'UND_ERR_CONNECT_TIMEOUT' || (f.timedOut && !f.sent),
      refusal: 'upstream_timeout',
      maybeExecuted: false,
      words: (f) => `connecting to ${f.host} timed out; the request was not sent — retry later`,
    },
    {
      covers: (f) =>
        f.timedOut || codeIs('UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_ABORTED', 'ABORT_ERR')(f),
      refusal: 'upstream_timeout',
      maybeExecuted: true,
      words: (f) => `${f.host} did not answer in time; the request may have reached it — check before retrying`,
    },
    ...unreachableRows<HttpFailure>('request'),
    {
      covers: codeLike(/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|HTTP_REQUEST/i),
      refusal: 'upstream_error',
      words: (f) =>
        `${f.host} did not answer with TLS (${f.code}); the request was not sent — check the scheme and port`,
    },
    {
      covers: tlsAnd(WRONG_NAME),
      refusal: 'upstream_error',
      words: (f) =>
        `the certificate ${f.host} presented is not valid for the name ${f.host} (${f.code}); the request was not sent — check the host name in the URL`,
    },
    {
      covers: tlsAnd(OUT_OF_DATE),
      refusal: 'upstream_error',
      words: (f) =>
        `the certificate ${f.host} presented is expired or not yet valid (${f.code}); the request was not sent — check this machine's clock, or ask the server's owner`,
    },
    {
      covers: tlsAnd(UNTRUSTED_CA),
      refusal: 'upstream_error',
      words: (f) =>
        `TLS with ${f.host} failed (${f.code}): its certificate is not signed by a trusted CA; the request was not sent — a human can add its CA with http.ca_file`,
    },
    {
      covers: codeLike(TLS),
      refusal: 'upstream_error',
      words: (f) =>
        `the TLS handshake with ${f.host} failed (${f.code}): the server and postern share no TLS version or cipher, or the server wants a client certificate; the request was not sent — check the scheme and port`,
    },
    {
      covers: codeIs('ECONNREFUSED'),
      refusal: 'upstream_error',
      words: (f) => `${f.host} refused the connection; the request was not sent — check the host and port`,
    },
    {
      // Before undici had a connection for it, every failure is one of
      // connecting, and nothing left.
      covers: (f) => !f.sent,
      refusal: 'upstream_error',
      words: (f) =>
        `the connection to ${f.host} failed${BEFORE_TLS.test(f.message) ? ' during the TLS handshake' : ''} (${f.code}); the request was not sent — check the scheme, host and port, or retry later`,
    },
    {
      covers: codeIs('ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'),
      refusal: 'upstream_error',
      maybeExecuted: true,
      words: (f) => `the connection to ${f.host} was reset; the request may have reached it — check before retrying`,
    },
    {
      // undici's parser error carries no code, only its name; a status
      // line under 100 (000, 099) fails undici's own assertion instead.
      covers: (f) =>
        f.code.startsWith('HPE_') ||
        codeIs('HTTPParserError', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'UND_ERR_INFO', 'ERR_ASSERTION')(f),
      refusal: 'upstream_error',
      maybeExecuted: true,
      words: (f) =>
        `${f.host} sent an invalid HTTP response (${f.code}); the request may have reached it — check before retrying`,
    },
  ],
  otherwise: {
    refusal: 'upstream_error',
    maybeExecuted: true,
    words: (f) => `the request to ${f.host} failed (${f.code}); it may have reached ${f.host} — check before retrying`,
  },
};

export function httpFailure(e: unknown, host: string, timedOut: boolean, sent: boolean): HttpFailure {
  const err = e as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  const code = err?.code ?? err?.cause?.code ?? err?.name ?? 'unknown';
  return { host, code, message: err?.message ?? '', timedOut, sent };
}

export function upstreamFailure(e: unknown, host: string, timedOut: boolean, sent: boolean): Refusal {
  return refusalFor(HTTP_FAILURES, httpFailure(e, host, timedOut, sent));
}

// A response that failed once it had begun to arrive (decoding it, or
// writing it on to the client): the request reached the upstream. The
// error's code (Node's, zlib's or undici's) is named; its message, which
// may quote response bytes, is not.
export function responseFailure(e: unknown, host: string): Refusal {
  const { code } = httpFailure(e, host, false, true);
  return new Refusal(
    'upstream_error',
    `the response from ${host} could not be passed on (${code}); the request reached ${host} — check before retrying`,
    { maybe_executed: true },
  );
}
