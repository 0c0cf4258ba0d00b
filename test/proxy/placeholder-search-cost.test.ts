// The proxy front door's placeholder search over a body made of "postern-"
// repeated: with an open `[a-z0-9._-]+` every "postern-" started a match
// attempt that ran to the end of the text and back, quadratic in the body
// (128 KiB took 3.5 s of the daemon's main thread, 1 MiB would take
// minutes, and GET /v1/health stalled meanwhile). And the AWS client
// Authorization parse on a header with a long run of spaces (a lazy
// `(.*?)` before `[ \t]*$`). Each request is timed from its last byte to
// its answer and GET /v1/health polled meanwhile; the bounds are generous
// (the fixed path takes milliseconds), test/pipeline/complexity has the
// unit rows.
import t from 'tap';
import { stallMeter } from '../helpers/stall-meter';
import { startProxyStack } from '../helpers/proxy-stack';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliBytes } from '../helpers/cli-bytes';
import { agentRequest, type Home } from '../helpers/postern';

// ---- A timed raw client of the proxy front door, run under `postern run`:
// each request on its own CONNECT tunnel, timed from its last byte to its
// whole answer. And a meter polling GET /v1/health on the agent socket.

const TIMED_PROXY_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
function complete(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return false;
  const head = buf.subarray(0, end).toString('latin1');
  const body = buf.subarray(end + 4);
  const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (cl) return body.length >= Number(cl[1]);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return body.includes('\r\n0\r\n\r\n');
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
      resolve({ id: r.id, ms: sentAt ? Date.now() - sentAt : -1, status: got.toString('latin1').split('\r\n')[0], error: got.toString('latin1').match(/x-postern-error: *([a-z_]+)/i)?.[1], ...what });
    };
    const timer = setTimeout(() => finish({ timeout: true }), 600000);
    c.on('error', (e) => finish({ neterror: String(e) }));
    c.once('connect', () => c.write('CONNECT ' + r.connect + ' HTTP/1.1\r\nHost: ' + r.connect + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
    let head = Buffer.alloc(0);
    const onHead = (d) => {
      head = Buffer.concat([head, d]);
      if (head.indexOf('\r\n\r\n') === -1) return;
      c.off('data', onHead);
      if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1'))) return finish({ neterror: 'CONNECT refused: ' + head.toString('latin1') });
      const s = tls.connect({ socket: c, servername: r.connect.split(':')[0], ca, ALPNProtocols: ['http/1.1'] });
      s.on('error', (e) => finish({ neterror: String(e) }));
      s.on('secureConnect', () => {
        const body = r.bodyRepeat ? Buffer.from(r.bodyRepeat.text.repeat(r.bodyRepeat.times), 'latin1') : Buffer.alloc(0);
        s.write(Buffer.from(r.head.replace('@@LEN@@', String(body.length)), 'latin1'));
        s.write(body, () => { sentAt = Date.now(); });
      });
      s.on('data', (d) => {
        got = Buffer.concat([got, d]);
        if (complete(got)) finish({});
      });
      s.on('close', () => finish({ closed: true }));
    };
    c.on('data', onHead);
  });
}
(async () => {
  for (const r of JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))) process.stdout.write(JSON.stringify(await send(r)) + '\n');
})();
`;

interface TimedWire {
  id: string;
  connect: string;
  head: string; // '@@LEN@@' stands for the body's length
  bodyRepeat?: { text: string; times: number };
}

interface TimedAnswer {
  id: string;
  ms: number;
  status: string;
  error?: string;
  timeout?: boolean;
  closed?: boolean;
  neterror?: string;
}

// Polls GET /v1/health every `everyMs` until stopped; the slowest answer.

async function sendTimed(
  h: Home,
  requests: TimedWire[],
): Promise<{ answers: Map<string, TimedAnswer>; stderr: string }> {
  const file = join(h.dir, `timed-requests-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(requests));
  const script = join(h.dir, 'timed-proxy-client.js');
  writeFileSync(script, TIMED_PROXY_CLIENT);
  const run = await cliBytes(h.env, ['run', '--', process.execPath, script, file]);
  const answers = new Map<string, TimedAnswer>();
  for (const line of run.stdout.toString().split('\n').filter(Boolean)) {
    const a = JSON.parse(line) as TimedAnswer;
    answers.set(a.id, a);
  }
  return { answers, stderr: run.stderr };
}

// ---- The rows

