// Shared pieces of the randomised framing tests: a seeded PRNG, a client
// run under `postern run` that plays many cases concurrently (each on its
// own CONNECT tunnel, its bytes written in the given segments) and stops a
// case as soon as it has its expected answers (or the proxy closes, or it
// stays idle), a strict reader of a sequence of HTTP/1.1 responses, and a
// strict RFC 9112 reader of a client's request bytes (the reference the
// proxy's reading is compared with).
import type { Test } from 'tap';
import { runCaseScript } from './proxy-sequence-client';
import { cli, type Home } from './postern';
import { startStack, type Stack, type StackOptions } from './stack';
import { startRawOrigin, rawResponse, header as originHeader, type ParsedRequest, type RawOrigin } from './raw-origin';
import { journalText, makeCanary } from './canary';
import { exposures } from './exposure';
import { mulberry32 } from './prng';

// The seeded generator of the framing cases (mulberry32).
export class Rng {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)] as T;
  }
  word(n: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet[this.int(alphabet.length)];
    return s;
  }
}

// Seeds from FUZZ_SEEDS (comma-separated) or the defaults given.
export function seeds(defaults: number[]): number[] {
  const env = process.env['FUZZ_SEEDS'];
  return env ? env.split(',').map((x) => Number(x.trim())) : defaults;
}

// A placeholder's length on the wire: `postern-<name>-<16 hex>`.
export const PH = '@@PH@@';
export const dummyPlaceholder = (credential: string): string => `postern-${credential}-0123456789abcdef`;

// ---------------------------------------------------------------------------
// The client, run under `postern run`.

export const FUZZ_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const ph = process.env[input.phVar];
const fill = (b64) => Buffer.from(Buffer.from(b64, 'base64').toString('latin1').split(input.dummy).join(ph), 'latin1');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// How many complete responses are in buf (1xx skipped), loosely.
function count(buf, methods) {
  let n = 0;
  let at = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', at);
    if (end === -1) return n;
    const head = buf.subarray(at, end).toString('latin1');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
    if (!m) return n;
    const status = Number(m[1]);
    let p = end + 4;
    if (status < 200) { at = p; continue; }
    const method = methods[n] || 'GET';
    const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (method === 'HEAD' || status === 204 || status === 304) { n++; at = p; continue; }
    if (cl) {
      if (buf.length < p + Number(cl[1])) return n;
      n++; at = p + Number(cl[1]); continue;
    }
    if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      for (;;) {
        const eol = buf.indexOf('\r\n', p);
        if (eol === -1) return n;
        const size = parseInt(buf.subarray(p, eol).toString('latin1'), 16);
        if (Number.isNaN(size)) return n;
        if (size === 0) {
          const fin = buf.indexOf('\r\n\r\n', eol);
          if (fin === -1) return n;
          p = fin + 4;
          break;
        }
        p = eol + 2 + size + 2;
        if (p > buf.length) return n;
      }
      n++; at = p; continue;
    }
    return n; // until the close
  }
}

