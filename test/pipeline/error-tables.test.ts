// The upstream failure tables (SPEC §6.3, §6.6), row by row: each row is
// reached by a failure of the shape the library really gives, and the
// refusal it produces is asserted whole (code, message, maybe_executed or its
// absence). Every row of each table must be reached by some case, so a row
// added without a case fails here. Then real sockets, through sendPinned:
// the failures undici and Node give for them land on the same rows.
import t, { Test } from 'tap';
import net from 'node:net';
import { errors, Pool } from 'undici';
import { HTTP_FAILURES, httpFailure, upstreamFailure, type HttpFailure } from '../../daemon/pipeline/http-failures';
import {
  SSH_CONNECT_FAILURES,
  connectFailure,
  connectTimeout,
  type SshFailure,
} from '../../daemon/pipeline/ssh-failures';
import { rowFor, type FailureTable, type FailureWords } from '../../daemon/pipeline/failure-table';
import { sendPinned } from '../../daemon/pipeline/execute-http';
import { Refusal } from '../../shared/errors';

const H = 'api.example';

interface Expected {
  code: string;
  message: string;
  maybe_executed?: boolean;
}

function errno(code: string, message = `${code}: something, connect`): Error {
  return Object.assign(new Error(message), { code });
}

// Each case reaches the rows of its table; the set reached must be the table.
function walk<F>(t: Test, table: FailureTable<F>, cases: [string, F, Refusal, Expected][]): void {
  const reached = new Set<FailureWords<F>>();
  for (const [what, failure, refusal, expected] of cases) {
    reached.add(rowFor(table, failure));
    t.strictSame(refusal.toJSON(), expected, what);
    t.equal(refusal.maybeExecuted, expected.maybe_executed ?? null, `${what}: maybeExecuted`);
  }
  const rows = [...table.rows, table.otherwise];
  const missed = rows.map((row, i) => (reached.has(row) ? -1 : i)).filter((i) => i >= 0);
  t.strictSame(missed, [], 'every row is reached by a case');
}

function http(what: string, e: unknown, timedOut: boolean, sent: boolean, expected: Expected) {
  return [what, httpFailure(e, H, timedOut, sent), upstreamFailure(e, H, timedOut, sent), expected] as [
    string,
    HttpFailure,
    Refusal,
    Expected,
  ];
}

const notSentUnreachable = (code: string, why: string): Expected => ({
  code: 'upstream_error',
  message: `${H} is unreachable (${code}: ${why}); the request was not sent — check the network, then retry`,
});

