// Send the request over the pinned pool and read the response within limits
// (SPEC §6.1 steps 8–9). Redirects are never followed: a 3xx comes back with
// its Location. postern never retries. Only a request without a body leaves
// its connection to be reused.
import type { Dispatcher, Pool } from 'undici';
import { Refusal } from '../../shared/errors';
import { unreachable } from './connect-errors';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer; // up to `readLimit` bytes
  complete: boolean; // false when the body was longer than readLimit
}

export interface SendOptions {
  method: string;
  pathAndQuery: string;
  headers: Record<string, string>;
  body: Buffer | null;
  timeoutMs: number;
  readLimit: number;
}

// undici error codes → what the agent is told. Messages are written here,
// never copied from the library (they can quote the request).
const TIMEOUTS_AFTER_SEND = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_ABORTED',
  'ABORT_ERR',
]);

// Certificate verdicts: the handshake reached the certificate and postern
// refused it; nothing was sent.
const UNTRUSTED_CA =
  /UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|SELF_SIGNED|DEPTH_ZERO|CERT_UNTRUSTED|CERT_CHAIN_TOO_LONG|CERT_SIGNATURE_FAILURE|CERT_REJECTED|INVALID_CA/;
const WRONG_NAME = /ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH|ALTNAME/;
const OUT_OF_DATE = /CERT_HAS_EXPIRED|CERT_NOT_YET_VALID/;
// Node's message when the socket closes before the TLS handshake ends: a
// reset that came before anything could be sent.
const BEFORE_TLS = /before secure TLS connection was established/;

function tlsFailure(code: string, host: string): Refusal {
  if (WRONG_NAME.test(code))
    return new Refusal(
      'upstream_error',
      `the certificate ${host} presented is not valid for the name ${host} (${code}); the request was not sent — check the host name in the URL`,
    );
  if (OUT_OF_DATE.test(code))
    return new Refusal(
      'upstream_error',
      `the certificate ${host} presented is expired or not yet valid (${code}); the request was not sent — check this machine's clock, or ask the server's owner`,
    );
  if (UNTRUSTED_CA.test(code))
    return new Refusal(
      'upstream_error',
      `TLS with ${host} failed (${code}): its certificate is not signed by a trusted CA; the request was not sent — a human can add its CA with http.ca_file`,
    );
  return new Refusal(
    'upstream_error',
    `the TLS handshake with ${host} failed (${code}): the server and postern share no TLS version or cipher, or the server wants a client certificate; the request was not sent — check the scheme and port`,
  );
}

// `sent`: undici had begun writing the request (it had a connection for
// it). Before that, every failure is one of connecting, and nothing left.
function upstreamFailure(e: unknown, host: string, timedOut: boolean, sent: boolean): Refusal {
  const err = e as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  const code = err?.code ?? err?.cause?.code ?? err?.name ?? 'unknown';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || (timedOut && !sent)) {
    return new Refusal('upstream_timeout', `connecting to ${host} timed out; the request was not sent — retry later`, {
      maybe_executed: false,
    });
  }
  if (timedOut || TIMEOUTS_AFTER_SEND.has(code)) {
    return new Refusal(
      'upstream_timeout',
      `${host} did not answer in time; the request may have reached it — check before retrying`,
      { maybe_executed: true },
    );
  }
  const far = unreachable(host, code, 'request');
  if (far !== null) return new Refusal('upstream_error', far);
  if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|HTTP_REQUEST/i.test(code)) {
    return new Refusal(
      'upstream_error',
      `${host} did not answer with TLS (${code}); the request was not sent — check the scheme and port`,
    );
  }
  if (/CERT|TLS|SSL|UNABLE_TO_VERIFY|SELF_SIGNED|HOSTNAME|DEPTH_ZERO/i.test(code)) return tlsFailure(code, host);
  if (code === 'ECONNREFUSED')
    return new Refusal(
      'upstream_error',
      `${host} refused the connection; the request was not sent — check the host and port`,
    );
  if (!sent) {
    const during = BEFORE_TLS.test(err?.message ?? '') ? ' during the TLS handshake' : '';
    return new Refusal(
      'upstream_error',
      `the connection to ${host} failed${during} (${code}); the request was not sent — check the scheme, host and port, or retry later`,
    );
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE')
    return new Refusal(
      'upstream_error',
      `the connection to ${host} was reset; the request may have reached it — check before retrying`,
      { maybe_executed: true },
    );
  // undici's parser error carries no code, only its name.
  if (
    code.startsWith('HPE_') ||
    code === 'HTTPParserError' ||
    code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' ||
    code === 'UND_ERR_INFO'
  )
    return new Refusal(
      'upstream_error',
      `${host} sent an invalid HTTP response (${code}); the request may have reached it — check before retrying`,
      { maybe_executed: true },
    );
  return new Refusal(
    'upstream_error',
    `the request to ${host} failed (${code}); it may have reached ${host} — check before retrying`,
    { maybe_executed: true },
  );
}

