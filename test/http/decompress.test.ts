// Responses the upstream compressed although postern asked for identity
// (SPEC §6.1 step 9, §6.4), through the real daemon: gzip, x-gzip, deflate
// (zlib-wrapped and raw), br and stacked codings come back decoded, without
// the headers that describe the wire bytes; decompression is capped (a
// 64 MiB bomb under max_response_body = 64KiB gives exactly the cap,
// truncated); a body that does not decode, or a coding postern cannot read,
// is a 502 upstream_error that says the request was executed. At the cap:
// a secret straddling it is replaced whole, marks shorter than the secret
// pull nothing from beyond it, and a compressed body cut by the read limit
// still gives its decoded part, truncated.
import t, { Test } from 'tap';
import zlib from 'node:zlib';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack, Stack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import type { AgentResponse } from '../../daemon/pipeline/response';

const CAP = 64 * 1024;
const MARK = '[REDACTED:api]';

type Reply = AgentResponse;
interface ErrorReply {
  error: { code: string; message: string; maybe_executed?: boolean; audit_seq?: number };
}

// A text body with some structure, so the codings have something to do.
const TEXT = Array.from({ length: 400 }, (_, i) => `{"line":${i},"word":"postern-${(i * 7919) % 1000}"}\n`).join('');
const RANDOM = randomBytes(150 * 1024).toString('hex'); // compresses to about half: longer than the read limit
const ZEROS = 64 * 1024 * 1024;
const gzip = (b: Buffer | string): Buffer => zlib.gzipSync(b);
const br = (b: Buffer | string): Buffer =>
  zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } });

// Upstream bodies built once (the bomb takes a moment to compress).
const BOMB_GZIP = zlib.gzipSync(Buffer.alloc(ZEROS), { level: 9 });
const BOMB_BR = zlib.brotliCompressSync(Buffer.alloc(ZEROS));

type Route = (secret: string) => { headers: Record<string, string | string[]>; body: Buffer };

