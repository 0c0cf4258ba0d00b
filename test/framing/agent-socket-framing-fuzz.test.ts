// Randomised differential framing of `POST /v1/http` on the JSON agent
// socket's own HTTP parser (SPEC §6, §6.1, §6.3; docs/proxy.md §6). The
// generator of request-framing-fuzz.test.ts (request-gen.ts) in its agent
// form: one to three POST /v1/http requests per case, the JSON body asking
// for GET https://api.example.test:<port>/f/<case>/<k> with the credential,
// their framing mutated (content-length, transfer-encoding, chunk lines,
// trailers, odd bytes, bare LF, obs-fold, expect, HTTP/1.0, many headers, a
// request inside a body), glued and written in random segments by the test
// process (an allowed peer). The strict reader (fuzz-kit.ts readRequests)
// is the reference. Per case:
// - the origin received, in order, only requests whose JSON the reference
//   read as a whole request's body, each at most once;
// - the answers, in order, align with the reference's requests: a 200
//   carrying the origin's answer to THAT request, or a §6.3 refusal
//   (JSON error with code and audit_seq); one more may answer the error
//   that stopped the reading; a connection left open has every request
//   answered; nothing hangs;
// and at the end the daemon is alive, the secret is in no byte the client
// got (the origin echoes the injected Authorization), the daemon log or the
// journal, and the journal verifies.
// FUZZ_SEEDS=1,2 npx tap … replays given seeds.
import t from 'tap';
import net from 'node:net';
import { appendFileSync } from 'node:fs';
import { startStack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import {
  Rng,
  seeds,
  readResponses,
  readRequests,
  show,
  type StrictResponse,
  echoOrigin,
  addApiCredential,
  nothingLeaked,
} from '../helpers/framing-kit';
import { generate, HOST, type Gen } from '../helpers/framing-requests';

const CASES_PER_SEED = 180;

// One case on its own agent-socket connection: its segments written with
// their pauses, every byte kept until the daemon closes, `expect` answers
// have come (and 150 ms more), or nothing comes for `idle` ms.
function play(sock: string, g: Gen): Promise<{ raw: Buffer; how: string; ms: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const c = net.connect(sock);
    const got: Buffer[] = [];
    let done = false;
    let idle: NodeJS.Timeout | null = null;
    let stray: NodeJS.Timeout | null = null;
    let writesDone = false;
    const finish = (how: string): void => {
      if (done) return;
      done = true;
      for (const x of [idle, stray, hard]) if (x) clearTimeout(x);
      c.destroy();
      resolve({ raw: Buffer.concat(got), how, ms: Date.now() - started });
    };
    const hard = setTimeout(() => finish('hard-timeout'), 20_000);
    const poke = (): void => {
      if (idle) clearTimeout(idle);
      idle = setTimeout(() => finish('idle'), 3500);
      if (writesDone && stray === null && readResponses(Buffer.concat(got)).responses.length >= g.c.expect)
        stray = setTimeout(() => finish('expected'), 150);
    };
    c.on('connect', () => {
      void (async () => {
        for (const w of g.c.writes) {
          if (w.delay) await new Promise((r) => setTimeout(r, w.delay));
          if (!c.destroyed) c.write(Buffer.from(w.data, 'base64'));
        }
        writesDone = true;
        poke();
      })();
    });
    c.on('data', (d: Buffer) => {
      got.push(d);
      poke();
    });
    c.on('error', () => finish('closed'));
    c.on('close', () => finish('closed'));
  });
}

async function pool<T, R>(items: T[], n: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await f(items[i] as T);
      }
    }),
  );
  return out;
}

function agentRefusal(a: StrictResponse): { code: string; audit_seq: number } | null {
  if (a.status < 400) return null;
  try {
    const e = (JSON.parse(a.body.toString('utf8')) as { error?: { code: string; audit_seq: number } }).error;
    return e && typeof e.code === 'string' ? e : null;
  } catch {
    return null;
  }
}

