// Upstream failures through the real daemon (SPEC §6.1, §6.3): a slow
// upstream gives 504 upstream_timeout with maybe_executed: true; a refused
// connection gives 502 upstream_error without maybe_executed (the key
// absent); a reset or an invalid HTTP response after the request was sent is
// 502 upstream_error that may have executed; a certificate for another name,
// from an untrusted CA, or no TLS at all is 502 upstream_error before
// anything is sent. timeout_ms (or http.timeout) is honoured, postern never
// retries, and every refusal is journaled with an http_outcome naming the
// error.
import t from 'tap';
import net from 'node:net';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createHttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startStack, auditEntries } from '../helpers/stack';
import { eventually, freePort } from '../helpers/postern';
import { echo, makeTestCa } from '../helpers/https-upstream';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: number; maybe_executed?: unknown };
}

// A server that counts TCP connections (TLS handshakes that fail included)
// and the requests it read. `rst` resets a request's TCP connection (the raw
// socket under TLS, found by its remote port).
interface Counted {
  port: number;
  tcp(): number;
  requests: string[];
  close(): Promise<void>;
}

type RawHandler = (req: IncomingMessage, res: ServerResponse, rst: () => void) => void;

async function countedServer(tls: { key: string; cert: string } | null, handler: RawHandler): Promise<Counted> {
  const server = tls ? createHttpsServer({ key: tls.key, cert: tls.cert }) : createHttpServer();
  let tcp = 0;
  const raw = new Map<number, net.Socket>();
  const requests: string[] = [];
  server.on('connection', (s: net.Socket) => {
    tcp += 1;
    const port = s.remotePort!;
    raw.set(port, s);
    s.on('close', () => raw.delete(port));
  });
  server.on('tlsClientError', () => undefined);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    requests.push(req.url ?? '');
    req.resume();
    req.on('end', () => handler(req, res, () => raw.get(req.socket.remotePort!)?.resetAndDestroy()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    tcp: () => tcp,
    requests,
    close: () =>
      new Promise<void>((r) => {
        for (const s of raw.values()) s.destroy();
        server.close(() => r());
      }),
  };
}

interface Case {
  what: string;
  url: string;
  timeoutMs?: number;
  status: number;
  code: string;
  maybeExecuted: true | 'absent';
  message?: RegExp;
  elapsed?: [number, number]; // ms, inclusive bounds
  // How many requests the server behind the URL must have read, and (for
  // servers that count them) TCP connections it must have accepted.
  requests: () => number;
  expectRequests: number;
  tcp?: () => number;
}

t.test('upstream failures: refusals, maybe_executed, no retry, journaled', async (t) => {
  const held: ServerResponse[] = [];
  const busy: ServerResponse[] = [];
  const s = await startStack({
    names: ['api.example.test'],
    httpConfig: 'timeout = "2s"',
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'wrong.example.test': { A: ['127.0.0.1'] },
      'untrusted.example.test': { A: ['127.0.0.1'] },
      'plain.example.test': { A: ['127.0.0.1'] },
    },
    handler: (req, body, res) => {
      const url = req.url ?? '';
      if (url.startsWith('/slow/')) {
        held.push(res); // never answered
        return;
      }
      if (url === '/busy') {
        busy.push(res); // answered when the test says
        return;
      }
      if (url.startsWith('/slow-body/')) {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
        res.write('partial');
        held.push(res);
        return;
      }
      return echo(req, body, res);
    },
  });
  t.teardown(() => {
    for (const r of held) r.destroy();
    return s.close();
  });
  const P = s.up.port;

  // A certificate for another name (signed by the trusted CA), a
  // certificate from another CA, and a server without TLS.
  const otherCa = makeTestCa(['untrusted.example.test']);
  t.teardown(() => otherCa.cleanup());
  // Broken HTTP behind a valid certificate.
  const broken = await countedServer({ key: s.ca.key, cert: s.ca.cert }, (req, res, rst) => {
    const url = req.url ?? '';
    const sock = req.socket;
    if (url === '/reset-mid') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
      res.write('0123456789', () => setTimeout(rst, 50));
    } else if (url === '/reset-early') rst();
    else if (url === '/close-early') sock.destroy();
    else if (url === '/garbage') sock.end('HTTP/1.1 2x0 Nope\r\n\r\n');
    else if (url === '/dup-length') sock.end('HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!');
    else res.end('ok');
  });
  const wrongName = await countedServer({ key: s.ca.key, cert: s.ca.cert }, (_req, res) => res.end('x'));
  const untrusted = await countedServer({ key: otherCa.key, cert: otherCa.cert }, (_req, res) => res.end('x'));
  const plain = await countedServer(null, (_req, res) => res.end('x'));
  t.teardown(() =>
    Promise.all([broken.close(), wrongName.close(), untrusted.close(), plain.close()]).then(() => undefined),
  );
  const deadPort = await freePort();

  const secret = makeCanary('TOKEN');
  const rule = (host: string, port: number): string =>
    `[[allow]]\nhost = "${host}"\nports = [${port}]\nmethods = ["GET", "POST"]\n`;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      rule('api.example.test', P) +
      rule('api.example.test', broken.port) +
      rule('api.example.test', deadPort) +
      rule('wrong.example.test', wrongName.port) +
      rule('untrusted.example.test', untrusted.port) +
      rule('plain.example.test', plain.port),
    secret,
  );
  await s.approver();

  const seen = (path: string) => () => s.up.requests.filter((q) => q.url === path).length;
  const none = () => 0;
  const url = (host: string, port: number, path: string): string => `https://${host}:${port}${path}`;
  const cases: Case[] = [
    // Five of each stall: the deadline must hold whatever the phase of any
    // coarse timer inside the client.
    ...[1, 2, 3, 4, 5].map((i): Case => ({
      what: `a slow upstream, timeout_ms 700 (#${i})`,
      url: url('api.example.test', P, `/slow/${i}`),
      timeoutMs: 700,
      status: 504,
      code: 'upstream_timeout',
      maybeExecuted: true,
      message: /may have reached/,
      elapsed: [700, 1700],
      requests: seen(`/slow/${i}`),
      expectRequests: 1,
    })),
    ...[1, 2, 3, 4, 5].map((i): Case => ({
      what: `a body that stalls after the headers, timeout_ms 700 (#${i})`,
      url: url('api.example.test', P, `/slow-body/${i}`),
      timeoutMs: 700,
      status: 504,
      code: 'upstream_timeout',
      maybeExecuted: true,
      elapsed: [700, 1700],
      requests: seen(`/slow-body/${i}`),
      expectRequests: 1,
    })),
    {
      what: 'a slow upstream, http.timeout 2s',
      url: url('api.example.test', P, '/slow/config'),
      status: 504,
      code: 'upstream_timeout',
      maybeExecuted: true,
      elapsed: [2000, 3000],
      requests: seen('/slow/config'),
      expectRequests: 1,
    },
    {
      what: 'a reset mid-response',
      url: url('api.example.test', broken.port, '/reset-mid'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: true,
      requests: () => broken.requests.filter((u) => u === '/reset-mid').length,
      expectRequests: 1,
    },
    {
      what: 'a reset before any response',
      url: url('api.example.test', broken.port, '/reset-early'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: true,
      requests: () => broken.requests.filter((u) => u === '/reset-early').length,
      expectRequests: 1,
    },
    {
      what: 'the connection closed before any response',
      url: url('api.example.test', broken.port, '/close-early'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: true,
      requests: () => broken.requests.filter((u) => u === '/close-early').length,
      expectRequests: 1,
    },
    {
      what: 'an invalid status line',
      url: url('api.example.test', broken.port, '/garbage'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: true,
      message: /invalid HTTP response/,
      requests: () => broken.requests.filter((u) => u === '/garbage').length,
      expectRequests: 1,
    },
    {
      what: 'two different Content-Lengths',
      url: url('api.example.test', broken.port, '/dup-length'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: true,
      message: /invalid HTTP response/,
      requests: () => broken.requests.filter((u) => u === '/dup-length').length,
      expectRequests: 1,
    },
    {
      what: 'a refused connection',
      url: url('api.example.test', deadPort, '/refused'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: 'absent',
      message: /refused/,
      requests: none,
      expectRequests: 0,
    },
    {
      what: 'a certificate for another name',
      url: url('wrong.example.test', wrongName.port, '/tls'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: 'absent',
      message: /TLS/,
      requests: () => wrongName.requests.length,
      expectRequests: 0,
      tcp: wrongName.tcp,
    },
    {
      what: 'a certificate from an untrusted CA',
      url: url('untrusted.example.test', untrusted.port, '/tls'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: 'absent',
      message: /TLS/,
      requests: () => untrusted.requests.length,
      expectRequests: 0,
      tcp: untrusted.tcp,
    },
    {
      what: 'no TLS at all',
      url: url('plain.example.test', plain.port, '/tls'),
      status: 502,
      code: 'upstream_error',
      maybeExecuted: 'absent',
      requests: () => plain.requests.length,
      expectRequests: 0,
      tcp: plain.tcp,
    },
  ];

  // Warm up: the approval (a session) and one good request.
  const warm = await s.request({ credential: 'api', method: 'GET', url: url('api.example.test', P, '/ok') });
  t.equal(warm.status, 200, warm.text);

  // Another request stays in flight meanwhile, as on a daemon in use.
  const background = s.request({
    credential: 'api',
    method: 'GET',
    url: url('api.example.test', P, '/busy'),
    timeout_ms: 120_000,
  });
  t.ok(await eventually(() => busy.length === 1, 10_000), 'a request is in flight');

  const texts: string[] = [];
  const results: { c: Case; err: ErrorBody['error'] }[] = [];
  for (const c of cases) {
    await t.test(c.what, async (t) => {
      const started = Date.now();
      const r = await s.request({
        credential: 'api',
        method: 'POST',
        url: c.url,
        body: 'payload',
        ...(c.timeoutMs ? { timeout_ms: c.timeoutMs } : {}),
      });
      const elapsed = Date.now() - started;
      texts.push(r.text);
      t.equal(r.status, c.status, r.text);
      const e = (r.json as ErrorBody | null)?.error;
      t.equal(e?.code, c.code);
      if (c.maybeExecuted === true) t.equal(e?.maybe_executed, true, 'maybe_executed: true');
      else t.notOk(e && 'maybe_executed' in e, 'maybe_executed is absent');
      if (c.message) t.match(e?.message, c.message);
      t.type(e?.audit_seq, 'number', 'journaled');
      if (c.elapsed)
        t.ok(elapsed >= c.elapsed[0] && elapsed <= c.elapsed[1], `elapsed ${elapsed} ms within ${c.elapsed.join('–')}`);
      t.equal(c.requests(), c.expectRequests, `the upstream read ${c.expectRequests} request(s)`);
      if (c.tcp) t.equal(c.tcp(), 1, 'one connection attempt');
      if (e) results.push({ c, err: e });
    });
  }

  for (const r of busy) r.end('done');
  const bg = await background;
  t.equal(bg.status, 200, bg.text);

  // A retry would come late, if at all: look again after a while.
  await new Promise((r) => setTimeout(r, 500));
  for (const c of cases) {
    t.equal(c.requests(), c.expectRequests, `${c.what}: still ${c.expectRequests} request(s) — no retry`);
    if (c.tcp) t.equal(c.tcp(), 1, `${c.what}: still one connection attempt`);
  }

  // The upstream still serves: a failure did not poison the pool.
  const after = await s.request({ credential: 'api', method: 'GET', url: url('api.example.test', P, '/ok') });
  t.equal(after.status, 200, after.text);

  await t.test('the journal records each error', async (t) => {
    const entries = auditEntries(s);
    t.equal(results.length, cases.length);
    for (const { c, err } of results) {
      const out = entries.get(err.audit_seq);
      t.equal(out?.['kind'], 'http_outcome', `${c.what}: audit_seq is the outcome entry`);
      t.equal(out?.['error'], c.code, `${c.what}: the outcome names the error`);
      t.equal(out?.['maybe_executed'], c.maybeExecuted === true ? true : null, `${c.what}: maybe_executed recorded`);
      const intent = entries.get(out?.['intent_seq'] as number);
      t.equal(intent?.['kind'], 'http_intent', `${c.what}: the intent came first`);
      t.equal(intent?.['path'], new URL(c.url).pathname);
      if (c.timeoutMs) t.ok((out?.['duration_ms'] as number) >= c.timeoutMs, `${c.what}: duration recorded`);
    }
  });

  await s.d.stop();
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor does any decrypted entry');
});