const ROUTES: Record<string, Route> = {
  '/v1/gzip': () => ({ headers: { 'content-encoding': 'gzip' }, body: gzip(TEXT) }),
  '/v1/x-gzip': () => ({ headers: { 'content-encoding': 'x-gzip' }, body: gzip(TEXT) }),
  '/v1/gzip-upper': () => ({ headers: { 'content-encoding': 'GZIP' }, body: gzip(TEXT) }),
  '/v1/deflate': () => ({ headers: { 'content-encoding': 'deflate' }, body: zlib.deflateSync(TEXT) }),
  '/v1/deflate-raw': () => ({ headers: { 'content-encoding': 'deflate' }, body: zlib.deflateRawSync(TEXT) }),
  '/v1/br': () => ({ headers: { 'content-encoding': 'br' }, body: br(TEXT) }),
  '/v1/gzip-br': () => ({ headers: { 'content-encoding': 'gzip, br' }, body: br(gzip(TEXT)) }),
  '/v1/gzip-br-lines': () => ({ headers: { 'content-encoding': ['gzip', 'br'] }, body: br(gzip(TEXT)) }),
  '/v1/deflate-gzip': () => ({ headers: { 'content-encoding': 'deflate,gzip' }, body: gzip(zlib.deflateSync(TEXT)) }),
  '/v1/identity': () => ({ headers: { 'content-encoding': 'identity' }, body: Buffer.from(TEXT) }),
  '/v1/bomb-gzip': () => ({
    headers: { 'content-encoding': 'gzip', 'content-type': 'application/octet-stream' },
    body: BOMB_GZIP,
  }),
  '/v1/bomb-br': () => ({
    headers: { 'content-encoding': 'br', 'content-type': 'application/octet-stream' },
    body: BOMB_BR,
  }),
  '/v1/corrupt-gzip': () => {
    const g = gzip(TEXT);
    for (let i = 20; i < 60; i++) g[i] = 0xff;
    return { headers: { 'content-encoding': 'gzip' }, body: g };
  },
  '/v1/not-gzip': () => ({ headers: { 'content-encoding': 'gzip' }, body: Buffer.from(TEXT) }),
  '/v1/corrupt-br': () => ({
    headers: { 'content-encoding': 'br' },
    body: Buffer.from('this is not brotli at all, just text'),
  }),
  '/v1/zstd': () => ({ headers: { 'content-encoding': 'zstd' }, body: Buffer.from(TEXT) }),
  '/v1/gzip-zstd': () => ({ headers: { 'content-encoding': 'gzip, zstd' }, body: gzip(TEXT) }),
  // An upstream that echoes the secret as the coding name.
  '/v1/coding-is-secret': (s) => ({ headers: { 'content-encoding': `gzip, ${s}` }, body: gzip(TEXT) }),
  // A secret that starts a few bytes before the cap.
  '/v1/straddle': (s) => ({ headers: {}, body: Buffer.from('a'.repeat(CAP - 5) + s + 'b'.repeat(4000)) }),
  '/v1/straddle-1': (s) => ({ headers: {}, body: Buffer.from('a'.repeat(CAP - 1) + s + 'b'.repeat(4000)) }),
  '/v1/straddle-gzip': (s) => ({
    headers: { 'content-encoding': 'gzip' },
    body: gzip('a'.repeat(CAP - 7) + s + 'b'.repeat(4000)),
  }),
  // Its longest spelling (the hex of "Bearer <secret>", every byte \u00XX)
  // starting before the cap reaches far beyond it.
  '/v1/straddle-long': (s) => ({
    headers: {},
    body: Buffer.from('a'.repeat(CAP - 10) + longest(`Bearer ${s}`) + 'b'.repeat(100_000)),
  }),
  // Many secrets, each longer than its mark; from input position CAP on,
  // only Z.
  '/v1/many': (s) => ({ headers: {}, body: Buffer.from(manyBody(s)) }),
  '/v1/many-gzip': (s) => ({ headers: { 'content-encoding': 'gzip' }, body: gzip(manyBody(s)) }),
  // Compressed bodies longer than the read limit.
  '/v1/cut-gzip': () => ({ headers: { 'content-encoding': 'gzip' }, body: gzip(RANDOM) }),
  '/v1/cut-br': () => ({ headers: { 'content-encoding': 'br' }, body: br(RANDOM) }),
  '/v1/cut-deflate-raw': () => ({ headers: { 'content-encoding': 'deflate' }, body: zlib.deflateRawSync(RANDOM) }),
  // Stored deflate blocks: the bytes before the cap and most of the secret,
  // then empty blocks (input, no output) past the read limit, then the rest:
  // the read limit cuts the input while the decoded data ends inside the
  // secret.
  '/v1/stall-deflate': (s) => ({ headers: { 'content-encoding': 'deflate' }, body: stalled(s) }),
  '/v1/stall-gzip': (s) => ({
    headers: { 'content-encoding': 'gzip' },
    body: Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]), stalled(s)]),
  }),
  // The secret echoed inside a compressed body.
  '/v1/echo-gzip': (s) => ({ headers: { 'content-encoding': 'gzip' }, body: gzip(`{"you sent":"Bearer ${s}"}`) }),
};

function longest(value: string): string {
  return [...Buffer.from(Buffer.from(value).toString('hex'))]
    .map((c) => `\\u${c.toString(16).padStart(4, '0')}`)
    .join('');
}

// Raw deflate by hand: stored blocks hold their bytes as they are.
function storedBlock(data: Buffer, final: boolean): Buffer {
  const head = Buffer.from([final ? 1 : 0, 0, 0, 0, 0]);
  head.writeUInt16LE(data.length, 1);
  head.writeUInt16LE(~data.length & 0xffff, 3);
  return Buffer.concat([head, data]);
}

function stalled(s: string): Buffer {
  const before = Buffer.from('a'.repeat(CAP - (s.length - 1)) + s.slice(0, -1));
  const blocks = [storedBlock(before.subarray(0, 60_000), false), storedBlock(before.subarray(60_000), false)];
  for (let i = 0; i < 40_000; i++) blocks.push(storedBlock(Buffer.alloc(0), false));
  blocks.push(storedBlock(Buffer.from(s.slice(-1) + 'b'.repeat(100)), true));
  return Buffer.concat(blocks);
}

// How many bytes at the end of `body` are the start of `secret`.
function secretStartAtEnd(body: string, secret: string): number {
  for (let n = Math.min(body.length, secret.length); n > 0; n--) if (body.endsWith(secret.slice(0, n))) return n;
  return 0;
}

function manyBody(s: string): string {
  const unit = `${s}.`;
  const k = Math.floor(CAP / unit.length);
  return unit.repeat(k) + '.'.repeat(CAP - k * unit.length) + 'Z'.repeat(50_000);
}

