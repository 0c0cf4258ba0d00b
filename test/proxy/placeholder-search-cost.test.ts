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
import { sendRaw, type Wire } from '../helpers/proxy-raw-client';
import { agentRequest, type Home } from '../helpers/postern';

// Each request on its own CONNECT tunnel under `postern run`, timed from its
// last byte to its whole answer; GET /v1/health polled meanwhile.
interface Timed {
  ms: number;
  status: string;
  error?: string;
  timeout: boolean;
}

async function sendTimed(h: Home, requests: Wire[]): Promise<{ answers: Map<string | number, Timed>; stderr: string }> {
  const run = await sendRaw(
    h,
    requests.map((r) => ({ ...r, timeoutMs: 600_000 })),
  );
  const answers = new Map<string | number, Timed>();
  for (const [id, a] of run.answers) {
    const raw = Buffer.from(a.raw ?? '', 'base64');
    const head = raw.subarray(0, Math.max(0, raw.indexOf('\r\n\r\n'))).toString('latin1');
    answers.set(id, {
      ms: a.ms,
      status: head.split('\r\n')[0] ?? '',
      error: /x-postern-error: *([a-z_]+)/i.exec(head)?.[1],
      timeout: a.error === 'timeout',
    });
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
  const post = (id: string, text: string, bytes: number): Wire => ({
    id,
    connect: `${HOST}:${P}`,
    head: `POST /search HTTP/1.1\r\nHost: ${HOST}:${P}\r\nContent-Type: text/plain\r\nContent-Length: @@LEN@@\r\n\r\n`,
    bodyRepeat: { text, times: bytes / text.length },
  });
  const sizes = [32 * 1024, 64 * 1024, 128 * 1024];
  const requests: Wire[] = [];
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
  const get = (id: string, spaces: number): Wire => ({
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
