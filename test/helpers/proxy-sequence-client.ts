// A client run under `postern run` for framing and pipelining tables
// that, for each case, opens one connection to the run's proxy (a CONNECT
// tunnel with TLS, or plain for absolute-form), writes the case's segments
// (with pauses between them, so a value can straddle TLS records), and
// keeps every byte until the proxy closes or nothing more comes for IDLE ms.
// Plus a strict reader of a sequence of HTTP/1.1 responses.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliBytes } from './cli-bytes';
import type { Home } from './postern';

export const SEQ_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const pct = (s) => [...Buffer.from(s)].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
const fill = (text) =>
  text
    .replace(/@@AUTH@@/g, auth)
    .replace(/@@PH:([A-Z_]+)@@/g, (_m, v) => process.env[v])
    .replace(/@@PHA:([A-Z_]+)@@/g, (_m, v) => process.env[v].slice(0, 14))
    .replace(/@@PHB:([A-Z_]+)@@/g, (_m, v) => process.env[v].slice(14))
    .replace(/@@PCT:([A-Z_]+)@@/g, (_m, v) => pct(process.env[v]))
    .replace(/@@B64:([a-z]+):([A-Z_]+)@@/g, (_m, u, v) => Buffer.from(u + ':' + process.env[v]).toString('base64'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function run(c) {
  return new Promise((resolve) => {
    const sock = net.connect(Number(proxy.port), proxy.hostname);
    let got = Buffer.alloc(0);
    let done = false;
    let idle = null;
    const finish = (more) => {
      if (done) return;
      done = true;
      clearTimeout(hard);
      clearTimeout(idle);
      sock.destroy();
      resolve({ id: c.id, raw: got.toString('base64'), ...more });
    };
    const hard = setTimeout(() => finish({ error: 'hard timeout' }), 20000);
    const poke = () => {
      clearTimeout(idle);
      idle = setTimeout(() => finish({ closed: false }), c.idle || 1500);
    };
    const writeAll = async (s) => {
      for (const w of c.writes) {
        if (w.delay) await sleep(w.delay);
        if (!s.destroyed) s.write(Buffer.from(fill(w.data), 'latin1'));
      }
      poke();
    };
    sock.on('error', (e) => finish({ error: String(e) }));
    if (c.mode === 'plain') {
      sock.on('connect', () => writeAll(sock));
      sock.on('data', (d) => { got = Buffer.concat([got, d]); poke(); });
      sock.on('close', () => finish({ closed: true }));
      return;
    }
    sock.once('connect', () => sock.write('CONNECT ' + c.connect + ' HTTP/1.1\r\nHost: ' + c.connect + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
    let head = Buffer.alloc(0);
    const onHead = (d) => {
      head = Buffer.concat([head, d]);
      if (head.indexOf('\r\n\r\n') === -1) return;
      sock.off('data', onHead);
      if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1'))) return finish({ error: 'CONNECT refused: ' + head.toString('latin1') });
      const opts = { socket: sock, servername: c.servername || c.connect.split(':')[0], ca, ALPNProtocols: ['http/1.1'] };
      if (c.servername) opts.checkServerIdentity = () => undefined;
      const s = tls.connect(opts);
      s.on('error', (e) => finish({ error: String(e) }));
      s.on('secureConnect', () => writeAll(s));
      s.on('data', (d) => { got = Buffer.concat([got, d]); poke(); });
      s.on('close', () => finish({ closed: true }));
    };
    sock.on('data', onHead);
  });
}
(async () => {
  for (const c of JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))) process.stdout.write(JSON.stringify(await run(c)) + '\n');
})();
`;

export interface Case {
  id: string;
  mode?: 'tunnel' | 'plain';
  connect?: string;
  servername?: string;
  writes: { data: string; delay?: number }[];
  idle?: number;
}

export interface Got {
  id: string;
  raw: string;
  closed?: boolean;
  error?: string;
}

export function runCases(
  h: Home,
  cases: Case[],
): Promise<{ got: Map<string, Got>; stderr: string; code: number | null; all: Buffer }> {
  return runCaseScript<Got>(h, 'sequence', SEQ_CLIENT, cases);
}

// A node script under `postern run`, given `input` as a JSON file; each
// line it prints is one case's result, by its id.
export async function runCaseScript<G extends { id: string }>(
  h: Home,
  name: string,
  source: string,
  input: unknown,
): Promise<{ got: Map<string, G>; stderr: string; code: number | null; all: Buffer }> {
  const file = join(h.dir, `${name}-cases-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(input));
  const script = join(h.dir, `${name}-client.js`);
  writeFileSync(script, source);
  const r = await cliBytes(h.env, ['run', '--', process.execPath, script, file]);
  const got = new Map<string, G>();
  for (const line of r.stdout.toString().split('\n').filter(Boolean)) {
    const g = JSON.parse(line) as G;
    got.set(g.id, g);
  }
  return { got, stderr: r.stderr, code: r.code, all: Buffer.concat([r.stdout, Buffer.from(r.stderr)]) };
}

export interface Resp {
  status: number;
  head: string;
  headers: Record<string, string>;
  body: string;
  complete: boolean;
}

// A sequence of responses: 1xx skipped (kept, bodiless, with `interim`),
// content-length or chunked framing, otherwise until the end.
export function parseResponses(raw: Buffer, o: { interim?: boolean } = {}): { responses: Resp[]; rest: Buffer } {
  const out: Resp[] = [];
  let buf = raw;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n');
    if (end === -1) break;
    const head = buf.subarray(0, end).toString('latin1');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
    if (!m) break;
    const status = Number(m[1]);
    const headers: Record<string, string> = {};
    for (const line of head.split('\r\n').slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
    }
    let rest = buf.subarray(end + 4);
    if (status < 200) {
      if (o.interim) out.push({ status, head, headers, body: '', complete: true });
      buf = rest;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      out.push({ status, head, headers, body: rest.subarray(0, n).toString('utf8'), complete: rest.length >= n });
      buf = rest.subarray(n);
      continue;
    }
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts: Buffer[] = [];
      let complete = false;
      for (;;) {
        const eol = rest.indexOf('\r\n');
        if (eol === -1) break;
        const n = parseInt(rest.subarray(0, eol).toString(), 16);
        if (Number.isNaN(n)) break;
        if (n === 0) {
          const fin = rest.indexOf('\r\n\r\n', eol - 0);
          rest = fin === -1 ? Buffer.alloc(0) : rest.subarray(fin + 4);
          complete = fin !== -1;
          break;
        }
        parts.push(rest.subarray(eol + 2, eol + 2 + n));
        rest = rest.subarray(eol + 2 + n + 2);
      }
      out.push({ status, head, headers, body: Buffer.concat(parts).toString('utf8'), complete });
      buf = rest;
      continue;
    }
    out.push({ status, head, headers, body: rest.toString('utf8'), complete: false });
    buf = Buffer.alloc(0);
    break;
  }
  return { responses: out, rest: buf };
}