t.test('HTTP: each row of the table, and the order between them', async (t) => {
  const parser = Object.assign(new errors.HTTPParserError('bad'), { code: 'HPE_INVALID_CONSTANT' });
  walk(t, HTTP_FAILURES, [
    http('connect timeout', new errors.ConnectTimeoutError(), false, false, {
      code: 'upstream_timeout',
      message: `connecting to ${H} timed out; the request was not sent — retry later`,
      maybe_executed: false,
    }),
    http('deadline before undici had a connection', new Error('deadline'), true, false, {
      code: 'upstream_timeout',
      message: `connecting to ${H} timed out; the request was not sent — retry later`,
      maybe_executed: false,
    }),
    http('a connect timeout wins over a deadline after sending', new errors.ConnectTimeoutError(), true, true, {
      code: 'upstream_timeout',
      message: `connecting to ${H} timed out; the request was not sent — retry later`,
      maybe_executed: false,
    }),
    http('deadline after sending', errno('ECONNREFUSED'), true, true, {
      code: 'upstream_timeout',
      message: `${H} did not answer in time; the request may have reached it — check before retrying`,
      maybe_executed: true,
    }),
    ...[
      new errors.HeadersTimeoutError(),
      new errors.BodyTimeoutError(),
      new errors.RequestAbortedError(),
      errno('ABORT_ERR'),
    ].map((e) =>
      http(`${httpFailure(e, H, false, false).code}, even before sending`, e, false, false, {
        code: 'upstream_timeout',
        message: `${H} did not answer in time; the request may have reached it — check before retrying`,
        maybe_executed: true,
      }),
    ),
    http(
      'ENETUNREACH',
      errno('ENETUNREACH'),
      false,
      false,
      notSentUnreachable('ENETUNREACH', 'no route to its network from this machine'),
    ),
    http(
      'EHOSTUNREACH',
      errno('EHOSTUNREACH'),
      false,
      false,
      notSentUnreachable('EHOSTUNREACH', 'no route to the host'),
    ),
    http('ENETDOWN', errno('ENETDOWN'), false, true, notSentUnreachable('ENETDOWN', 'the network is down')),
    http('EHOSTDOWN', errno('EHOSTDOWN'), false, false, notSentUnreachable('EHOSTDOWN', 'the host is down')),
    http(
      'EADDRNOTAVAIL',
      errno('EADDRNOTAVAIL'),
      false,
      false,
      notSentUnreachable('EADDRNOTAVAIL', 'no local address can reach it'),
    ),
    http(
      'EACCES',
      errno('EACCES'),
      false,
      false,
      notSentUnreachable('EACCES', 'a firewall rule on this machine refused the connection'),
    ),
    http(
      'EPERM, as the cause undici wraps',
      { name: 'SocketError', cause: { code: 'EPERM' } },
      false,
      false,
      notSentUnreachable('EPERM', 'a firewall rule on this machine refused the connection'),
    ),
    ...['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ERR_SSL_HTTP_REQUEST'].map((code) =>
      http(code, errno(code), false, false, {
        code: 'upstream_error',
        message: `${H} did not answer with TLS (${code}); the request was not sent — check the scheme and port`,
      }),
    ),
    ...['ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_SSL_HOSTNAME_MISMATCH'].map((code) =>
      http(code, errno(code), false, false, {
        code: 'upstream_error',
        message: `the certificate ${H} presented is not valid for the name ${H} (${code}); the request was not sent — check the host name in the URL`,
      }),
    ),
    ...['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID'].map((code) =>
      http(code, errno(code), false, false, {
        code: 'upstream_error',
        message: `the certificate ${H} presented is expired or not yet valid (${code}); the request was not sent — check this machine's clock, or ask the server's owner`,
      }),
    ),
    ...[
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
      'SELF_SIGNED_CERT_IN_CHAIN',
      'DEPTH_ZERO_SELF_SIGNED_CERT',
      'CERT_UNTRUSTED',
      'CERT_CHAIN_TOO_LONG',
      'CERT_SIGNATURE_FAILURE',
      'CERT_REJECTED',
      'ERR_SSL_INVALID_CA',
    ].map((code) =>
      http(code, errno(code), false, true, {
        code: 'upstream_error',
        message: `TLS with ${H} failed (${code}): its certificate is not signed by a trusted CA; the request was not sent — a human can add its CA with http.ca_file`,
      }),
    ),
    ...['ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', 'ERR_SSL_NO_PROTOCOLS_AVAILABLE', 'ERR_TLS_HANDSHAKE_TIMEOUT'].map(
      (code) =>
        http(code, errno(code), false, false, {
          code: 'upstream_error',
          message: `the TLS handshake with ${H} failed (${code}): the server and postern share no TLS version or cipher, or the server wants a client certificate; the request was not sent — check the scheme and port`,
        }),
    ),
    http('ECONNREFUSED', errno('ECONNREFUSED'), false, false, {
      code: 'upstream_error',
      message: `${H} refused the connection; the request was not sent — check the host and port`,
    }),
    http('a reset before sending', errno('ECONNRESET'), false, false, {
      code: 'upstream_error',
      message: `the connection to ${H} failed (ECONNRESET); the request was not sent — check the scheme, host and port, or retry later`,
    }),
    http(
      'a close during the handshake',
      errno('ECONNRESET', 'Client network socket disconnected before secure TLS connection was established'),
      false,
      false,
      {
        code: 'upstream_error',
        message: `the connection to ${H} failed during the TLS handshake (ECONNRESET); the request was not sent — check the scheme, host and port, or retry later`,
      },
    ),
    http('an error with no code before sending', null, false, false, {
      code: 'upstream_error',
      message: `the connection to ${H} failed (unknown); the request was not sent — check the scheme, host and port, or retry later`,
    }),
    // "ALTNAME" alone does not name TLS: not a certificate verdict.
    http('ALTNAME before sending', errno('ALTNAME'), false, false, {
      code: 'upstream_error',
      message: `the connection to ${H} failed (ALTNAME); the request was not sent — check the scheme, host and port, or retry later`,
    }),
    ...[errno('ECONNRESET'), new errors.SocketError('closed'), errno('EPIPE')].map((e) =>
      http(`${httpFailure(e, H, false, false).code} after sending`, e, false, true, {
        code: 'upstream_error',
        message: `the connection to ${H} was reset; the request may have reached it — check before retrying`,
        maybe_executed: true,
      }),
    ),
    ...[
      parser,
      new errors.HTTPParserError('bad'),
      new errors.ResponseContentLengthMismatchError(),
      new errors.InformationalError('x'),
    ].map((e) => {
      const code = httpFailure(e, H, false, true).code;
      return http(`${code} after sending`, e, false, true, {
        code: 'upstream_error',
        message: `${H} sent an invalid HTTP response (${code}); the request may have reached it — check before retrying`,
        maybe_executed: true,
      });
    }),
    http('anything else after sending', new errors.ClientDestroyedError(), false, true, {
      code: 'upstream_error',
      message: `the request to ${H} failed (UND_ERR_DESTROYED); it may have reached ${H} — check before retrying`,
      maybe_executed: true,
    }),
    http('ALTNAME after sending', errno('ALTNAME'), false, true, {
      code: 'upstream_error',
      message: `the request to ${H} failed (ALTNAME); it may have reached ${H} — check before retrying`,
      maybe_executed: true,
    }),
  ]);
});

