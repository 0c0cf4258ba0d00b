// The redaction acceptance suite (SPEC §6.4, §6.1 step 9), through the real
// daemon: an upstream that echoes what it received — the Authorization
// header ("Bearer …", or Basic decoded to "user:secret"), the injected
// query parameter, the raw URL and the body — back in every listed
// encoding (raw; base64 and base64url, padded or not, after 0, 1 and 2
// bytes; base32 padded or not, in either case, after 0 to 4 bytes; hex
// lower and upper; percent-encoded fully in either case and partly, and
// twice; form-encoded; JSON-escaped, \u-escaped throughout in either case,
// with \/; \x-escaped fully and partly; HTML numeric references, decimal
// and hex, fully and partly; UTF-16LE and UTF-16BE), in the body and in
// headers (a header name too, Set-Cookie, and Location on a 3xx); the body
// identity, gzip, deflate (zlib and raw), br or "gzip, br", whole or in
// chunks written 50 ms apart with boundaries inside the secret. Three
// credentials, one per injection form, on one stack, each secret holding
// characters encodings treat specially. No form of any secret reaches the
// agent, the daemon log or the journal; redaction off really returns the
// secret, each form on its own line where the detector sees it.
import t, { Test } from 'tap';
import zlib from 'node:zlib';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack, Stack } from '../helpers/stack';
import { cli } from '../helpers/postern';
import { filesUnder, journalBytes, journalText } from '../helpers/canary';
import { base32, exposures } from '../helpers/exposure';
import type { AgentResponse } from '../../daemon/pipeline/response';

// ---- The secrets: "/", "+", "=", a space, a quote, a backslash, "%", "&".
function makeSecret(prefix: string): string {
  return `${prefix}_${randomBytes(8).toString('hex')}/+= "q\\%&~${randomBytes(8).toString('hex')}+/=`;
}

// ---- Encodings of a value, as an upstream may print it.
// every = 2: one ASCII byte in two left as it is; bytes above ASCII always
// encoded (the text stays ASCII).
const pct = (b: Buffer, upper: boolean, every = 1): string =>
  [...b]
    .map((c, i) => {
      if (i % every !== 0 && c < 0x80) return String.fromCharCode(c);
      const h = c.toString(16).padStart(2, '0');
      return `%${upper ? h.toUpperCase() : h}`;
    })
    .join('');
const uEsc = (s: string, upper: boolean): string =>
  [...Array(s.length).keys()]
    .map((i) => {
      const h = s.charCodeAt(i).toString(16).padStart(4, '0');
      return `\\u${upper ? h.toUpperCase() : h}`;
    })
    .join('');
const jsonInner = (s: string): string => JSON.stringify(s).slice(1, -1);
const hex2 = (c: number): string => c.toString(16).padStart(2, '0');
// Every byte, or those that are not letters or digits, as \xXX.
const xEsc = (b: Buffer, all: boolean): string =>
  [...b]
    .map((c) => (all || !/[A-Za-z0-9]/.test(String.fromCharCode(c)) ? `\\x${hex2(c)}` : String.fromCharCode(c)))
    .join('');
// Raw, once and twice percent-encoded in turn (bytes above ASCII always
// encoded, so the text stays ASCII).
const pctMixed = (b: Buffer): string =>
  [...b]
    .map((c, i) =>
      i % 3 === 0 && c < 0x80 ? String.fromCharCode(c) : i % 3 === 2 ? `%25${hex2(c)}` : `%${hex2(c).toUpperCase()}`,
    )
    .join('');
// Every character as a numeric reference, or what an HTML escaper writes:
// the named five, and references for characters above ASCII.
const htmlRef = (v: string, hex: boolean): string =>
  [...v].map((c) => `&#${hex ? `x${(c.codePointAt(0) as number).toString(16)}` : c.codePointAt(0)};`).join('');
const HTML_NAMED: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const htmlEscaped = (v: string): string =>
  [...v].map((c) => HTML_NAMED[c] ?? ((c.codePointAt(0) as number) > 0x7e ? `&#${c.codePointAt(0)};` : c)).join('');