function handler(req: IncomingMessage, _body: Buffer, res: ServerResponse): void {
  const path = (req.url ?? '').split('?')[0] as string;
  const route = ROUTES[path];
  if (!route) {
    res.writeHead(404);
    res.end();
    return;
  }
  const secret = String(req.headers['authorization'] ?? '').replace(/^Bearer /, '');
  const { headers, body } = route(secret);
  res.writeHead(200, {
    'content-type': 'text/plain; charset=utf-8',
    'x-kept': 'yes',
    ...headers,
    'content-length': body.length,
  });
  res.end(body);
}

let s: Stack;
let secret: string;
// A secret in lower case, as many API keys are.
const LOWER = `sk_${randomBytes(16).toString('hex')}`;

async function get(t: Test, path: string): Promise<{ status: number; json: unknown; text: string }> {
  const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', path) });
  t.same(exposures(r.text, secret), [], `${path}: no form of the secret in the reply`);
  return r;
}

async function ok(t: Test, path: string): Promise<Reply> {
  const r = await get(t, path);
  t.equal(r.status, 200, r.text.slice(0, 300));
  const reply = r.json as Reply;
  t.equal(reply.status, 200, 'the upstream answered 200');
  return reply;
}

function bodyBytes(reply: Reply): Buffer {
  return Buffer.from(reply.body, reply.body_encoding === 'base64' ? 'base64' : 'utf8');
}