// The pool, seen through an interceptor that notes when undici begins to
// write this request (legacy handlers hear onConnect, newer ones
// onRequestStart): the line between "not sent" and "may have executed".
function tracked(pool: Pool): { dispatcher: Dispatcher; sent: () => boolean } {
  let sent = false;
  const mark =
    (f: (...a: unknown[]) => unknown) =>
    (...a: unknown[]) => {
      sent = true;
      return f(...a);
    };
  const dispatcher = pool.compose(
    (dispatch) => (opts, handler) =>
      dispatch(
        opts,
        new Proxy(handler, {
          get(target, key) {
            const v = Reflect.get(target, key, target) as unknown;
            if (typeof v !== 'function') return v;
            const bound = (v as (...a: unknown[]) => unknown).bind(target);
            return key === 'onConnect' || key === 'onRequestStart' ? mark(bound) : bound;
          },
        }),
      ),
  );
  return { dispatcher, sent: () => sent };
}

export async function sendPinned(pool: Pool, host: string, o: SendOptions): Promise<RawResponse> {
  const abort = new AbortController();
  let timedOut = false;
  // undici does not give up a connection that is still being made (a TLS
  // handshake that stalls) when the signal fires; racing the deadline keeps
  // timeout_ms a promise whatever the stage. The abandoned attempt ends on
  // its own (connect timeout) and its failure is ignored.
  let expire: () => void = () => undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    expire = () => reject(Object.assign(new Error('deadline'), { code: 'ABORT_ERR' }));
  });
  deadline.catch(() => undefined);
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
    expire();
  }, o.timeoutMs);
  const via = tracked(pool);
  try {
    const pending = via.dispatcher.request({
      path: o.pathAndQuery,
      method: o.method as never,
      headers: o.headers,
      body: o.body ?? undefined,
      signal: abort.signal,
      // A connection that carried a body is closed after its response (and
      // asks the origin to close it too): an origin that misreads the body's
      // length would take the start of the next request on it, with its
      // injected secret, as part of this body (SPEC §6.2, "CL.0").
      reset: o.body !== null,
      // undici's own timers tick coarsely (~500 ms) and fire early; the
      // timer above is the only deadline.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    pending.catch(() => undefined);
    const res = await Promise.race([pending, deadline]);
    const chunks: Buffer[] = [];
    let size = 0;
    let complete = true;
    const reading = (async () => {
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        if (size + b.length > o.readLimit) {
          chunks.push(b.subarray(0, o.readLimit - size));
          size = o.readLimit;
          complete = false;
          res.body.destroy();
          break;
        }
        chunks.push(b);
        size += b.length;
      }
    })();
    reading.catch(() => undefined);
    await Promise.race([reading, deadline]);
    return {
      status: res.statusCode,
      headers: res.headers as Record<string, string | string[]>,
      body: Buffer.concat(chunks),
      complete,
    };
  } catch (e) {
    throw upstreamFailure(e, host, timedOut, via.sent());
  } finally {
    clearTimeout(timer);
  }
}
