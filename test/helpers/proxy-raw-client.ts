// A client of the proxy front door that speaks raw HTTP/1.1, run under
// `postern run`, for tests that need the exact bytes a proxied client
// receives: it reads requests from a JSON file, sends each on its own
// CONNECT tunnel (the run's proxy token from HTTPS_PROXY, TLS trusting only
// SSL_CERT_FILE), and prints one JSON line per request with the raw
// response bytes. `parseRaw` reads such a response (chunked undone).
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliBytes } from './cli-bytes';
import type { Home } from './postern';

// The client run under `postern run`: reads the requests from the file named
// by its argument, sends each on its own CONNECT tunnel, and prints one JSON
// line per request with the raw response bytes (or none, when the
// connection closed without one). `@@PH:VAR@@` in a request stands for the
// placeholder in $VAR, `@@B64:USER:VAR@@` for base64("USER:" + $VAR),
// `@@LEN@@` for the body's length. Each answer carries `ms`, from the
// body's last byte written to the answer (or the close).
export const RAW_PROXY_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const fill = (text) =>
  text
    .replace(/@@PH:([A-Z_]+)@@/g, (_m, v) => process.env[v])
    .replace(/@@B64:([a-z]+):([A-Z_]+)@@/g, (_m, u, v) => Buffer.from(u + ':' + process.env[v]).toString('base64'));

// A response is complete at its content-length, at the last chunk, or at close.
function complete(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return false;
  const head = buf.subarray(0, end).toString('latin1');
  const body = buf.subarray(end + 4);
  const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (cl) return body.length >= Number(cl[1]);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return body.includes('\r\n0\r\n\r\n') || body.subarray(0, 5).toString() === '0\r\n\r\n';
  return false;
}

function send(r) {
  return new Promise((resolve) => {
    const c = net.connect(Number(proxy.port), proxy.hostname);
    let got = Buffer.alloc(0);
    let done = false;
    let sentAt = 0;
    const finish = (what) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      c.destroy();
      resolve({ id: r.id, ms: sentAt ? Date.now() - sentAt : -1, ...what });
    };
    const timer = setTimeout(() => finish({ error: 'timeout', raw: got.toString('base64') }), r.timeoutMs ?? 15000);
    c.on('error', (e) => finish({ error: String(e) }));
    c.once('connect', () => c.write('CONNECT ' + r.connect + ' HTTP/1.1\r\nHost: ' + r.connect + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
    let head = Buffer.alloc(0);
    const onHead = (d) => {
      head = Buffer.concat([head, d]);
      if (head.indexOf('\r\n\r\n') === -1) return;
      c.off('data', onHead);
      if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1'))) return finish({ error: 'CONNECT refused: ' + head.toString('latin1') });
      const s = tls.connect({ socket: c, servername: r.connect.split(':')[0], ca, ALPNProtocols: ['http/1.1'] });
      s.on('error', (e) => finish({ error: String(e), raw: got.toString('base64') }));
      s.on('secureConnect', () => {
        const body = r.bodyRepeat
          ? Buffer.from(r.bodyRepeat.text.repeat(r.bodyRepeat.times), 'latin1')
          : Buffer.from(r.body ?? '', 'base64');
        s.write(Buffer.from(fill(r.head).replace('@@LEN@@', String(body.length)), 'utf8'));
        s.write(body, () => {
          sentAt = Date.now();
          // A client that goes away mid-request: half-closes or resets.
          if (r.cut) setTimeout(() => (r.cut.how === 'end' ? s.end() : c.destroy()), r.cut.afterMs);
        });
      });
      s.on('data', (d) => {
        got = Buffer.concat([got, d]);
        if (complete(got)) finish({ raw: got.toString('base64') });
      });
      s.on('close', () => finish({ raw: got.toString('base64'), closed: true }));
    };
    c.on('data', onHead);
  });
}

(async () => {
  for (const r of JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))) process.stdout.write(JSON.stringify(await send(r)) + '\n');
})();
`;

export interface Wire {
  id: number | string;
  connect: string;
  head: string;
  body?: string; // base64
  bodyRepeat?: { text: string; times: number }; // instead of body
  timeoutMs?: number; // 15 s unless given
  cut?: { how: 'end' | 'destroy'; afterMs: number }; // after the last byte written
}

export interface Answer {
  id: number | string;
  ms: number; // from the last byte written to the answer; -1 if never sent
  raw?: string;
  closed?: boolean;
  error?: string;
}

export interface Parsed {
  status: number;
  head: string;
  headers: Record<string, string>;
  body: string;
  bodyBytes: Buffer;
}

export function parseRaw(raw: Buffer): Parsed {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, end).toString('latin1');
  const headers: Record<string, string> = {};
  for (const line of head.split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = raw.subarray(end + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const eol = body.indexOf('\r\n', at);
      const n = parseInt(body.subarray(at, eol).toString(), 16);
      if (!(n > 0)) break;
      parts.push(body.subarray(eol + 2, eol + 2 + n));
      at = eol + 2 + n + 2;
    }
    body = Buffer.concat(parts);
  }
  return { status: Number(head.split(' ')[1]), head, headers, body: body.toString('utf8'), bodyBytes: body };
}

// Each request on its own tunnel, under one `postern run` with `args`
// before `--`; the answers by id, and what the run printed.
export async function sendRaw(
  h: Home,
  requests: Wire[],
  args: string[] = [],
): Promise<{ answers: Map<number | string, Answer>; code: number | null; stdout: Buffer; stderr: string }> {
  const file = join(h.dir, `raw-requests-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(requests));
  const script = join(h.dir, 'raw-proxy-client.js');
  writeFileSync(script, RAW_PROXY_CLIENT);
  const run = await cliBytes(h.env, ['run', ...args, '--', process.execPath, script, file]);
  const answers = new Map<number | string, Answer>();
  for (const line of run.stdout.toString().split('\n').filter(Boolean)) {
    const a = JSON.parse(line) as Answer;
    answers.set(a.id, a);
  }
  return { answers, code: run.code, stdout: run.stdout, stderr: run.stderr };
}

