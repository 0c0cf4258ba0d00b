// Refusal summaries (SPEC §9): one process sending 10,000 refused requests
// grows the journal by a few hundred entries, not 10,000; every refusal is
// counted (entries in full plus the counts of the summaries make 10,000);
// a summarised reply says so and points at the process's last refusal
// journaled in full; meanwhile a request a session covers is served. A
// summary still counting is journaled at lock.
import t from 'tap';
import { spawn } from 'node:child_process';
import { startStack, auditList } from '../helpers/stack';
import { cli, eventually } from '../helpers/postern';
import { canaryForms, makeCanary } from '../helpers/canary';

const SECRET = makeCanary('FLOOD');

// The flooder: its own process, sending N requests, C at a time, over
// keep-alive connections; every 3rd body is not JSON, the others name one
// of two credentials that do not exist. It prints what came back.
const FLOODER = String.raw`
const http = require('node:http');
const [sock, total, conc] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
const out = { status: {}, codes: {}, summarised: 0, full: 0, seqs: {}, other: [] };
let sent = 0, done = 0;
function one() {
  if (sent >= total) return;
  const i = sent++;
  const payload = i % 3 === 2 ? Buffer.from('not json') : Buffer.from(JSON.stringify({ credential: i % 3 === 0 ? 'ghost-a' : 'ghost-b', method: 'GET', url: 'https://api.example.test/x' }));
  const req = http.request({ socketPath: sock, agent, method: 'POST', path: '/v1/http', headers: { host: 'postern', 'content-type': 'application/json', 'content-length': payload.length } }, (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      out.status[res.statusCode] = (out.status[res.statusCode] || 0) + 1;
      try {
        const e = JSON.parse(text).error;
        out.codes[e.code] = (out.codes[e.code] || 0) + 1;
        if (e.summarised === true) out.summarised++; else out.full++;
        const k = (e.summarised === true ? 's' : 'f') + e.audit_seq;
        out.seqs[k] = (out.seqs[k] || 0) + 1;
      } catch { out.other.push(text.slice(0, 200)); }
      if (++done === total) { process.stdout.write(JSON.stringify(out)); agent.destroy(); } else one();
    });
  });
  req.on('error', (e) => { out.other.push(String(e.code)); if (++done === total) process.stdout.write(JSON.stringify(out)); else one(); });
  req.end(payload);
}
for (let k = 0; k < conc; k++) one();
`;

interface FloodResult {
  status: Record<string, number>;
  codes: Record<string, number>;
  summarised: number;
  full: number;
  seqs: Record<string, number>;
  other: string[];
}

function flood(sock: string, total: number, conc: number): { pid: number; done: Promise<FloodResult> } {
  // tap puts its loader in NODE_OPTIONS: the flooder runs without it.
  const p = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, '-e', FLOODER, sock, String(total), String(conc)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let text = '';
  p.stdout.on('data', (d: Buffer) => (text += d.toString()));
  return {
    pid: p.pid!,
    done: new Promise((resolve, reject) =>
      p.on('close', () => {
        try {
          resolve(JSON.parse(text) as FloodResult);
        } catch (e) {
          reject(e);
        }
      }),
    ),
  };
}

interface Entry {
  seq: number;
  kind: string;
  code?: string;
  pid?: number;
  instance?: string;
  credential?: string;
  total?: number;
  journaled_in_full?: number;
  first_at?: string;
  last_at?: string;
  counts?: { kind: string; code: string; credential: string | null; count: number }[];
}

