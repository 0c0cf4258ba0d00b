// The journal's disk fills while allowed requests flow, again and again at
// different offsets, so that sometimes a request's intent still fits and
// its outcome does not (test/faults/disk-full covers the intent). The
// journal lives on a small tmpfs this test mounts (we run as root). SPEC
// §9: the intent is durable before the request leaves; if the journal
// cannot be written, the request is refused. What must hold:
//  - an audit_seq given to the agent names that request's own entry, never
//    another written later under the same number (an outcome's seq used to
//    be told before its write, which a full disk cut back);
//  - a request that reached the upstream has its outcome journaled, or the
//    agent was told `audit_unavailable` with maybe_executed and its
//    intent's seq, and got nothing of the response;
//  - the journal verifies.
import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { startStack, auditList } from '../helpers/stack';
import { cli } from '../helpers/postern';

interface Told {
  path: string;
  status: number;
  seq: number | undefined;
  code?: string;
  maybeExecuted?: boolean;
  text: string;
}

t.test('a disk that fills between intent and outcome', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-fulldisk-outcome-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k,mode=0700', 'tmpfs', dir]);
  t.teardown(() => {
    execFileSync('umount', ['-l', dir]);
    fs.rmdirSync(dir);
  });
  const s = await startStack({
    config: `audit_log = "${dir}/audit.log"`,
    handler: (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('UPSTREAM-ANSWER');
    },
  });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\npaths = ["/v1/*"]\n`,
    'disk-full-outcome-secret-0123456789',
  );
  await s.approver();
  const filler = path.join(dir, 'filler');
  const fillAll = (): void => {
    const st = fs.statfsSync(dir);
    fs.writeFileSync(filler, Buffer.alloc(Number(st.bavail) * Number(st.bsize), 1));
  };
  const ask = async (p: string): Promise<Told> => {
    const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', p) });
    const j = r.json as { audit_seq?: number; error?: { code: string; audit_seq?: number; maybe_executed?: boolean } };
    return {
      path: p,
      status: r.status,
      seq: j.error ? j.error.audit_seq : j.audit_seq,
      ...(j.error ? { code: j.error.code, maybeExecuted: j.error.maybe_executed } : {}),
      text: r.text,
    };
  };

  const told: Told[] = [];
  let n = 0;
  for (let trial = 0; trial < 12; trial++) {
    fillAll();
    for (let i = 0; i < 200; i++) {
      const r = await ask(`/v1/t${trial}-r${n++}`);
      told.push(r);
      if (r.status !== 200) break;
    }
    fs.rmSync(filler);
    // A request served after each trial moves the journal on, so the next
    // trial's boundary falls elsewhere.
    told.push(await ask(`/v1/between-${trial}`));
  }
  const reached = new Set(s.up.requests.map((q) => q.url ?? ''));
  const refusedAfterSending = told.filter((r) => r.status !== 200 && reached.has(r.path));
  t.comment(
    `replies: ${told.length}; refused before sending: ${told.filter((r) => r.status !== 200 && !reached.has(r.path)).length}; refused after sending: ${refusedAfterSending.length}`,
  );

  const entries = auditList<Record<string, unknown>>(s);
  const bySeq = new Map(entries.map((e) => [e['seq'] as number, e]));
  const intentOf = (e: Record<string, unknown> | undefined): Record<string, unknown> | undefined =>
    e?.['kind'] === 'http_intent' ? e : typeof e?.['intent_seq'] === 'number' ? bySeq.get(e['intent_seq']) : undefined;

  t.test("every audit_seq given names that request's own entry", async (t) => {
    const wrong: string[] = [];
    for (const r of told) {
      if (r.seq === undefined) {
        if (r.status === 200 || reached.has(r.path)) wrong.push(`${r.path}: no audit_seq (${r.text.slice(0, 200)})`);
        continue;
      }
      const e = bySeq.get(r.seq);
      const intent = intentOf(e);
      // A refusal before the intent names its own refusal entry: the
      // pipeline's, or, when that did not fit, the agent socket's (which
      // names the endpoint, not the path).
      const own = intent
        ? intent['path'] === r.path
        : (e?.['kind'] === 'http_refused' && e['path'] === r.path) ||
          (e?.['kind'] === 'agent_refused' && e['code'] === r.code && !reached.has(r.path));
      if (!own)
        wrong.push(
          `${r.path} (${r.status}) was told audit_seq ${r.seq}; the journal has there: ${e ? `${String(e['kind'])} ${String(e['path'] ?? intent?.['path'] ?? '')}` : 'nothing'}`,
        );
    }
    t.same(wrong, [], 'no reply points at a missing or foreign entry');
  });

  t.test('a request that reached the upstream: its outcome journaled, or the agent told it executed', async (t) => {
    const missing: string[] = [];
    for (const r of told) {
      if (!reached.has(r.path)) continue;
      const intent = entries.find((e) => e['kind'] === 'http_intent' && e['path'] === r.path);
      const outcome = intent && entries.find((e) => e['kind'] === 'http_outcome' && e['intent_seq'] === intent['seq']);
      if (outcome) {
        if (r.status === 200 && r.seq !== outcome['seq'])
          missing.push(`${r.path}: told ${r.seq}, outcome at ${String(outcome['seq'])}`);
        continue;
      }
      if (r.code !== 'audit_unavailable' || r.maybeExecuted !== true || r.seq !== intent?.['seq'])
        missing.push(`${r.path}: no outcome, and the agent got ${r.status} ${r.text.slice(0, 300)}`);
      if (r.text.includes('UPSTREAM-ANSWER')) missing.push(`${r.path}: the unjournaled response was released`);
    }
    t.same(missing, [], 'nothing sent is left unexplained');
    for (const r of refusedAfterSending)
      t.match(r.text, /executed/, `${r.path}: the refusal says the request executed`);
  });

  t.test('the journal verifies', async (t) => {
    await s.d.stop();
    const v = cli(s.h, ['audit', 'verify', '--json']);
    t.equal(v.code, 0, v.stdout + v.stderr);
  });
});
