// An HTTPS upstream handler that echoes what it received and carries a
// secret (the Authorization header, Bearer or Basic decoded, the injected
// query parameter `key`, the raw URL and the body) back in every encoding an
// upstream may print it in, in the body and in headers (a header name,
// Set-Cookie, and Location on a 3xx for /v1/redirect). Query parameters of
// the request: `coding` (identity, gzip, deflate, deflate-raw, br, "gzip,
// br") as Content-Encoding; `split=1`, the body in pieces written 50 ms
// apart with boundaries inside the secret's forms; `type=bin`, an
// octet-stream body. Shared by the redaction suites of both front doors.
import zlib from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { base32 } from './exposure';

// ---- The secrets: "/", "+", "=", a space, a quote, a backslash, "%", "&".
export function makeSecret(prefix: string): string {
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

// Each as the bytes an upstream would send (text is UTF-8).
export function encodings(v: string): [string, Buffer][] {
  return [
    ...textEncodings(v).map(([name, text]): [string, Buffer] => [name, Buffer.from(text, 'utf8')]),
    ['utf16le', Buffer.from(v, 'utf16le')],
    ['utf16be', Buffer.from(v, 'utf16le').swap16()],
  ];
}

export function textEncodings(v: string): [string, string][] {
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
export type Coding = 'identity' | 'gzip' | 'deflate' | 'deflate-raw' | 'br' | 'gzip, br';
export const CODINGS: Coding[] = ['identity', 'gzip', 'deflate', 'deflate-raw', 'br', 'gzip, br'];

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

export async function echoHandler(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
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