t.before(async () => {
  s = await startStack({ handler, httpConfig: 'max_response_body = "64KiB"' });
  secret = makeCanary('TOKEN');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  s.addCredential(
    'lower',
    `name = "lower"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    LOWER,
  );
  await s.approver();
});
t.teardown(() => s.close());

t.test('each coding comes back decoded, without the wire headers', async (t) => {
  for (const path of [
    '/v1/gzip',
    '/v1/x-gzip',
    '/v1/gzip-upper',
    '/v1/deflate',
    '/v1/deflate-raw',
    '/v1/br',
    '/v1/gzip-br',
    '/v1/gzip-br-lines',
    '/v1/deflate-gzip',
  ]) {
    await t.test(path, async (t) => {
      const reply = await ok(t, path);
      t.equal(reply.body_encoding, 'utf8');
      t.equal(reply.body, TEXT, 'the decoded body');
      t.equal(reply.truncated, false);
      t.equal(reply.redactions, 0);
      t.equal(reply.headers['content-encoding'], undefined, 'content-encoding removed');
      t.equal(reply.headers['content-length'], undefined, 'content-length removed');
      t.equal(reply.headers['x-kept'], 'yes', 'other headers kept');
      t.equal(reply.headers['content-type'], 'text/plain; charset=utf-8');
    });
  }
  await t.test('identity is no coding: the body as sent, headers as sent', async (t) => {
    const reply = await ok(t, '/v1/identity');
    t.equal(reply.body, TEXT);
    t.equal(reply.truncated, false);
    t.equal(reply.headers['content-length'], String(Buffer.byteLength(TEXT)));
  });
  await t.test('a secret inside a gzip body is redacted', async (t) => {
    const reply = await ok(t, '/v1/echo-gzip');
    t.equal(reply.body, `{"you sent":"${MARK}"}`);
    t.equal(reply.redactions, 1);
  });
});

t.test('decompression bombs stop at the cap', async (t) => {
  t.ok(BOMB_GZIP.length < CAP + 2048, `the gzip bomb is ${BOMB_GZIP.length} bytes for ${ZEROS} decoded`);
  for (const path of ['/v1/bomb-gzip', '/v1/bomb-br']) {
    await t.test(path, async (t) => {
      const started = Date.now();
      const reply = await ok(t, path);
      t.equal(reply.truncated, true, 'truncated');
      t.equal(reply.body_encoding, 'base64');
      const body = bodyBytes(reply);
      t.equal(body.length, CAP, 'exactly max_response_body bytes');
      t.ok(
        body.every((b) => b === 0),
        'the decoded zeros',
      );
      t.equal(reply.headers['content-encoding'], undefined);
      t.ok(Date.now() - started < 10_000, 'answered without decoding it all');
    });
  }
});

t.test('bodies that do not decode, and codings postern cannot read: 502, executed', async (t) => {
  const rows: [string, RegExp][] = [
    ['/v1/corrupt-gzip', /gzip body that does not decode/],
    ['/v1/not-gzip', /gzip body that does not decode/],
    ['/v1/corrupt-br', /br body that does not decode/],
    ['/v1/zstd', /content-encoding.*cannot decode/],
    ['/v1/gzip-zstd', /content-encoding.*cannot decode/],
  ];
  let last = 0;
  for (const [path, message] of rows) {
    await t.test(path, async (t) => {
      const before = s.up.requests.length;
      const r = await get(t, path);
      t.equal(r.status, 502, r.text);
      const err = (r.json as ErrorReply).error;
      t.equal(err.code, 'upstream_error');
      t.match(err.message, message);
      t.match(err.message, /executed/, 'the message says the request ran');
      t.equal(err.maybe_executed, true, 'maybe_executed');
      t.type(err.audit_seq, 'number', 'journaled');
      t.ok((err.audit_seq ?? 0) > last, 'a new journal entry');
      last = err.audit_seq ?? last;
      t.equal(s.up.requests.length, before + 1, 'the upstream saw the request once');
    });
  }
});

t.test('a coding name that is the secret is not quoted back', async (t) => {
  const r = await s.request({
    credential: 'lower',
    method: 'GET',
    url: s.url('api.example.test', '/v1/coding-is-secret'),
  });
  t.equal(s.up.requests.at(-1)?.headers['authorization'], `Bearer ${LOWER}`, 'the upstream received the secret');
  t.equal(r.status, 502);
  const err = (r.json as ErrorReply).error;
  t.equal(err.code, 'upstream_error');
  t.equal(err.maybe_executed, true);
  t.same(exposures(r.text, LOWER), [], `no form of the secret in the error: ${err.message}`);
});

t.test('a secret straddling the cap is replaced whole', async (t) => {
  const rows: [string, number][] = [
    ['/v1/straddle', 5],
    ['/v1/straddle-1', 1],
    ['/v1/straddle-gzip', 7],
    ['/v1/straddle-long', 10],
  ];
  for (const [path, before] of rows) {
    await t.test(path, async (t) => {
      const reply = await ok(t, path);
      t.equal(reply.truncated, true);
      t.equal(reply.redactions, 1, 'the straddling occurrence is counted');
      t.equal(
        reply.body,
        ('a'.repeat(CAP - before) + MARK).slice(0, CAP),
        'the bytes before it, then the start of the mark, up to the cap',
      );
      t.equal(Buffer.byteLength(reply.body), CAP);
      t.notOk(reply.body.endsWith(secret.slice(0, before)), 'no leading part of the secret');
    });
  }
});

t.test('a compressed body cut by the read limit inside a secret ends with no part of it', async (t) => {
  for (const path of ['/v1/stall-deflate', '/v1/stall-gzip']) {
    await t.test(path, async (t) => {
      const reply = await ok(t, path);
      t.equal(reply.truncated, true);
      t.ok(Buffer.byteLength(reply.body) <= CAP, 'within the cap');
      t.match(reply.body, /^a+/, 'the bytes before the secret');
      t.equal(
        secretStartAtEnd(reply.body, secret),
        0,
        `no leading part of the secret at the end (body ends ${JSON.stringify(reply.body.slice(-48))})`,
      );
    });
  }
});

t.test('marks shorter than the secret pull nothing from beyond the cap', async (t) => {
  const unit = `${secret}.`;
  const k = Math.floor(CAP / unit.length);
  t.ok(MARK.length < secret.length, 'each mark is shorter than the secret');
  for (const path of ['/v1/many', '/v1/many-gzip']) {
    await t.test(path, async (t) => {
      const reply = await ok(t, path);
      t.equal(reply.truncated, true);
      t.equal(reply.redactions, k);
      t.equal(
        reply.body,
        `${MARK}.`.repeat(k) + '.'.repeat(CAP - k * unit.length),
        'only what stood before the cap, redacted',
      );
      t.notMatch(reply.body, /Z/, 'no byte from beyond the cap');
    });
  }
});

t.test('a compressed body cut by the read limit still gives its decoded part', async (t) => {
  for (const path of ['/v1/cut-gzip', '/v1/cut-br', '/v1/cut-deflate-raw']) {
    await t.test(path, async (t) => {
      const reply = await ok(t, path);
      t.equal(reply.truncated, true);
      t.equal(reply.body_encoding, 'utf8');
      t.equal(reply.body, RANDOM.slice(0, CAP), 'the decoded start of the body, up to the cap');
      t.equal(reply.headers['content-encoding'], undefined);
    });
  }
});