t.test(
  '10,000 refused requests from one process: a few hundred entries, every refusal counted, a covered request served',
  async (t) => {
    const s = await startStack({ auditConfig: '' });
    t.teardown(() => s.close());
    const P = s.up.port;
    s.addCredential(
      'api',
      `name = "api"\nkind = "http"\napprove = "session"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\n`,
      SECRET,
    );
    await s.approver();
    const covered = (tag: string): Promise<{ status: number; text: string }> =>
      s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', `/covered/${tag}`) });
    const first = await covered('first');
    t.equal(first.status, 200, `this process has a session: ${first.text}`);
    const before = auditList<Entry>(s).length;

    const TOTAL = 10_000;
    const started = Date.now();
    const f = flood(s.sock, TOTAL, 16);
    const served: { status: number; text: string }[] = [];
    let flooding = true;
    const meanwhile = (async () => {
      for (let i = 0; flooding; i++) {
        served.push(await covered(`during-${i}`));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const r = await f.done;
    flooding = false;
    await meanwhile;
    const seconds = (Date.now() - started) / 1000;

    t.same(r.other, [], 'every reply is a JSON refusal');
    t.same(r.status, { 400: Math.floor(TOTAL / 3), 404: TOTAL - Math.floor(TOTAL / 3) }, 'status codes');
    t.same(
      r.codes,
      { bad_request: Math.floor(TOTAL / 3), unknown_credential: TOTAL - Math.floor(TOTAL / 3) },
      'exact codes',
    );
    t.ok(
      r.summarised > TOTAL / 2,
      `${r.summarised} replies say summarised, ${r.full} were journaled in full (${seconds.toFixed(1)} s)`,
    );
    t.ok(
      served.length > 0 && served.every((x) => x.status === 200),
      `the ${served.length} covered requests sent meanwhile were served: ${served
        .filter((x) => x.status !== 200)
        .map((x) => x.text)
        .join(' ')}`,
    );
    for (const x of [first, ...served])
      for (const form of canaryForms(SECRET)) if (x.text.includes(form)) t.fail('the secret reached the agent');

    // Summaries are written when their second ends.
    let entries: Entry[] = [];
    const mine = (e: Entry): boolean => e.pid === f.pid || e.instance?.startsWith(`${f.pid}:`) === true;
    t.ok(
      await eventually(() => {
        entries = auditList<Entry>(s).slice(before);
        const full = entries.filter((e) => e.kind === 'http_refused' && mine(e)).length;
        const counted = entries.filter((e) => e.kind === 'refusals_summarised').reduce((n, e) => n + (e.total ?? 0), 0);
        return full + counted >= TOTAL;
      }, 10_000),
      'the summaries were written',
    );
    const full = entries.filter((e) => e.kind === 'http_refused' && mine(e));
    const summaries = entries.filter((e) => e.kind === 'refusals_summarised');
    t.equal(full.length, r.full, 'each refusal journaled in full was replied to with its own entry');
    t.equal(
      summaries.reduce((n, e) => n + (e.total ?? 0), 0),
      r.summarised,
      'the summaries count every summarised reply',
    );
    t.equal(
      full.length + summaries.reduce((n, e) => n + e.counts!.reduce((m, c) => m + c.count, 0), 0),
      TOTAL,
      'entries in full + summary counts = 10,000',
    );
    t.ok(
      entries.length < 500,
      `the journal grew by ${entries.length} entries (${full.length} in full, ${summaries.length} summaries)`,
    );
    // At most audit.refusal_burst (20) in full per second of the flood.
    t.ok(full.length <= 20 * (Math.ceil(seconds) + 1), `${full.length} in full over ${seconds.toFixed(1)} s`);

    // Each summary: one process instance, one second, counts per kind, code and credential.
    const instance = full[0]?.instance;
    const byKey = new Map<string, number>();
    for (const e of summaries) {
      t.equal(e.instance, instance, 'a summary names the flooder instance');
      t.equal(e.pid, f.pid);
      t.equal(e.journaled_in_full, 20, 'after 20 in full that second');
      t.equal(e.first_at!.slice(0, 19), e.last_at!.slice(0, 19), 'first and last time within one second');
      t.ok(e.first_at! <= e.last_at!);
      for (const c of e.counts!)
        byKey.set(
          `${c.kind} ${c.code} ${c.credential}`,
          (byKey.get(`${c.kind} ${c.code} ${c.credential}`) ?? 0) + c.count,
        );
    }
    for (const e of full) {
      const k = `http_refused ${e.code} ${e.credential ?? null}`;
      byKey.set(k, (byKey.get(k) ?? 0) + 1);
    }
    t.same(
      Object.fromEntries(byKey),
      {
        'http_refused unknown_credential ghost-a': Math.ceil(TOTAL / 3),
        'http_refused unknown_credential ghost-b': TOTAL - Math.ceil(TOTAL / 3) - Math.floor(TOTAL / 3),
        'http_refused bad_request null': Math.floor(TOTAL / 3),
      },
      'per code and credential, every refusal',
    );

    // A summarised reply points at a refusal of that process journaled in full.
    const fullSeqs = new Set(full.map((e) => e.seq));
    const pointed = Object.keys(r.seqs)
      .filter((k) => k.startsWith('s'))
      .map((k) => Number(k.slice(1)));
    t.ok(
      pointed.length > 0 && pointed.every((q) => fullSeqs.has(q)),
      `summarised replies carry the seq of a full entry of the flooder (${pointed.length} distinct)`,
    );

    // The stop signs the head: the whole journal verifies.
    await s.d.stop();
    const v = cli(s.h, ['audit', 'verify']);
    t.equal(v.code, 0, v.stdout + v.stderr);
  },
);

t.test('a summary still counting is journaled at lock, and refusals while locked are summarised too', async (t) => {
  const s = await startStack({ auditConfig: '' });
  t.teardown(() => s.close());
  const before = auditList<Entry>(s).length;
  const f = flood(s.sock, 60, 60);
  const r = await f.done;
  t.equal(r.summarised + r.full, 60);
  t.ok(r.summarised >= 20, `${r.summarised} summarised`);
  t.equal(cli(s.h, ['lock']).code, 0);
  let entries: Entry[] = [];
  t.ok(
    await eventually(() => {
      entries = auditList<Entry>(s).slice(before);
      return entries.some((e) => e.kind === 'lock');
    }, 5000),
  );
  const summaries = entries.filter((e) => e.kind === 'refusals_summarised');
  t.equal(
    summaries.reduce((n, e) => n + (e.total ?? 0), 0),
    r.summarised,
    'every summarised one counted',
  );
  t.ok(summaries.length >= 1 && summaries.length <= 2);

  // Locked: refused as vault_locked, journaled by the server, summarised alike.
  const locked = await flood(s.sock, 100, 100).done;
  t.same(locked.codes, { vault_locked: 100 });
  t.ok(locked.summarised >= 60, `${locked.summarised} summarised while locked`);
  await s.d.stop();
  const after = auditList<Entry>(s).slice(before);
  const lockedSummaries = after.filter(
    (e) => e.kind === 'refusals_summarised' && e.counts!.some((c) => c.kind === 'agent_refused'),
  );
  t.equal(
    lockedSummaries.reduce((n, e) => n + (e.total ?? 0), 0),
    locked.summarised,
    'journaled by the stop at the latest',
  );
  t.same(
    lockedSummaries.flatMap((e) => e.counts!.map((c) => c.code)).filter((c, i, a) => a.indexOf(c) === i),
    ['vault_locked'],
  );
});