function ssh(what: string, e: unknown, timedOut: boolean, expected: Expected) {
  const err = e as { code?: string; level?: string } | null;
  const failure: SshFailure = { host: H, code: err?.code, level: err?.level, timedOut };
  return [what, failure, connectFailure(e, H, timedOut), expected] as [string, SshFailure, Refusal, Expected];
}

const sshUnreachable = (code: string, why: string): Expected => ({
  code: 'upstream_error',
  message: `${H} is unreachable (${code}: ${why}); the command was not sent — check the network, then retry`,
});

t.test('SSH: each row of the connection table', async (t) => {
  const timeout: Expected = {
    code: 'upstream_timeout',
    message: `connecting to ${H} over SSH timed out; the command was not sent — retry later`,
    maybe_executed: false,
  };
  const level = (level: string, code?: string) => Object.assign(new Error('x'), { level, code });
  walk(t, SSH_CONNECT_FAILURES, [
    ssh('the deadline', null, true, timeout),
    ssh("ssh2's own timeout", level('client-timeout'), false, timeout),
    ssh('the deadline wins over a refused login', level('client-authentication'), true, timeout),
    ssh('a refused login', level('client-authentication'), false, {
      code: 'upstream_error',
      message: `${H} refused the credential's login; the command was not sent — a human should check the user and secret of the credential`,
    }),
    ssh('ECONNREFUSED', level('client-socket', 'ECONNREFUSED'), false, {
      code: 'upstream_error',
      message: `${H} refused the SSH connection; the command was not sent — check the host and port`,
    }),
    ssh(
      'ENETUNREACH',
      level('client-socket', 'ENETUNREACH'),
      false,
      sshUnreachable('ENETUNREACH', 'no route to its network from this machine'),
    ),
    ssh(
      'EHOSTUNREACH',
      level('client-socket', 'EHOSTUNREACH'),
      false,
      sshUnreachable('EHOSTUNREACH', 'no route to the host'),
    ),
    ssh('ENETDOWN', level('client-socket', 'ENETDOWN'), false, sshUnreachable('ENETDOWN', 'the network is down')),
    ssh('EHOSTDOWN', level('client-socket', 'EHOSTDOWN'), false, sshUnreachable('EHOSTDOWN', 'the host is down')),
    ssh(
      'EADDRNOTAVAIL',
      level('client-socket', 'EADDRNOTAVAIL'),
      false,
      sshUnreachable('EADDRNOTAVAIL', 'no local address can reach it'),
    ),
    ssh(
      'EACCES',
      level('client-socket', 'EACCES'),
      false,
      sshUnreachable('EACCES', 'a firewall rule on this machine refused the connection'),
    ),
    ssh(
      'EPERM',
      level('client-socket', 'EPERM'),
      false,
      sshUnreachable('EPERM', 'a firewall rule on this machine refused the connection'),
    ),
    ssh('another errno', level('client-socket', 'ECONNRESET'), false, {
      code: 'upstream_error',
      message: `the SSH connection to ${H} failed (ECONNRESET); the command was not sent — check the host and port, or retry later`,
    }),
    ssh('a level without an errno', level('protocol'), false, {
      code: 'upstream_error',
      message: `the SSH connection to ${H} failed (protocol); the command was not sent — check the host and port, or retry later`,
    }),
    ssh('neither', null, false, {
      code: 'upstream_error',
      message: `the SSH connection to ${H} failed (unknown); the command was not sent — check the host and port, or retry later`,
    }),
    // A name inherited by every object is not an errno the table knows.
    ssh('constructor', level('client-socket', 'constructor'), false, {
      code: 'upstream_error',
      message: `the SSH connection to ${H} failed (constructor); the command was not sent — check the host and port, or retry later`,
    }),
  ]);
  t.strictSame(connectTimeout(H).toJSON(), timeout, 'connectTimeout is the timeout row');
});

