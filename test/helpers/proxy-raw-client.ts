// A client of the proxy front door that speaks raw HTTP/1.1, run under
// `postern run`, for tests that need the exact bytes a proxied client
// receives: it reads requests from a JSON file, sends each on its own
// CONNECT tunnel (the run's proxy token from HTTPS_PROXY, TLS trusting only
// SSL_CERT_FILE), and prints one JSON line per request with the raw
// response bytes. `parseRaw` reads such a response (chunked undone).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliBytes } from './cli-bytes';
import type { Home } from './postern';

// The client run under `postern run`: reads the requests from the file named
// by its argument, sends each on its own CONNECT tunnel, and prints one JSON
// line per request with the raw response bytes (or none, when the
// connection closed without one). `@@PH:VAR@@` in a request stands for the
// placeholder in $VAR, `@@B64:USER:VAR@@` for base64("USER:" + $VAR).
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
    const finish = (what) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      c.destroy();
      resolve({ id: r.id, ...what });
    };
    const timer = setTimeout(() => finish({ error: 'timeout', raw: got.toString('base64') }), 15000);
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
        s.write(Buffer.from(fill(r.head), 'utf8'));
        if (r.body) s.write(Buffer.from(r.body, 'base64'));
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
  id: number;
  connect: string;
  head: string;
  body?: string;
}

export interface Answer {
  id: number;
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
): Promise<{ answers: Map<number, Answer>; code: number | null; stdout: Buffer; stderr: string }> {
  const file = join(h.dir, `raw-requests-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(requests));
  const script = join(h.dir, 'raw-proxy-client.js');
  writeFileSync(script, RAW_PROXY_CLIENT);
  const run = await cliBytes(h.env, ['run', ...args, '--', process.execPath, script, file]);
  const answers = new Map<number, Answer>();
  for (const line of run.stdout.toString().split('\n').filter(Boolean)) {
    const a = JSON.parse(line) as Answer;
    answers.set(a.id, a);
  }
  return { answers, code: run.code, stdout: run.stdout, stderr: run.stderr };
}
