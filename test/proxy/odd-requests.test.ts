// Adversarial rows for what a client sends through the proxy front door (SPEC
// §11, §6.2, §6.3), each a rule no other test checks end to end:
// - `postern run` rewrites only the first request head of a connection
//   (adding `postern-run-client`, the descendant it found) and sends an
//   absolute-form request with `connection: close` "so that the next request
//   comes on a new connection, whose head is checked again"
//   (cli/run/request-head.ts). A client that pipelines a second absolute-form
//   request after the first, with its own `postern-run-client`, must not
//   have that claim shown on the approval card as what `postern run`
//   reported;
// - a CONNECT inside a terminated tunnel is answered (400 bad_request with
//   postern's JSON and x-postern-error), never a silently closed connection
//   (docs/proxy.md §6);
// - request framing a parser may read two ways (Content-Length beside
//   Transfer-Encoding, two Content-Lengths that differ) is refused as
//   bad_request, never sent;
// - a placeholder in a chunked request's trailer is not sent upstream;
// - `Expect: 100-continue` with a body is served, the expectation not sent.
// - the hop-by-hop rules around them: HTTP/2 is not offered (ALPN), its
//   preface is a bad_request; a placeholder on an obs-fold line or in the
//   userinfo of an absolute-form URL is refused, never sent; a request
//   without a placeholder raises no approval card; odd CONNECT authorities
//   are normalised as URL hosts are, then meet the address rules.
// On the code of 2026-12-05 the CONNECT-inside-a-tunnel row fails: the inner
// server of daemon/proxy/front-door.ts has no 'connect' listener, so Node
// closes the connection without an answer or a journal entry.
// A real daemon, a real `postern run`, clients under it that write raw
// bytes; the secret searched in every byte a client received, the daemon
// log and the journal.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, type Card } from '../helpers/stack';
import { startHttpUpstream, echo } from '../helpers/https-upstream';
import { cliBytes } from '../helpers/cli-bytes';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseRaw, sendRaw, connectHead } from '../helpers/proxy-raw-client';
import { startRawOrigin, rawResponse } from '../helpers/raw-origin';

const HOST = 'api.example.test';
const PLAIN = 'plain.example.test';