// A client of the proxy front door that keeps ONE connection alive across
// its requests, so a response that runs into the next one shows: it opens a
// CONNECT tunnel (the run's proxy token, TLS trusting only SSL_CERT_FILE),
// writes each request in turn on it and reads exactly one response with a
// strict HTTP/1.1 parser of its own (status line and header lines as RFC
// 9112 writes them, no obs-fold; 1xx responses other than 101 recorded and
// read past; no body for HEAD, 204 and 304; one Content-Length of digits;
// chunked, last, with extensions and trailers, never beside a
// Content-Length; otherwise until the close). Then it waits STRAY_MS and
// keeps what else arrives: bytes beyond the message's end ("stray"). A
// request after a closed connection (or one it gave up on: a parse error, a
// timeout) goes on a new tunnel. Input: {connect, requests: [{id, head}]};
// `@@PH:VAR@@` in a head stands for the placeholder in $VAR. Output: one
// JSON line per request (see KeptAliveAnswer).
export const KEPT_ALIVE_PROXY_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const fill = (text) => text.replace(/@@PH:([A-Z_]+)@@/g, (_m, v) => process.env[v]);
const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const READ_MS = 15000;
const STRAY_MS = 150;
const TOKEN = /^[!#$%&'*+.^_\x60|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

function fail(kind, message) {
  const e = new Error(message);
  e.kind = kind; // 'incomplete' (closed too soon), 'malformed' or 'timeout'
  return e;
}

// One tunnel's bytes after TLS, read in order.
class Conn {
  constructor(s, n) {
    this.s = s;
    this.n = n;
    this.buf = Buffer.alloc(0);
    this.raw = [];
    this.closed = false;
    this.waiter = null;
    s.on('data', (d) => {
      this.raw.push(d);
      this.buf = Buffer.concat([this.buf, d]);
      this.wake();
    });
    s.on('close', () => {
      this.closed = true;
      this.wake();
    });
    s.on('error', () => undefined); // the close follows
  }
  wake() {
    const w = this.waiter;
    this.waiter = null;
    if (w) w();
  }
  // true on more bytes or the close; false after ms without either.
  more(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        resolve(false);
      }, Math.max(0, ms));
      this.waiter = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }
  take(n) {
    const out = Buffer.from(this.buf.subarray(0, n));
    this.buf = this.buf.subarray(n);
    return out;
  }
}

async function wait(c, deadline, what) {
  if (c.closed) throw fail('incomplete', 'the connection closed ' + what);
  if (!(await c.more(deadline - Date.now()))) throw fail('timeout', 'nothing more in time ' + what);
}

async function line(c, deadline) {
  for (;;) {
    const at = c.buf.indexOf('\r\n');
    if (at >= 0) return c.take(at + 2).subarray(0, at).toString('latin1');
    if (c.buf.length > 65536) throw fail('malformed', 'a line longer than 64 KiB');
    await wait(c, deadline, 'inside a line');
  }
}

// n bytes; on a close before them, what came is pushed to keep first.
async function exactly(c, n, deadline, keep) {
  while (c.buf.length < n) {
    if (c.closed) keep.push(c.take(c.buf.length));
    await wait(c, deadline, (n - c.buf.length) + ' bytes short');
  }
  return c.take(n);
}