function run(c) {
  return new Promise((resolve) => {
    const started = Date.now();
    const sock = net.connect(Number(proxy.port), proxy.hostname);
    let got = Buffer.alloc(0);
    let done = false;
    let idle = null;
    let stray = null;
    let writesDone = false;
    const finish = (how) => {
      if (done) return;
      done = true;
      clearTimeout(hard);
      clearTimeout(idle);
      clearTimeout(stray);
      sock.destroy();
      resolve({ id: c.id, raw: got.toString('base64'), how, ms: Date.now() - started });
    };
    const hard = setTimeout(() => finish('hard-timeout'), c.hard || 20000);
    const poke = () => {
      clearTimeout(idle);
      idle = setTimeout(() => finish('idle'), c.idle || 4000);
      if (writesDone && stray === null && c.expect > 0 && count(got, c.methods || []) >= c.expect)
        stray = setTimeout(() => finish('expected'), c.strayMs || 150);
    };
    const writeAll = async (s) => {
      for (const w of c.writes) {
        if (w.delay) await sleep(w.delay);
        if (!s.destroyed) s.write(fill(w.data));
      }
      writesDone = true;
      if (c.endAfter) s.end();
      poke();
    };
    sock.on('error', (e) => finish('error: ' + e.message));
    sock.once('connect', () => sock.write('CONNECT ' + c.connect + ' HTTP/1.1\r\nHost: ' + c.connect + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
    let head = Buffer.alloc(0);
    const onHead = (d) => {
      head = Buffer.concat([head, d]);
      if (head.indexOf('\r\n\r\n') === -1) return;
      sock.off('data', onHead);
      if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1'))) return finish('connect refused: ' + head.toString('latin1').slice(0, 200));
      const s = tls.connect({ socket: sock, servername: c.connect.split(':')[0], ca, ALPNProtocols: ['http/1.1'] });
      s.on('error', () => undefined);
      s.on('secureConnect', () => writeAll(s));
      s.on('data', (d) => { got = Buffer.concat([got, d]); poke(); });
      s.on('close', () => finish('closed'));
    };
    sock.on('data', onHead);
  });
}

(async () => {
  const queue = input.cases.slice();
  const workers = [];
  for (let i = 0; i < (input.concurrency || 4); i++)
    workers.push((async () => {
      for (;;) {
        const c = queue.shift();
        if (!c) return;
        process.stdout.write(JSON.stringify(await run(c)) + '\n');
      }
    })());
  await Promise.all(workers);
})();
`;

export interface FuzzCase {
  id: string;
  connect: string;
  writes: { data: string; delay?: number }[]; // data base64 (latin1 bytes, with the dummy placeholder)
  expect: number; // answers after which (plus strayMs) the case ends
  methods?: string[];
  idle?: number;
  strayMs?: number;
  endAfter?: boolean;
}

export interface FuzzGot {
  id: string;
  raw: string;
  how: string; // 'expected' | 'closed' | 'idle' | 'hard-timeout' | 'error: …' | 'connect refused: …'
  ms: number;
}

export function runFuzzClient(
  h: Home,
  cases: FuzzCase[],
  o: { phVar: string; dummy: string; concurrency?: number; tag: string },
): Promise<{ got: Map<string, FuzzGot>; stderr: string; code: number | null; all: Buffer }> {
  const input = { cases, phVar: o.phVar, dummy: o.dummy, concurrency: o.concurrency ?? 4 };
  return runCaseScript<FuzzGot>(h, `fuzz-${o.tag}`, FUZZ_CLIENT, input);
}

// ---------------------------------------------------------------------------
// A strict reader of the responses a client received (RFC 9112): status
// line, token field names, no obs-fold, one content-length of digits or
// chunked (never both), 1xx read past. `methods[i]` is the method of the
// i-th request (HEAD: no body).

export interface StrictResponse {
  status: number;
  interim: number[];
  headers: [string, string][];
  body: Buffer;
  framing: 'length' | 'chunked' | 'none' | 'close';
}

export function header(h: [string, string][], name: string): string | undefined {
  const all = h.filter(([k]) => k === name).map(([, v]) => v);
  return all.length === 0 ? undefined : all.join(', ');
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function readResponses(
  raw: Buffer,
  methods: string[] = [],
): { responses: StrictResponse[]; error: string | null; rest: Buffer } {
  const out: StrictResponse[] = [];
  let at = 0;
  const interim: number[] = [];
  const line = (): string | null => {
    const eol = raw.indexOf('\r\n', at);
    if (eol === -1) return null;
    const l = raw.subarray(at, eol).toString('latin1');
    at = eol + 2;
    return l;
  };
  for (;;) {
    if (at >= raw.length) return { responses: out, error: null, rest: Buffer.alloc(0) };
    const start = at;
    const status = line();
    if (status === null) return { responses: out, error: 'an incomplete status line', rest: raw.subarray(start) };
    const m = /^HTTP\/1\.1 ([1-5]\d\d) [\t\x20-\x7e\x80-\xff]*$/.exec(status);
    if (!m)
      return {
        responses: out,
        error: `not a status line: ${JSON.stringify(status.slice(0, 80))}`,
        rest: raw.subarray(start),
      };
    const headers: [string, string][] = [];
    for (;;) {
      const l = line();
      if (l === null) return { responses: out, error: 'an incomplete head', rest: raw.subarray(start) };
      if (l === '') break;
      const colon = l.indexOf(':');
      const name = l.slice(0, colon);
      const value = l.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
      if (colon <= 0 || !TOKEN.test(name) || !/^[\t\x20-\x7e\x80-\xff]*$/.test(value))
        return {
          responses: out,
          error: `a bad field line ${JSON.stringify(l.slice(0, 80))}`,
          rest: raw.subarray(start),
        };
      headers.push([name.toLowerCase(), value]);
    }
    const code = Number(m[1]);
    if (code < 200) {
      interim.push(code);
      continue;
    }
    const method = methods[out.length] ?? 'GET';
    const te = header(headers, 'transfer-encoding');
    const cl = headers.filter(([k]) => k === 'content-length').map(([, v]) => v);
    const r: StrictResponse = {
      status: code,
      interim: interim.splice(0),
      headers,
      body: Buffer.alloc(0),
      framing: 'none',
    };
    if (method === 'HEAD' || code === 204 || code === 304) {
      out.push(r);
      continue;
    }
    if (te !== undefined && cl.length > 0) return { responses: out, error: 'both framings', rest: raw.subarray(start) };
    if (te !== undefined) {
      if (te.toLowerCase() !== 'chunked')
        return { responses: out, error: `transfer-encoding ${te}`, rest: raw.subarray(start) };
      const parts: Buffer[] = [];
      for (;;) {
        const sl = line();
        if (sl === null) return { responses: out, error: 'an incomplete chunked body', rest: raw.subarray(start) };
        const sm = /^([0-9a-fA-F]{1,15})(;[^\r\n]*)?$/.exec(sl);
        if (!sm) return { responses: out, error: `a chunk size ${JSON.stringify(sl)}`, rest: raw.subarray(start) };
        const n = parseInt(sm[1] as string, 16);
        if (n === 0) {
          for (;;) {
            const tl = line();
            if (tl === null) return { responses: out, error: 'incomplete trailers', rest: raw.subarray(start) };
            if (tl === '') break;
          }
          break;
        }
        if (at + n + 2 > raw.length) return { responses: out, error: 'an incomplete chunk', rest: raw.subarray(start) };
        parts.push(raw.subarray(at, at + n));
        if (raw.subarray(at + n, at + n + 2).toString('latin1') !== '\r\n')
          return { responses: out, error: 'no CRLF after a chunk', rest: raw.subarray(start) };
        at += n + 2;
      }
      r.body = Buffer.concat(parts);
      r.framing = 'chunked';
      out.push(r);
      continue;
    }
    if (cl.length > 1 || (cl.length === 1 && !/^\d{1,15}$/.test(cl[0] as string)))
      return { responses: out, error: `content-length ${JSON.stringify(cl)}`, rest: raw.subarray(start) };
    if (cl.length === 1) {
      const n = Number(cl[0]);
      if (at + n > raw.length) return { responses: out, error: 'an incomplete body', rest: raw.subarray(start) };
      r.body = raw.subarray(at, at + n);
      r.framing = 'length';
      at += n;
      out.push(r);
      continue;
    }
    r.body = raw.subarray(at);
    r.framing = 'close';
    at = raw.length;
    out.push(r);
  }
}

// The §6.3 error of a refusal, or null when the response is not one.
export function refusalOf(r: StrictResponse, method = 'GET'): { code: string; audit_seq: number } | null {
  const code = header(r.headers, 'x-postern-error');
  if (code === undefined) return null;
  // The answer to HEAD has no body, a refusal's JSON neither.
  if (method === 'HEAD' && r.body.length === 0 && /json/.test(header(r.headers, 'content-type') ?? ''))
    return { code, audit_seq: -1 };
  try {
    const e = (JSON.parse(r.body.toString('utf8')) as { error: { code: string; audit_seq: number } }).error;
    return typeof e.code === 'string' ? e : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------
// The strict reference reading of a client's request bytes (RFC 9112, with
// postern's documented decisions where they narrow it: transfer-encoding
// only `chunked` and not on HTTP/1.0). It reads requests in order until the
// bytes end, the framing is in error, or a request closes the connection.

export interface RefRequest {
  method: string;
  target: string;
  version: string;
  headers: [string, string][]; // names lower-cased, values trimmed
  body: Buffer;
  closes: boolean; // HTTP/1.0 without keep-alive, connection: close, upgrade
  closesIfServed: boolean; // closes, or HTTP/1.0 with keep-alive
  start: number;
  end: number;
}

export interface RefReading {
  requests: RefRequest[];
  // What stopped the reading: the end of the bytes, a framing error (with
  // where), bytes that end in the middle of a request, or a request after
  // which the connection closes (nothing more may be read).
  stop:
    | { kind: 'end' }
    | { kind: 'error'; why: string; at: number }
    | { kind: 'incomplete'; at: number }
    | { kind: 'closed'; at: number };
}

const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function readRequests(raw: Buffer): RefReading {
  const requests: RefRequest[] = [];
  let at = 0;
  for (;;) {
    // RFC 9112 §2.2: empty lines before a request line may be ignored
    // (Node's parser skips CRLF and LF there).
    while (at < raw.length && (raw[at] === 0x0a || (raw[at] === 0x0d && raw[at + 1] === 0x0a)))
      at += raw[at] === 0x0d ? 2 : 1;
    if (at >= raw.length) return { requests, stop: { kind: 'end' } };
    const start = at;
    const err = (why: string): RefReading => ({ requests, stop: { kind: 'error', why, at: start } });
    const inc = (): RefReading => ({ requests, stop: { kind: 'incomplete', at: start } });
    // Lines: CRLF only; a lone CR or LF anywhere in the head is an error.
    const headEnd = raw.indexOf('\r\n\r\n', at);
    const headText = raw.subarray(at, headEnd === -1 ? raw.length : headEnd).toString('latin1');
    const bare = /\r(?!\n)|(?<!\r)\n/.exec(headText);
    if (bare) return err('a bare CR or LF in the head');
    if (headEnd === -1) return inc();
    const lines = headText.split('\r\n');
    const rl = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) +(\S+) HTTP\/(1\.[01])$/.exec(lines[0] ?? '');
    if (!rl) return err(`a request line ${JSON.stringify((lines[0] ?? '').slice(0, 60))}`);
    if (!/^[\x21-\x7e]+$/.test(rl[2] as string)) return err('a target byte');
    const headers: [string, string][] = [];
    for (const l of lines.slice(1)) {
      if (/^[ \t]/.test(l)) return err('obs-fold');
      const colon = l.indexOf(':');
      if (colon <= 0) return err(`a field line without a name ${JSON.stringify(l.slice(0, 40))}`);
      const name = l.slice(0, colon);
      if (!TOKEN.test(name)) return err(`a field name ${JSON.stringify(name)}`);
      const value = l.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
      if (!FIELD_VALUE.test(value)) return err(`a control byte in ${name}`);
      headers.push([name.toLowerCase(), value]);
    }
    const version = rl[3] as string;
    let p = headEnd + 4;
    const tes = headers.filter(([k]) => k === 'transfer-encoding').map(([, v]) => v);
    const cls = headers.filter(([k]) => k === 'content-length').map(([, v]) => v);
    let body: Buffer = Buffer.alloc(0);
    if (tes.length > 0) {
      if (cls.length > 0) return err('content-length beside transfer-encoding');
      if (version === '1.0') return err('transfer-encoding on HTTP/1.0');
      // The body is chunked when chunked is the last coding (RFC 9112 §6.3;
      // postern then refuses any other coding, on a connection whose framing
      // is still certain); without chunked last the length is unknowable.
      const codings = tes
        .join(',')
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .filter((x) => x !== '');
      if (codings[codings.length - 1] !== 'chunked') return err(`transfer-encoding ${JSON.stringify(tes)}`);
      const parts: Buffer[] = [];
      for (;;) {
        const eol = raw.indexOf('\r\n', p);
        if (eol === -1) {
          if (/[\r\n]/.test(raw.subarray(p).toString('latin1'))) return err('a bare CR or LF in a chunk line');
          return inc();
        }
        const sl = raw.subarray(p, eol).toString('latin1');
        // chunk-size [ chunk-ext ]: BWS ; BWS name [ BWS = BWS ( token / quoted-string ) ]
        const sm =
          /^([0-9a-fA-F]{1,15})((?:[ \t]*;[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*=[ \t]*(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"))?)*)$/.exec(
            sl,
          );
        if (!sm) return err(`a chunk line ${JSON.stringify(sl.slice(0, 40))}`);
        const n = parseInt(sm[1] as string, 16);
        p = eol + 2;
        if (n === 0) {
          // trailers
          for (;;) {
            const te = raw.indexOf('\r\n', p);
            if (te === -1) return inc();
            const tl = raw.subarray(p, te).toString('latin1');
            if (/[\r\n]/.test(tl)) return err('a bare CR or LF in a trailer');
            p = te + 2;
            if (tl === '') break;
            if (/^[ \t]/.test(tl)) return err('obs-fold in a trailer');
            const c = tl.indexOf(':');
            if (c <= 0 || !TOKEN.test(tl.slice(0, c))) return err('a trailer name');
            if (!FIELD_VALUE.test(tl.slice(c + 1))) return err('a control byte in a trailer');
          }
          break;
        }
        if (p + n + 2 > raw.length) return inc();
        parts.push(raw.subarray(p, p + n));
        if (raw.subarray(p + n, p + n + 2).toString('latin1') !== '\r\n') return err('no CRLF after chunk data');
        p += n + 2;
      }
      body = Buffer.concat(parts);
    } else if (cls.length > 0) {
      const values = cls.flatMap((v) => v.split(',').map((x) => x.trim()));
      if (!values.every((v) => /^\d{1,15}$/.test(v))) return err(`content-length ${JSON.stringify(cls)}`);
      const n = Number(values[0]);
      if (!values.every((v) => Number(v) === n)) return err(`content-length ${JSON.stringify(cls)}`);
      if (p + n > raw.length) return inc();
      body = raw.subarray(p, p + n);
      p += n;
    }
    const conn = (
      headers
        .filter(([k]) => k === 'connection')
        .map(([, v]) => v)
        .join(',') || ''
    ).toLowerCase();
    const tokens = conn.split(',').map((x) => x.trim());
    const closes =
      tokens.includes('close') ||
      (version === '1.0' && !tokens.includes('keep-alive')) ||
      headers.some(([k]) => k === 'upgrade');
    // An HTTP/1.0 keep-alive request: its streamed (served) answer closes
    // the connection; a refusal, of known length, need not.
    const closesIfServed = closes || version === '1.0';
    requests.push({
      method: rl[1] as string,
      target: rl[2] as string,
      version,
      headers,
      body,
      closes,
      closesIfServed,
      start,
      end: p,
    });
    at = p;
    if (closes) return { requests, stop: at >= raw.length ? { kind: 'end' } : { kind: 'closed', at } };
  }
}

export function refHeader(r: RefRequest, name: string): string | undefined {
  return header(r.headers, name);
}

// Bytes for a failure message: printable, the rest escaped.
export function show(b: Buffer | string, max = 1500): string {
  const s = typeof b === 'string' ? b : b.toString('latin1');
  return JSON.stringify(s.length > max ? `${s.slice(0, max)}…(${s.length} bytes)` : s);
}

// ---- The set-up and the end every framing file shares -----------------------

// An origin that answers each request with `body(q)`, framed exactly, and
// the Authorization it received in `x-echo-auth` (redaction's work).
export function echoOrigin(s: Stack, body: (q: ParsedRequest, auth: string) => string): Promise<RawOrigin> {
  return startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, () => ({
    read: 'declared',
    respond: (q) => {
      const auth = originHeader(q, 'authorization') ?? '-';
      const text = body(q, auth);
      return rawResponse(
        200,
        [
          ['content-length', String(Buffer.byteLength(text))],
          ['x-echo-auth', auth],
        ],
        text,
      );
    },
  }));
}

// The credential `api` for HOST:port, its placeholder in API_TOKEN.
export function addApiCredential(s: Stack, port: number, secret: string, methods = ['GET', 'POST']): void {
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nenv = ["API_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ${JSON.stringify(methods)}\n`,
    secret,
  );
}