// A TCP server on loopback; each connection is handed to `onConnection`.
async function tcp(t: Test, onConnection: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

async function refusalOf(t: Test, origin: string): Promise<Refusal> {
  const pool = new Pool(origin);
  t.teardown(() => pool.destroy());
  try {
    await sendPinned(pool, H, {
      method: 'GET',
      pathAndQuery: '/',
      headers: {},
      body: null,
      timeoutMs: 10_000,
      readLimit: 1024,
    });
  } catch (e) {
    if (e instanceof Refusal) return e;
    throw e;
  }
  throw new Error('the request succeeded');
}

t.test('HTTP: real sockets land on the same rows', async (t) => {
  await t.test('a closed port', async (t) => {
    // A port that was just listened on and closed: nothing listens there.
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const free = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    t.strictSame((await refusalOf(t, `http://127.0.0.1:${free}`)).toJSON(), {
      code: 'upstream_error',
      message: `${H} refused the connection; the request was not sent — check the host and port`,
    });
  });

  await t.test('a reset once the request arrived', async (t) => {
    const port = await tcp(t, (s) => s.once('data', () => s.resetAndDestroy()));
    t.strictSame((await refusalOf(t, `http://127.0.0.1:${port}`)).toJSON(), {
      code: 'upstream_error',
      message: `the connection to ${H} was reset; the request may have reached it — check before retrying`,
      maybe_executed: true,
    });
  });

  await t.test('an answer that is not HTTP', async (t) => {
    const port = await tcp(t, (s) => s.once('data', () => s.end('SSH-2.0-OpenSSH_9.2\r\n')));
    t.strictSame((await refusalOf(t, `http://127.0.0.1:${port}`)).toJSON(), {
      code: 'upstream_error',
      message: `${H} sent an invalid HTTP response (HTTPParserError); the request may have reached it — check before retrying`,
      maybe_executed: true,
    });
  });

  await t.test('plain HTTP where TLS was asked for', async (t) => {
    const port = await tcp(t, (s) =>
      s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')),
    );
    const r = await refusalOf(t, `https://127.0.0.1:${port}`);
    t.strictSame(r.toJSON(), {
      code: 'upstream_error',
      message: `${H} did not answer with TLS (ERR_SSL_WRONG_VERSION_NUMBER); the request was not sent — check the scheme and port`,
    });
  });
});