async function untilClose(c, deadline) {
  while (!c.closed) await wait(c, deadline, '');
  return c.take(c.buf.length);
}

function fieldLine(l) {
  const colon = l.indexOf(':');
  if (colon <= 0) throw fail('malformed', 'not a field line: ' + JSON.stringify(l.slice(0, 80)));
  const name = l.slice(0, colon);
  const value = l.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
  if (!TOKEN.test(name)) throw fail('malformed', 'a field name that is not a token: ' + JSON.stringify(name));
  if (!FIELD_VALUE.test(value)) throw fail('malformed', 'a control character in the value of ' + name);
  return [name.toLowerCase(), value];
}

async function head(c, deadline) {
  const lines = [await line(c, deadline)];
  const m = /^HTTP\/1\.1 ([1-5][0-9]{2}) [\t\x20-\x7e\x80-\xff]*$/.exec(lines[0]);
  if (!m) throw fail('malformed', 'not an HTTP/1.1 status line: ' + JSON.stringify(lines[0].slice(0, 80)));
  const fields = [];
  for (;;) {
    const l = await line(c, deadline);
    if (l === '') break;
    if (/^[ \t]/.test(l)) throw fail('malformed', 'an obs-fold continuation line');
    lines.push(l);
    fields.push(fieldLine(l));
  }
  return { status: Number(m[1]), fields, text: lines.join('\r\n') };
}

// RFC 9112 section 6.3, strictly.
function framing(method, status, fields) {
  if (method === 'HEAD' || status === 204 || status === 304) return { kind: 'none' };
  if (status === 101) return { kind: 'close' };
  const te = fields.filter(([k]) => k === 'transfer-encoding').map(([, v]) => v);
  const cl = fields.filter(([k]) => k === 'content-length').map(([, v]) => v);
  if (te.length > 0 && cl.length > 0) throw fail('malformed', 'both transfer-encoding and content-length');
  if (te.length > 0) {
    const codings = te.join(',').split(',').map((x) => x.trim().toLowerCase());
    return codings[codings.length - 1] === 'chunked' ? { kind: 'chunked' } : { kind: 'close' };
  }
  if (cl.length > 1 || (cl.length === 1 && !/^[0-9]{1,15}$/.test(cl[0])))
    throw fail('malformed', 'content-length ' + JSON.stringify(cl));
  return cl.length === 1 ? { kind: 'length', n: Number(cl[0]) } : { kind: 'close' };
}

async function chunks(c, deadline, body) {
  for (;;) {
    const l = await line(c, deadline);
    const m = /^([0-9a-fA-F]{1,15})((?:[ \t]*;[^\r\n]*)?)$/.exec(l);
    if (!m) throw fail('malformed', 'a chunk size line ' + JSON.stringify(l.slice(0, 40)));
    const n = parseInt(m[1], 16);
    if (n === 0) break;
    body.push(await exactly(c, n, deadline, body));
    if ((await exactly(c, 2, deadline, [])).toString('latin1') !== '\r\n') throw fail('malformed', 'no CRLF after chunk data');
  }
  const trailers = [];
  for (;;) {
    const l = await line(c, deadline);
    if (l === '') return trailers;
    fieldLine(l);
    trailers.push(l);
  }
}

async function response(c, method) {
  const deadline = Date.now() + READ_MS;
  const r = { status: null, interim: [], head: null, framing: null, body: [], trailers: [], complete: false, error: null };
  try {
    for (;;) {
      const h = await head(c, deadline);
      if (h.status < 200 && h.status !== 101) {
        r.interim.push(h.text);
        continue;
      }
      r.status = h.status;
      r.head = h.text;
      const f = framing(method, h.status, h.fields);
      r.framing = f.kind;
      if (f.kind === 'length') r.body.push(await exactly(c, f.n, deadline, r.body));
      else if (f.kind === 'chunked') r.trailers = await chunks(c, deadline, r.body);
      else if (f.kind === 'close') r.body.push(await untilClose(c, deadline));
      r.complete = true;
      return r;
    }
  } catch (e) {
    r.error = (e.kind || 'error') + ': ' + e.message;
    return r;
  }
}

// What arrives within STRAY_MS after a message's end.
async function strays(c) {
  const until = Date.now() + STRAY_MS;
  while (!c.closed && Date.now() < until) await c.more(until - Date.now());
  return c.take(c.buf.length);
}