t.test('randomised framing of POST /v1/http on the agent socket', async (t) => {
  const s = await startStack({ records: { [HOST]: { A: ['127.0.0.1'] } }, config: 'agent_request_timeout = "2s"' });
  t.teardown(() => s.close());
  let died: number | null = null;
  void s.d.exited.then(() => (died = Date.now()));
  const origin = await echoOrigin(s, (q, auth) => `seen:${q.method} ${q.target} auth=${auth}`);
  t.teardown(() => origin.close());
  const P = origin.port;
  const A = `${HOST}:${P}`;
  const secret = makeCanary('FUZZAGENT');
  addApiCredential(s, P, secret);
  await s.approver();
  const url = (path: string): string => `https://${A}${path}`;
  const received: Buffer[] = [];
  let total = 0;
  for (const seed of seeds([0xa9e01, 0xa9e02])) {
    const rng = new Rng(seed);
    const gens: Gen[] = [];
    for (let i = 0; i < CASES_PER_SEED; i++) gens.push(generate(rng, `${seed.toString(16)}-${i}`, A, P, { url }));
    const started = Date.now();
    const results = await pool(gens, 6, (g) => play(s.sock, g));
    const failures: string[] = [];
    gens.forEach((g, i) => {
      total += 1;
      const { raw, how, ms } = results[i]!;
      received.push(raw);
      const problems = checkCase(g, how, raw, origin.requests, secret);
      if (problems.length > 0)
        failures.push(
          `seed ${seed} case ${g.c.id} [${g.notes.join(' ')}] how=${how} ms=${ms}\n  ${problems.join('\n  ')}\n  sent: ${show(g.bytes)}\n  got: ${show(raw)}`,
        );
    });
    if (process.env['FUZZ_REPORT']) appendFileSync(process.env['FUZZ_REPORT'], failures.join('\n\n') + '\n');
    t.same(failures, [], `seed ${seed}: ${gens.length} cases in ${Date.now() - started} ms`);
    t.equal(died, null, `seed ${seed}: the daemon is alive`);
  }
  t.comment(`${total} generated cases`);
  await nothingLeaked(t, s, received, secret);
});

function checkCase(
  g: Gen,
  how: string,
  raw: Buffer,
  all: { target: string; method: string }[],
  secret: string,
): string[] {
  const p: string[] = [];
  const ref = readRequests(g.bytes);
  // The GET each reference request asks for, if its body is that JSON.
  const asked = ref.requests.map((r) => {
    try {
      const j = JSON.parse(r.body.toString('latin1')) as { url?: string };
      return r.method === 'POST' && r.target === '/v1/http' && typeof j.url === 'string'
        ? (({ pathname, search }) => pathname + search)(new URL(j.url))
        : null;
    } catch {
      return null;
    }
  });
  const prefix = `/f/${g.c.id}/`;
  const atOrigin = all.filter((q) => q.target.startsWith(prefix)).map((q) => q.target);
  let i = 0;
  for (const target of atOrigin) {
    while (i < asked.length && asked[i] !== target) i += 1;
    if (i >= asked.length) {
      p.push(
        `the origin got ${target}, which no request of the strict reading asked for, in order (asked ${JSON.stringify(asked)}; stop ${JSON.stringify(ref.stop)})`,
      );
      break;
    }
    i += 1;
  }
  const read = readResponses(raw);
  if (read.error !== null) p.push(`the answers do not parse strictly: ${read.error}`);
  const answers = read.responses;
  const limit = ref.requests.length + (ref.stop.kind === 'error' || ref.stop.kind === 'incomplete' ? 1 : 0);
  if (answers.length > limit)
    p.push(`${answers.length} answers for ${ref.requests.length} request(s) (stop ${JSON.stringify(ref.stop)})`);
  const servedTargets: string[] = [];
  answers.forEach((a, k) => {
    if (exposures(a.body, secret).length > 0) p.push(`answer ${k} holds the secret`);
    const e = agentRefusal(a);
    if (e !== null) {
      if (typeof e.audit_seq !== 'number') p.push(`refusal ${k} without audit_seq: ${show(a.body, 200)}`);
      return;
    }
    let inner: { status?: number; body?: string } = {};
    try {
      inner = JSON.parse(a.body.toString('utf8')) as typeof inner;
    } catch {
      p.push(`answer ${k} is neither a refusal nor a /v1/http result: ${a.status} ${show(a.body, 200)}`);
      return;
    }
    const named = (inner.body ?? '').split(' ')[1] ?? '';
    servedTargets.push(named);
    if (asked[k] !== named) p.push(`answer ${k} names ${named}, request ${k} asked for ${asked[k]}`);
    const earlier = answers.slice(0, k);
    if (earlier.some((x) => /close/i.test(x.headers.find(([n]) => n === 'connection')?.[1] ?? '')))
      p.push(`answer ${k} came after an answer that said connection: close`);
  });
  if (JSON.stringify(servedTargets) !== JSON.stringify(atOrigin))
    p.push(`served ${JSON.stringify(servedTargets)}, origin saw ${JSON.stringify(atOrigin)}`);
  if (how === 'idle' || how === 'hard-timeout') p.push(`ended by ${how} with ${answers.length} answer(s) of ${limit}`);
  if (how === 'closed' && answers.length < limit) {
    const last = answers[answers.length - 1];
    const lastRef = ref.requests[answers.length - 1];
    if (!((last !== undefined && agentRefusal(last) !== null) || lastRef?.closesIfServed === true))
      p.push(`closed after ${answers.length} answer(s) of ${limit} without a refusal or a closing request`);
  }
  return p;
}