// A stack resolving api.example.test to loopback, an origin there that
// answers each request with its target, the credential `api` for it
// (secret a canary labelled `label`) and the approver running: the set-up
// of the rows that count answers per request.
export async function targetEchoStack(
  t: Test,
  label: string,
  options: StackOptions = {},
): Promise<{ s: Stack; origin: RawOrigin; A: string; secret: string }> {
  const s = await startStack({ records: { 'api.example.test': { A: ['127.0.0.1'] } }, ...options });
  t.teardown(() => s.close());
  const origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, () => ({
    read: 'declared',
    respond: (q) => rawResponse(200, [['content-length', String(q.target.length)]], q.target),
  }));
  t.teardown(() => origin.close());
  const secret = makeCanary(label);
  addApiCredential(s, origin.port, secret);
  await s.approver();
  return { s, origin, A: `api.example.test:${origin.port}`, secret };
}

// After the cases: the daemon stopped, no form of the secret in any byte a
// client got, the daemon's log or the decrypted journal; the journal
// verifies.
export async function nothingLeaked(t: Test, s: Stack, received: Buffer[], secret: string): Promise<void> {
  await s.d.stop();
  let leaked = 0;
  received.forEach((b, i) => {
    const e = exposures(b, secret);
    if (e.length > 0 && leaked++ < 5) t.fail(`client bytes ${i} hold the secret (${e.join(', ')}): ${show(b, 3000)}`);
  });
  t.equal(leaked, 0, 'the secret is in no byte a client got');
  t.same(exposures(s.d.logs(), secret), [], 'not in the daemon log');
  t.same(exposures(await journalText(s.h), secret), [], 'not in the journal');
  const v = cli(s.h, ['audit', 'verify']);
  t.equal(v.code, 0, `the journal verifies: ${v.stdout} ${v.stderr}`);
}