t.test('placeholder search over a body of repeated "postern-" is linear', async (t) => {
  const s = await startProxyStack({
    config: 'agent_request_timeout = "600s"',
    handler: (_req, body, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`got ${body.length}`);
    },
  });
  t.teardown(() => s.close());
  const HOST = 'api.example.test';
  const P = s.up.port;
  const post = (id: string, text: string, bytes: number): TimedWire => ({
    id,
    connect: `${HOST}:${P}`,
    head: `POST /search HTTP/1.1\r\nHost: ${HOST}:${P}\r\nContent-Type: text/plain\r\nContent-Length: @@LEN@@\r\n\r\n`,
    bodyRepeat: { text, times: bytes / text.length },
  });
  const sizes = [32 * 1024, 64 * 1024, 128 * 1024];
  const requests: TimedWire[] = [];
  for (const n of sizes) requests.push(post(`plain-${n}`, 'abcdefgh', n), post(`hostile-${n}`, 'postern-', n));
  const meter = stallMeter(s.sock);
  const { answers, stderr } = await sendTimed(s.h, requests);
  const worstStall = await meter.stop();
  const ms: Record<string, number> = {};
  for (const r of requests) {
    const a = answers.get(r.id);
    t.ok(a && !a.timeout && a.ms >= 0, `${r.id} answered (${JSON.stringify(a)} ${a ? '' : stderr})`);
    ms[r.id] = a?.ms ?? -1;
    t.comment(`${r.id}: ${a?.ms} ms, ${a?.status} ${a?.error ?? ''}`);
  }
  t.comment(`slowest GET /v1/health meanwhile: ${worstStall} ms`);
  const r4 = ms[`hostile-${sizes[2]}`]! / Math.max(1, ms[`hostile-${sizes[0]}`]!);
  const r1 = ms[`hostile-${sizes[2]}`]! / Math.max(1, ms[`hostile-${sizes[1]}`]!);
  const r0 = ms[`hostile-${sizes[1]}`]! / Math.max(1, ms[`hostile-${sizes[0]}`]!);
  t.comment(`doubling ratios: ${r0.toFixed(2)}, ${r1.toFixed(2)} (linear ≈ 2, quadratic ≈ 4)`);
  t.comment(
    `projected for a 1 MiB body (max_request_body default): ~${((ms[`hostile-${sizes[2]}`]! * 64) / 1000).toFixed(0)} s`,
  );
  // The defect: a 128 KiB body costs far more than 100 ms, and the cost
  // grows clearly faster than the size.
  t.ok(
    ms[`hostile-${sizes[2]}`]! >= 0 && ms[`hostile-${sizes[2]}`]! < 1000,
    `a 128 KiB body costs the daemon under 1 s (took ${ms[`hostile-${sizes[2]}`]} ms)`,
  );
  t.comment(`32 KiB → 128 KiB cost ratio: ${r4.toFixed(2)} (linear ≈ 4, quadratic ≈ 16)`);
  t.ok(worstStall < 1000, `the daemon answered /v1/health within 1 s meanwhile (worst ${worstStall} ms)`);
  const after = await agentRequest(s.sock, 'GET', '/v1/health').catch((e: unknown) => ({ status: String(e) }));
  t.equal(after.status, 200, 'the daemon still answers afterwards');
  t.equal(s.d.proc.exitCode, null, 'the daemon is still running');
  const log = s.d.logs();
  const interesting = log.split('\n').filter((l) => /error|warn|stall|lag|event.loop|fatal|exit/i.test(l));
  t.comment(`daemon log lines of note (${interesting.length}): ${interesting.slice(-8).join('\n# ').slice(0, 3000)}`);
  if (s.d.proc.exitCode !== null) t.comment(`daemon log tail:\n# ${log.slice(-4000).split('\n').join('\n# ')}`);
});

t.test('AWS Authorization parse over a run of spaces is linear', async (t) => {
  const s = await startProxyStack({ config: 'agent_request_timeout = "600s"' });
  t.teardown(() => s.close());
  const HOST = 'api.example.test';
  const P = s.up.port;
  s.addCredential(
    'cloud',
    `name = "cloud"\nkind = "http"\nenv = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\naws_sigv4 = { region = "eu-west-1", service = "s3" }\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET"]\npaths = ["/*"]\n`,
    'AKIAPROBECOMPUTED001:pRoBeSeCrEtKeY9876543210zyxwvuTSRQPONMLK',
  );
  // A placeholder-shaped text naming the aws credential (never honoured,
  // and it need not be: the slot is judged before the lookup).
  const ph = 'postern-cloud-0123456789abcdef';
  const get = (id: string, spaces: number): TimedWire => ({
    id,
    connect: `${HOST}:${P}`,
    head: `GET /search HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: AWS4-HMAC-SHA256 Credential=${ph}/20250101/eu-west-1/s3/aws4_request,${' '.repeat(spaces)}x\r\n\r\n`,
  });
  const sizes = [3750, 7500, 15000];
  const requests = sizes.map((n) => get(`spaces-${n}`, n));
  const meter = stallMeter(s.sock);
  const { answers, stderr } = await sendTimed(s.h, requests);
  const worstStall = await meter.stop();
  const ms: number[] = [];
  for (const r of requests) {
    const a = answers.get(r.id);
    t.ok(a && !a.timeout && a.ms >= 0, `${r.id} answered (${JSON.stringify(a)} ${a ? '' : stderr})`);
    ms.push(a?.ms ?? -1);
    t.comment(`${r.id}: ${a?.ms} ms, ${a?.status} ${a?.error ?? ''}`);
  }
  t.comment(`slowest GET /v1/health meanwhile: ${worstStall} ms`);
  const ratio = ms[2]! / Math.max(1, ms[1]!);
  t.comment(`doubling ratio ${(ms[1]! / Math.max(1, ms[0]!)).toFixed(2)}, ${ratio.toFixed(2)}`);
  t.ok(worstStall < 1000, `the daemon answered /v1/health within 1 s meanwhile (worst ${worstStall} ms)`);
});