// The encodings added by SPEC §6.4 revision 2, and where the detector must
// find each when it comes back unredacted (a view or form of its own).
const NEW_FORMS: [RegExp, RegExp][] = [
  [/^base32/, /^base32@\d in as-is of/],
  [/^pct-twice/, /^raw in as-is\+percent-twice of/],
  [/^x-/, /^raw in as-is\+x of/],
  [/^html-/, /^raw in as-is\+html of/],
  [/^utf16le$/, /^raw in utf16le@[01] of/],
  [/^utf16be$/, /^raw in utf16be@[01] of/],
];

// Each as the bytes an upstream would send (text is UTF-8).
function encodings(v: string): [string, Buffer][] {
  return [
    ...textEncodings(v).map(([name, text]): [string, Buffer] => [name, Buffer.from(text, 'utf8')]),
    ['utf16le', Buffer.from(v, 'utf16le')],
    ['utf16be', Buffer.from(v, 'utf16le').swap16()],
  ];
}

function textEncodings(v: string): [string, string][] {
  const b = Buffer.from(v, 'utf8');
  const out: [string, string][] = [['raw', v]];
  for (const prefix of ['', 'x', 'xy']) {
    const p = Buffer.concat([Buffer.from(prefix), b]);
    out.push([`base64+${prefix.length}`, p.toString('base64')]);
    out.push([`base64-unpadded+${prefix.length}`, p.toString('base64').replace(/=+$/, '')]);
    out.push([`base64url+${prefix.length}`, p.toString('base64url')]);
    out.push([`base64url-padded+${prefix.length}`, p.toString('base64').replace(/\+/g, '-').replace(/\//g, '_')]);
  }
  for (const prefix of ['', 'x', 'xy', 'xyz', 'xyzw']) {
    const p = base32(Buffer.concat([Buffer.from(prefix), b]));
    out.push(
      [`base32+${prefix.length}`, p],
      [`base32-unpadded-lower+${prefix.length}`, p.replace(/=+$/, '').toLowerCase()],
    );
  }
  out.push(
    ['hex', b.toString('hex')],
    ['HEX', b.toString('hex').toUpperCase()],
    ['pct-all-lower', pct(b, false)],
    ['pct-all-upper', pct(b, true)],
    ['pct-partly', encodeURIComponent(v)],
    ['pct-every-other-byte', pct(b, true, 2)],
    ['form', new URLSearchParams({ v }).toString().slice(2)],
    ['json', jsonInner(v)],
    ['json-slash', jsonInner(v).replace(/\//g, '\\/')],
    ['json-u-all-lower', uEsc(v, false)],
    ['json-u-all-upper', uEsc(v, true)],
    ['pct-twice', encodeURIComponent(encodeURIComponent(v))],
    ['pct-twice-all', [...b].map((c) => `%25${hex2(c)}`).join('')],
    ['pct-twice-mixed', pctMixed(b)],
    ['x-all', xEsc(b, true)],
    ['x-partly', xEsc(b, false)],
    ['html-dec', htmlRef(v, false)],
    ['html-hex', htmlRef(v, true)],
    ['html-escaped', htmlEscaped(v)],
  );
  return out;
}

// ---- What the upstream received that carries a secret.
function sources(req: IncomingMessage, body: Buffer): { name: string; value: string; encode: boolean }[] {
  const out: { name: string; value: string; encode: boolean }[] = [];
  const auth = String(req.headers['authorization'] ?? '');
  if (auth.startsWith('Bearer ')) {
    out.push(
      { name: 'authorization', value: auth, encode: true },
      { name: 'token', value: auth.slice(7), encode: true },
    );
  } else if (auth.startsWith('Basic ')) {
    const pair = Buffer.from(auth.slice(6), 'base64').toString('utf8');
    out.push(
      { name: 'authorization', value: auth, encode: false },
      { name: 'basic-pair', value: pair, encode: true },
      { name: 'basic-password', value: pair.slice(pair.indexOf(':') + 1), encode: true },
    );
  }
  const url = req.url ?? '';
  const m = /[?&]key=([^&]*)/.exec(url);
  if (m) out.push({ name: 'query-key', value: decodeURIComponent(m[1] as string), encode: true });
  out.push(
    { name: 'url', value: url, encode: false },
    { name: 'request-body', value: body.toString('utf8'), encode: false },
  );
  return out;
}

// The secret itself, as the upstream understood it.
function secretSeen(req: IncomingMessage): string {
  const src = sources(req, Buffer.alloc(0));
  return (
    src.find((x) => x.name === 'token' || x.name === 'basic-password' || x.name === 'query-key') as { value: string }
  ).value;
}

function echoBody(req: IncomingMessage, body: Buffer): Buffer {
  const lines: Buffer[] = [];
  for (const src of sources(req, body)) {
    for (const [enc, bytes] of src.encode
      ? encodings(src.value)
      : [['raw', Buffer.from(src.value)] as [string, Buffer]])
      lines.push(Buffer.concat([Buffer.from(`${src.name} ${enc}: `), bytes]));
    // A JSON document holding the value, as a JSON API would.
    lines.push(Buffer.from(`${src.name} in json: ${JSON.stringify({ echo: src.value })}`));
  }
  return Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')]));
}

// Node writes a header string as latin1: give it the UTF-8 bytes that way.
function wireHeaders(h: Record<string, string | string[]>): Record<string, string | string[]> {
  const latin1 = (v: string): string => Buffer.from(v, 'utf8').toString('latin1');
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.map(latin1) : latin1(v)]));
}

function echoHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const secret = secretSeen(req);
  const sb = Buffer.from(secret);
  const h: Record<string, string | string[]> = {};
  for (const [enc, text] of textEncodings(secret)) {
    if (
      /^(raw|base64\+[012]|base64url\+1|base32\+[13]|hex|HEX|pct-all-upper|pct-partly|pct-twice|form|json|json-u-all-lower|x-all|html-dec|html-escaped)$/.test(
        enc,
      )
    )
      h[`x-echo-${enc.replace(/\+/g, '-')}`] = text;
  }
  h['x-echo-authorization'] = String(req.headers['authorization'] ?? '');
  h['x-echo-url'] = req.url ?? '';
  // A header whose name holds the secret (names are tokens: its hex).
  h[`x-name-${sb.toString('hex')}`] = '1';
  h['set-cookie'] = [`sid=${encodeURIComponent(secret)}; Path=/; HttpOnly`, `raw=${secret}; Secure`];
  return wireHeaders(h);
}

// ---- Delivery: a coding, and whole or in pieces 50 ms apart.
type Coding = 'identity' | 'gzip' | 'deflate' | 'deflate-raw' | 'br' | 'gzip, br';
const CODINGS: Coding[] = ['identity', 'gzip', 'deflate', 'deflate-raw', 'br', 'gzip, br'];

function compressor(
  kind: 'gzip' | 'deflate' | 'deflate-raw' | 'br',
): zlib.Gzip | zlib.Deflate | zlib.DeflateRaw | zlib.BrotliCompress {
  if (kind === 'gzip') return zlib.createGzip();
  if (kind === 'deflate') return zlib.createDeflate();
  if (kind === 'deflate-raw') return zlib.createDeflateRaw();
  return zlib.createBrotliCompress();
}

// Compress piece by piece, flushing after each, so each output piece holds
// exactly the input pieces so far: a boundary inside the secret stays one.
async function compressPieces(kind: 'gzip' | 'deflate' | 'deflate-raw' | 'br', pieces: Buffer[]): Promise<Buffer[]> {
  const z = compressor(kind);
  let cur: Buffer[] = [];
  z.on('data', (c: Buffer) => cur.push(c));
  const out: Buffer[] = [];
  for (const p of pieces) {
    z.write(p);
    await new Promise<void>((r) => z.flush(() => r()));
    await new Promise((r) => setImmediate(r));
    out.push(Buffer.concat(cur));
    cur = [];
  }
  z.end();
  await once(z, 'end');
  out.push(Buffer.concat(cur));
  return out.filter((b) => b.length > 0);
}

async function encodePieces(coding: Coding, pieces: Buffer[]): Promise<Buffer[]> {
  if (coding === 'identity') return pieces;
  if (coding === 'gzip, br') return compressPieces('br', await compressPieces('gzip', pieces));
  return compressPieces(coding, pieces);
}

// Split points in the middle of the first raw secret, its first hex, its
// first base64 (after 1 byte), base32 (after 3) and UTF-16LE.
function splitInsideSecrets(body: Buffer, secret: string): Buffer[] {
  const sb = Buffer.from(secret);
  const cuts = [
    secret,
    sb.toString('hex'),
    Buffer.concat([Buffer.from('x'), sb])
      .toString('base64')
      .slice(4, 40),
    base32(Buffer.concat([Buffer.from('xyz'), sb])).slice(8, 40),
    Buffer.from(secret, 'utf16le'),
  ]
    .map((needle) => body.indexOf(needle))
    .filter((i) => i >= 0)
    .map((i) => i + 7)
    .sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const c of cuts) {
    pieces.push(body.subarray(from, c));
    from = c;
  }
  pieces.push(body.subarray(from));
  return pieces;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function handler(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
  const u = new URL(req.url ?? '/', 'https://x');
  const secret = secretSeen(req);
  const text = echoBody(req, body);
  const headers = echoHeaders(req);
  if (u.pathname === '/v1/redirect') {
    const sb = Buffer.from(secret);
    res.writeHead(302, {
      ...headers,
      location: Buffer.from(
        `https://callback.example/done?t=${encodeURIComponent(secret)}&h=${sb.toString('hex')}&b=${sb.toString('base64url')}&raw=${secret}`,
      ).toString('latin1'),
      'content-type': 'text/plain',
    });
    res.end(`moved; your token was ${secret}\n`);
    return;
  }
  const coding = (u.searchParams.get('coding') ?? 'identity') as Coding;
  const split = u.searchParams.get('split') === '1';
  const type = u.searchParams.get('type') === 'bin' ? 'application/octet-stream' : 'text/plain; charset=utf-8';
  const pieces = await encodePieces(coding, split ? splitInsideSecrets(text, secret) : [text]);
  const wire: Record<string, string | string[] | number> = { ...headers, 'content-type': type };
  // Raw deflate goes under the same name as zlib-wrapped deflate.
  if (coding !== 'identity') wire['content-encoding'] = coding === 'deflate-raw' ? 'deflate' : coding;
  if (!split) {
    const whole = Buffer.concat(pieces);
    res.writeHead(200, { ...wire, 'content-length': whole.length });
    res.end(whole);
    return;
  }
  res.writeHead(200, wire);
  res.flushHeaders();
  for (const [i, p] of pieces.entries()) {
    if (i > 0) await sleep(50);
    res.write(p);
  }
  res.end();
}

// ---- The agent's side.
type Reply = AgentResponse;

const CREDS = [
  { name: 'api', inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"', secret: makeSecret('APITOKEN') },
  { name: 'basic', inject: 'basic_user = "bob"', secret: makeSecret('BASICPW') },
  { name: 'q', inject: 'query = "key"', secret: makeSecret('QUERYKEY') },
  // Non-ASCII: UTF-8 on the wire, \u escapes (a surrogate pair too) in JSON.
  { name: 'uq', inject: 'query = "key"', secret: makeSecret('ÜNÏCØDÉ_€_😀') },
];
const COOKIES = {
  name: 'cookies',
  inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"',
  secret: makeSecret('COOKIETOKEN'),
  extra: 'pass_set_cookie = true\n',
};
const PLAIN = {
  name: 'plain',
  inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"',
  secret: makeSecret('PLAINTOKEN'),
  extra: 'redact_response = false\n',
};
const ALL = [...CREDS, COOKIES, PLAIN];

let s: Stack;
const replies: string[] = [];

async function call(credential: string, path: string): Promise<{ status: number; json: unknown; text: string }> {
  const r = await s.request({
    credential,
    method: 'POST',
    url: s.url('api.example.test', path),
    headers: { 'content-type': 'text/plain' },
    body: 'the agent body, nothing secret',
  });
  replies.push(r.text);
  return r;
}

function bodyOf(reply: Reply): Buffer {
  return Buffer.from(reply.body, reply.body_encoding === 'base64' ? 'base64' : 'utf8');
}

// Every check made on a redacted echo.
function redacted(
  t: Test,
  r: { status: number; json: unknown; text: string },
  name: string,
  secret: string,
  upstreamStatus = 200,
): Reply {
  t.equal(r.status, 200, `postern answered 200 ${r.text.slice(0, 200)}`);
  const reply = r.json as Reply;
  t.equal(reply.status, upstreamStatus, 'the upstream status');
  t.same(exposures(r.text, secret), [], 'no form of the secret reaches the agent');
  t.ok(reply.redactions >= 1, `redactions counted (${reply.redactions})`);
  t.ok(bodyOf(reply).includes(`[REDACTED:${name}]`), 'the body carries the mark');
  t.equal(reply.truncated, false, 'not truncated');
  const marked = Object.entries(reply.headers).filter(
    ([k, v]) => k.includes(`[REDACTED:${name}]`) || [v].flat().some((x) => x.includes(`[REDACTED:${name}]`)),
  );
  t.ok(marked.length >= 5, `headers carry the mark (${marked.length})`);
  return reply;
}

t.before(async () => {
  s = await startStack({ handler });
  for (const c of ALL) {
    s.addCredential(
      c.name,
      `name = "${c.name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n${'extra' in c ? c.extra : ''}[inject]\n${c.inject}\n` +
        `[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
      c.secret,
    );
  }
  await s.approver();
});
t.teardown(() => s.close());

t.test('the secrets hold the characters encodings treat specially', async (t) => {
  for (const c of ALL) t.match(c.secret, /\/.*\+.*=.* .*".*\\.*%.*&/);
});

for (const c of CREDS) {
  t.test(`${c.name}: every encoding, coding and chunking is redacted`, async (t) => {
    const variants: [Coding, boolean, string][] = [
      ...CODINGS.flatMap((coding): [Coding, boolean, string][] => [
        [coding, false, 'text'],
        [coding, true, 'text'],
      ]),
      ['identity', false, 'bin'],
      ['gzip', true, 'bin'],
    ];
    for (const [coding, split, type] of variants) {
      await t.test(`${coding}, ${split ? 'in pieces 50 ms apart' : 'whole'}, ${type}`, async (t) => {
        const before = s.up.requests.length;
        const r = await call(
          c.name,
          `/v1/echo?coding=${encodeURIComponent(coding)}&split=${split ? 1 : 0}&type=${type}`,
        );
        t.equal(s.up.requests.length, before + 1, 'the upstream saw the request');
        const seen = s.up.requests.at(-1)!;
        const auth = String(seen.headers['authorization'] ?? '');
        if (c.name === 'api') t.equal(auth, `Bearer ${c.secret}`, 'the upstream received the secret');
        if (c.name === 'basic')
          t.equal(
            Buffer.from(auth.slice(6), 'base64').toString(),
            `bob:${c.secret}`,
            'the upstream received the secret',
          );
        if (c.inject.startsWith('query'))
          t.equal(
            decodeURIComponent(/[?&]key=([^&]*)/.exec(seen.url)?.[1] ?? ''),
            c.secret,
            'the upstream received the secret',
          );
        const reply = redacted(t, r, c.name, c.secret);
        t.equal(reply.body_encoding, type === 'bin' ? 'base64' : 'utf8');
        t.equal(reply.headers['content-encoding'], undefined, 'no content-encoding comes back');
        t.equal(reply.headers['set-cookie'], undefined, 'Set-Cookie is removed');
        t.ok(`x-name-[REDACTED:${c.name}]` in reply.headers, 'the header named after the secret is renamed');
        // Each encoded source gives one line per encoding and one JSON line.
        const lines = (c.inject.startsWith('query') ? 1 : 2) * (encodings(c.secret).length + 1);
        t.ok(reply.redactions >= lines, `every echoed line redacted (${reply.redactions} >= ${lines})`);
      });
    }
  });

  t.test(`${c.name}: a 3xx with the secret in Location`, async (t) => {
    const r = await call(c.name, '/v1/redirect');
    const reply = redacted(t, r, c.name, c.secret, 302);
    t.ok(reply.redirect, 'the redirect is returned, not followed');
    t.match(
      reply.redirect?.location,
      new RegExp(`^https://callback\\.example/done\\?t=\\[REDACTED:${c.name}\\]&h=\\[REDACTED:${c.name}\\]&b=`),
    );
    t.match(reply.redirect?.location, new RegExp(`&raw=\\[REDACTED:${c.name}\\]$`));
    t.equal(reply.headers['location'], reply.redirect?.location, 'the same in headers');
    t.same(exposures(reply.redirect?.location ?? '', c.secret), []);
  });
}

t.test('pass_set_cookie: Set-Cookie comes back, redacted', async (t) => {
  const r = await call(COOKIES.name, '/v1/echo?coding=gzip&split=1');
  const reply = redacted(t, r, COOKIES.name, COOKIES.secret);
  const cookies = reply.headers['set-cookie'];
  t.ok(Array.isArray(cookies) && cookies.length === 2, `two Set-Cookie values (${JSON.stringify(cookies)})`);
  t.same(cookies, [`sid=[REDACTED:${COOKIES.name}]; Path=/; HttpOnly`, `raw=[REDACTED:${COOKIES.name}]; Secure`]);
});

t.test('redact_response = false returns the secret: the detector sees every form', async (t) => {
  for (const path of [
    '/v1/echo?coding=identity&split=0',
    '/v1/echo?coding=gzip&split=1',
    '/v1/echo?coding=br&split=0&type=bin',
  ]) {
    const r = await call(PLAIN.name, path);
    t.equal(r.status, 200);
    const reply = r.json as Reply;
    t.equal(reply.redactions, 0, `${path}: nothing redacted`);
    t.notOk(r.text.includes('[REDACTED'), 'no mark');
    const found = exposures(r.text, PLAIN.secret);
    for (const form of [
      'raw',
      'hex',
      'base64@0',
      'base64@1',
      'base64@2',
      'base64url@0',
      'base64url@1',
      'base64url@2',
      'base32@0',
      'base32@1',
      'base32@2',
      'base32@3',
      'base32@4',
    ]) {
      t.ok(
        found.some((f) => f.startsWith(`${form} in `)),
        `${path}: ${form} found`,
      );
    }
    for (const view of ['percent', 'json', 'form'])
      t.ok(
        found.some((f) => f.includes(` in ${view} of `)),
        `${path}: found in the ${view} view`,
      );
    t.ok(bodyOf(reply).includes(PLAIN.secret), 'the raw secret is in the body');
    t.equal(reply.headers['x-echo-raw'], PLAIN.secret, 'and in a header');
    // Each line of a new encoding, on its own: not the raw secret, and seen
    // by the detector where that encoding is read.
    const lines = splitLines(bodyOf(reply));
    let checked = 0;
    for (const [name, bytes] of lines) {
      const enc = name.slice(name.indexOf(' ') + 1);
      const want = NEW_FORMS.find(([e]) => e.test(enc))?.[1];
      if (!want || !name.startsWith('token ')) continue;
      checked += 1;
      const seen = exposures(bytes, PLAIN.secret);
      t.notOk(
        seen.some((f) => f.startsWith('raw in as-is of')),
        `${path}: ${enc}: the line does not hold the secret raw`,
      );
      t.ok(
        seen.some((f) => want.test(f)),
        `${path}: ${enc}: the detector sees it (${want}) ${JSON.stringify(seen.slice(0, 3))}`,
      );
    }
    t.equal(
      checked,
      encodings(PLAIN.secret).filter(([e]) => NEW_FORMS.some(([n]) => n.test(e))).length,
      `${path}: every new encoding checked`,
    );
  }
});

// The echo body's lines by their "source encoding" name.
function splitLines(body: Buffer): [string, Buffer][] {
  const out: [string, Buffer][] = [];
  for (let from = 0; from < body.length;) {
    const nl = body.indexOf(0x0a, from);
    const line = body.subarray(from, nl < 0 ? body.length : nl);
    const colon = line.indexOf(': ');
    if (colon > 0) out.push([line.subarray(0, colon).toString('latin1'), line.subarray(colon + 2)]);
    from = nl < 0 ? body.length : nl + 1;
  }
  return out;
}

t.test('no form of any secret in the daemon log or the journal; the journal verifies', async (t) => {
  await s.d.stop();
  const audit = journalBytes(s.h.home);
  t.ok(audit.length > 0, 'the journal has entries');
  const decrypted = await journalText(s.h);
  t.ok(s.d.logs().length > 0, 'the daemon logged something');
  const files = filesUnder(s.h.home, (p) => p === join(s.h.home, 'vault'));
  for (const c of ALL) {
    t.same(exposures(s.d.logs(), c.secret), [], `${c.name}: daemon log`);
    t.same(exposures(audit, c.secret), [], `${c.name}: journal files`);
    t.same(exposures(decrypted, c.secret), [], `${c.name}: decrypted journal entries`);
    for (const f of files) t.same(exposures(readFileSync(f), c.secret), [], `${c.name}: ${f.slice(s.h.home.length)}`);
  }
  for (const c of [...CREDS, COOKIES])
    t.same(exposures(replies.join('\n'), c.secret), [], `${c.name}: no reply at all`);
  const v = cli(s.h, ['audit', 'verify']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});