// Under `postern run`: one connection to its proxy, the bytes of the file
// named by argv[2] written at once (@@PH:VAR@@ and @@AUTH@@ filled), every
// byte read until the proxy closes, printed as base64.
const ONE_CONNECTION_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const proxy = new URL(process.env.HTTP_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const text = fs.readFileSync(process.argv[2], 'utf8')
  .replace(/@@PH:([A-Z_]+)@@/g, (_m, v) => process.env[v])
  .replace(/@@AUTH@@/g, auth);
const c = net.connect(Number(proxy.port), proxy.hostname);
let got = Buffer.alloc(0);
const timer = setTimeout(() => c.destroy(), 15000);
c.on('connect', () => c.write(text));
c.on('data', (d) => (got = Buffer.concat([got, d])));
c.on('error', () => undefined);
c.on('close', () => { clearTimeout(timer); process.stdout.write(got.toString('base64') + '\n'); });
`;

// Under `postern run`: two tunnels to argv[2] through its proxy. On the
// first, TLS offering only h2; on the second, http/1.1 then the HTTP/2
// connection preface. One JSON line each: the protocol ALPN chose, the
// error, the bytes that came back.
const H2_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const target = process.argv[2];
function tunnel(alpn, bytes) {
  return new Promise((resolve) => {
    const c = net.connect(Number(proxy.port), proxy.hostname);
    let got = Buffer.alloc(0);
    let out = {};
    const done = (more) => { clearTimeout(timer); c.destroy(); resolve({ ...out, ...more, raw: got.toString('base64') }); };
    const timer = setTimeout(() => done({ error: 'timeout' }), 10000);
    c.on('error', (e) => done({ error: String(e) }));
    c.once('connect', () => c.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
    c.once('data', () => {
      const s = tls.connect({ socket: c, servername: target.split(':')[0], ca, ALPNProtocols: alpn });
      s.on('error', (e) => done({ error: String(e) }));
      s.on('secureConnect', () => { out.alpn = s.alpnProtocol; s.write(bytes); });
      s.on('data', (d) => (got = Buffer.concat([got, d])));
      s.on('close', () => done({}));
    });
  });
}
(async () => {
  const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
  process.stdout.write(JSON.stringify(await tunnel(['h2'], preface)) + '\n');
  process.stdout.write(JSON.stringify(await tunnel(['http/1.1'], preface)) + '\n');
})();
`;

t.test('requests a client sends', async (t) => {
  const plain = await startHttpUpstream(echo);
  t.teardown(() => plain.close());
  const s = await startStack({ records: { [HOST]: { A: ['127.0.0.1'] }, [PLAIN]: { A: ['127.0.0.1'] } } });
  t.teardown(() => s.close());
  const secret = makeCanary('RTREQ');
  const P = s.up.port;

  // A raw origin on another port: what reaches it, byte for byte.
  const origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, () => ({
    read: 'declared',
    respond: () => rawResponse(200, [['content-length', '2']], 'ok'),
  }));
  t.teardown(() => origin.close());

  const def = (name: string, host: string, ports: number[], scheme: string, approve = 'session'): string =>
    `name = "${name}"\nkind = "http"\napprove = "${approve}"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${host}"\nschemes = ["${scheme}"]\nports = [${ports.join(', ')}]\nmethods = ["GET", "POST"]\n`;
  s.addCredential('api', def('api', HOST, [P, origin.port], 'https'), secret);
  s.addCredential('plain', def('plain', PLAIN, [plain.port], 'http', 'each-use'), secret);
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'once' };
  });
  const received: Buffer[] = [];

  // One connection to `postern run`'s proxy with these bytes; what came back.
  const oneConnection = async (name: string, bytes: string): Promise<Buffer> => {
    const file = join(s.h.dir, `${name}.txt`);
    writeFileSync(file, bytes);
    const script = join(s.h.dir, 'one-connection-client.js');
    writeFileSync(script, ONE_CONNECTION_CLIENT);
    const run = await cliBytes(s.h.env, ['run', '--', process.execPath, script, file]);
    t.equal(run.code, 0, run.stderr);
    const raw = Buffer.from(run.stdout.toString().trim(), 'base64');
    received.push(raw, run.stdout, Buffer.from(run.stderr));
    return raw;
  };

  await t.test('a pipelined second absolute-form request cannot name its own run client', async (t) => {
    const req = (path: string, extra: string): string =>
      `GET http://${PLAIN}:${plain.port}${path} HTTP/1.1\r\nHost: ${PLAIN}:${plain.port}\r\n${extra}Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\n\r\n`;
    const bytes =
      req('/first', 'Proxy-Authorization: Basic @@AUTH@@\r\n') + req('/second', 'postern-run-client: 1\r\n');
    const before = cards.length;
    const raw = await oneConnection('pipelined', bytes);
    t.match(raw.toString('latin1'), /^HTTP\/1\.1 200 /, 'the first request is served');
    const second = plain.requests.filter((r) => r.url === '/second');
    const mine = cards.slice(before);
    t.ok(mine.length >= 1, 'the first request had its card');
    const claimed = mine.filter((c) => c.action['proxy_client_pid'] === 1);
    t.same(
      claimed.map((c) => c.action['path']),
      [],
      `no card shows the client's own postern-run-client as reported by postern run (second request sent upstream: ${second.length})`,
    );
  });

  await t.test('a CONNECT inside a terminated tunnel is refused with a 400, not a closed connection', async (t) => {
    const run = await sendRaw(s.h, [
      {
        id: 1,
        connect: `${HOST}:${P}`,
        head: `CONNECT ${HOST}:${P} HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n\r\n`,
      },
    ]);
    received.push(run.stdout, Buffer.from(run.stderr));
    const a = run.answers.get(1);
    const raw = Buffer.from(a?.raw ?? '', 'base64');
    received.push(raw);
    const r = parseRaw(raw);
    t.equal(r.status, 400, `answered (${JSON.stringify(a)})`);
    t.equal(r.headers['x-postern-error'], 'bad_request');
  });

  const framed = async (
    what: string,
    head: string,
    body: string,
    want: { status: number; code?: string },
  ): Promise<Buffer> => {
    const before = origin.requests.length;
    const run = await sendRaw(s.h, [
      { id: 1, connect: `${HOST}:${origin.port}`, head, body: Buffer.from(body).toString('base64') },
    ]);
    received.push(run.stdout, Buffer.from(run.stderr));
    const raw = Buffer.from(run.answers.get(1)?.raw ?? '', 'base64');
    received.push(raw);
    // An interim 100 Continue (the front door's own) is not the answer.
    const r = parseRaw(
      raw.subarray(raw.toString('latin1').startsWith('HTTP/1.1 100 ') ? raw.indexOf('\r\n\r\n') + 4 : 0),
    );
    t.equal(r.status, want.status, `${what}: ${r.head} ${r.body.slice(0, 300)}`);
    if (want.code) {
      t.equal(r.headers['x-postern-error'], want.code, `${what}: x-postern-error`);
      t.equal(origin.requests.length, before, `${what}: nothing reached the origin`);
    }
    return Buffer.concat(origin.requests.slice(before).map((q) => q.raw));
  };
  const start = (method: string, more: string): string =>
    `${method} /v1/x HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n${more}\r\n`;

  await t.test('framing a parser may read two ways is refused', async () => {
    await framed(
      'content-length beside chunked',
      start('POST', 'Content-Length: 3\r\nTransfer-Encoding: chunked\r\n'),
      '3\r\nabc\r\n0\r\n\r\n',
      { status: 400, code: 'bad_request' },
    );
    await framed(
      'two content-lengths that differ',
      start('POST', 'Content-Length: 3\r\nContent-Length: 5\r\n'),
      'abcde',
      {
        status: 400,
        code: 'bad_request',
      },
    );
    await framed(
      'chunked, then a coding after it',
      start('POST', 'Transfer-Encoding: chunked, gzip\r\n'),
      '3\r\nabc\r\n0\r\n\r\n',
      { status: 400, code: 'bad_request' },
    );
  });

  await t.test('a placeholder on an obs-fold continuation line is refused, not sent', async () => {
    await framed('obs-fold', start('GET', 'X-Note: a\r\n @@PH:API_TOKEN@@\r\n'), '', {
      status: 400,
      code: 'bad_request',
    });
  });

  await t.test("a placeholder in a chunked request's trailer is not sent upstream", async (t) => {
    const sent = await framed(
      'trailer',
      start('POST', 'Transfer-Encoding: chunked\r\nTrailer: X-Late\r\n'),
      `3\r\nabc\r\n0\r\nX-Late: ${'@@PH:API_TOKEN@@'}\r\n\r\n`,
      { status: 200 },
    );
    t.notMatch(sent.toString('latin1'), /postern-api-|x-late/i, 'neither the trailer nor the placeholder went on');
    t.match(sent.toString('latin1'), /\r\n\r\nabc$/, 'the body went on, re-framed');
  });

  await t.test('Expect: 100-continue with a body is served, the expectation not sent', async (t) => {
    const sent = await framed(
      'expect',
      start('POST', 'Content-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n'),
      'abc',
      {
        status: 200,
      },
    );
    t.notMatch(sent.toString('latin1'), /\r\nexpect:/i);
  });

  await t.test('a request without a placeholder raises no card: it needs no approval', async (t) => {
    const before = cards.length;
    const sent = await framed('no placeholder', `GET /free HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n\r\n`, '', {
      status: 200,
    });
    t.match(sent.toString('latin1'), /^GET \/free /, 'sent');
    t.equal(cards.length, before, 'no card');
  });

  await t.test('a placeholder in the userinfo of an absolute-form request is refused, not sent', async (t) => {
    const before = plain.requests.length;
    const raw = await oneConnection(
      'userinfo',
      `GET http://u:@@PH:PLAIN_TOKEN@@@${PLAIN}:${plain.port}/ui HTTP/1.1\r\nHost: ${PLAIN}:${plain.port}\r\nProxy-Authorization: Basic @@AUTH@@\r\n\r\n`,
    );
    const r = parseRaw(raw);
    t.equal(r.status, 400, r.head);
    t.equal(r.headers['x-postern-error'], 'bad_request');
    t.equal(plain.requests.length, before, 'nothing sent');
  });

  await t.test('HTTP/2 is not offered inside a tunnel; its preface is refused as bad_request', async (t) => {
    const script = join(s.h.dir, 'h2-client.js');
    writeFileSync(script, H2_CLIENT);
    const run = await cliBytes(s.h.env, ['run', '--', process.execPath, script, `${HOST}:${P}`]);
    received.push(run.stdout, Buffer.from(run.stderr));
    t.equal(run.code, 0, run.stderr);
    const lines = run.stdout
      .toString()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { alpn?: unknown; error?: string; raw?: string });
    const onlyH2 = lines[0]!;
    t.not(onlyH2.alpn, 'h2', `a client offering only h2 does not get it (${JSON.stringify(onlyH2)})`);
    const preface = lines[1]!;
    t.equal(preface.alpn, 'http/1.1', JSON.stringify(preface));
    const r = parseRaw(Buffer.from(preface.raw ?? '', 'base64'));
    t.equal(r.status, 400, r.head);
    t.equal(r.headers['x-postern-error'], 'bad_request');
  });

  await t.test('odd CONNECT authorities: normalised as a URL host is, then the address rules', async (t) => {
    const rows: [string, number, string | null][] = [
      [`API.EXAMPLE.TEST.:${P}`, 200, null],
      [`2130706433:${P}`, 403, 'denied_address'],
      [`0x7f.1:${P}`, 403, 'denied_address'],
      [`[::ffff:7f00:1]:${P}`, 403, 'denied_address'],
      [`[::1]:${P}`, 403, 'denied_address'],
      [`[fe80::1%25lo]:${P}`, 400, 'bad_request'],
      [`${HOST}:+${P}`, 400, 'bad_request'],
      [`${HOST}:${P}:${P}`, 400, 'bad_request'],
      [`user@${HOST}:${P}`, 400, 'bad_request'],
    ];
    for (const [authority, status, code] of rows) {
      const head = await connectHead(s.sock, authority);
      received.push(Buffer.from(head));
      t.equal(Number(head.split(' ')[1]), status, `${authority}: ${head.slice(0, 300)}`);
      if (code) t.match(head, new RegExp(`\r\nx-postern-error: ${code}\r\n`, 'i'), `${authority}: ${code}`);
    }
  });

  await s.d.stop();
  received.forEach((bytes, i) =>
    t.same(exposures(bytes, secret), [], `the client received no form of the secret (${i})`),
  );
  t.same(exposures(s.d.logs(), secret), [], "the secret is not in the daemon's log");
  t.same(exposures(await journalText(s.h), secret), [], 'the secret is not in the journal');
});