let tunnels = 0;
function open(connect) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(proxy.port), proxy.hostname);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('the tunnel did not open in time'));
    }, READ_MS);
    const failed = (e) => {
      clearTimeout(timer);
      sock.destroy();
      reject(e);
    };
    sock.on('error', failed);
    sock.once('connect', () =>
      sock.write('CONNECT ' + connect + ' HTTP/1.1\r\nHost: ' + connect + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'),
    );
    let got = Buffer.alloc(0);
    const onHead = (d) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end === -1) return;
      sock.off('data', onHead);
      if (!/^HTTP\/1\.1 200 /.test(got.toString('latin1')) || got.length !== end + 4)
        return failed(new Error('CONNECT answered: ' + got.toString('latin1').slice(0, 300)));
      const s = tls.connect({ socket: sock, servername: connect.split(':')[0], ca, ALPNProtocols: ['http/1.1'] });
      const c = new Conn(s, ++tunnels);
      s.once('error', failed);
      s.once('secureConnect', () => {
        clearTimeout(timer);
        s.off('error', failed);
        resolve(c);
      });
    };
    sock.on('data', onHead);
  });
}

(async () => {
  let c = null;
  for (const req of input.requests) {
    const reopened = c !== null && c.closed;
    if (c === null || c.closed) {
      try {
        c = await open(input.connect);
      } catch (e) {
        process.stdout.write(JSON.stringify({ id: req.id, error: 'open: ' + e.message, reopened }) + '\n');
        c = null;
        continue;
      }
    }
    c.s.write(Buffer.from(fill(req.head), 'utf8'));
    const r = await response(c, req.head.split(' ')[0]);
    const stray = r.complete ? await strays(c) : c.take(c.buf.length);
    const closed = c.closed;
    if (!r.complete && !c.closed) {
      // Given up on: nothing after it can be read on this connection.
      c.s.destroy();
      c.closed = true;
    }
    const out = {
      id: req.id,
      tunnel: c.n,
      reopened,
      status: r.status,
      interim: r.interim,
      head: r.head,
      framing: r.framing,
      body: Buffer.concat(r.body).toString('base64'),
      trailers: r.trailers,
      complete: r.complete,
      stray: stray.toString('base64'),
      raw: Buffer.concat(c.raw.splice(0)).toString('base64'),
      closed,
      error: r.error,
    };
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  if (c && !c.closed) c.s.end();
})();
`;

export interface KeptAliveRequest {
  id: string;
  head: string; // the whole request (no body), `@@PH:VAR@@` for a placeholder
}

export interface KeptAliveAnswer {
  id: string;
  tunnel?: number; // 1, 2, … in the order the client opened them
  reopened: boolean; // sent on a new tunnel because the last one closed
  status?: number | null; // the final response's
  interim?: string[]; // heads of 1xx responses before it
  head?: string | null; // status line and field lines, CRLF-joined
  framing?: 'none' | 'length' | 'chunked' | 'close' | null;
  body?: string; // base64, chunk framing undone
  trailers?: string[];
  complete?: boolean; // the message reached the end its framing gives
  stray?: string; // base64: bytes after the message's end
  raw?: string; // base64: every byte received during this exchange
  closed?: boolean; // the connection was closed after it
  error: string | null; // why it is not complete ('incomplete: …', 'malformed: …', 'timeout: …')
}

let keptAliveRuns = 0;

// One kept-alive client under `postern run` with `args` before `--`: its
// answers in the order sent, and what the run printed.
export async function sendKeptAlive(
  h: Home,
  connect: string,
  requests: KeptAliveRequest[],
  args: string[] = [],
): Promise<{ answers: KeptAliveAnswer[]; code: number | null; stdout: Buffer; stderr: string }> {
  keptAliveRuns += 1;
  const stem = join(h.dir, `kept-alive-${process.pid}-${keptAliveRuns}`);
  writeFileSync(`${stem}.json`, JSON.stringify({ connect, requests }));
  writeFileSync(`${stem}.js`, KEPT_ALIVE_PROXY_CLIENT);
  const run = await cliBytes(h.env, ['run', ...args, '--', process.execPath, `${stem}.js`, `${stem}.json`]);
  const answers = run.stdout
    .toString()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as KeptAliveAnswer);
  return { answers, code: run.code, stdout: run.stdout, stderr: run.stderr };
}

// A CONNECT straight on the agent socket: the answer's head (and, for a
// refusal, its body), without going on to TLS.
export function connectHead(socket: string, authority: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(socket);
    let got = '';
    const timer = setTimeout(() => c.destroy(), 10_000);
    const done = (): void => {
      clearTimeout(timer);
      c.destroy();
      resolve(got);
    };
    c.on('connect', () => c.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`));
    c.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (/^HTTP\/1\.1 200 /.test(got) && got.includes('\r\n\r\n')) done();
    });
    c.on('error', reject);
    c.on('close', done);
  });
}
