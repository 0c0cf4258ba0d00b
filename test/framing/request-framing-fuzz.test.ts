// Randomised differential framing of requests INSIDE a terminated CONNECT
// tunnel (SPEC §6.2, §6.3, §11; docs/proxy.md §5-§6). Seeded generators
// build one to three HTTP/1.1 requests per case and mutate their framing
// (content-length, transfer-encoding, chunk lines, trailers, odd bytes in
// names and values, bare LF, obs-fold, expect, HTTP/1.0, host, absolute
// targets, many headers), glue them into one byte stream and write it in
// random segments. A strict RFC 9112 reader (fuzz-kit.ts readRequests) is
// the reference: postern may refuse more than it, never serve more. Per
// case:
// - every request the origin received is, in order, one of the reference's
//   requests, with its method, target and body byte for byte, framed by one
//   content-length (no transfer-encoding), nothing else on the connection;
//   nothing at or after the reference's first error or closing request;
// - every answer is a whole HTTP/1.1 response, either the origin's (naming
//   the request it answers, in the origin's order) or a refusal with a §6.3
//   JSON body and x-postern-error; answers = requests until postern closes;
//   a connection left open has every request answered; nothing hangs;
// - the secret goes out only in the Authorization of a request that held the
//   placeholder there, and a placeholder never reaches the origin;
// and at the end the daemon is alive, the secret is in no byte the client
// got, nor in the daemon log or the journal, and the journal verifies.
// FUZZ_SEEDS=1,2 npx tap … replays given seeds.
import t from 'tap';
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { startStack } from '../helpers/stack';
import { header as originHeader, type ParsedRequest } from '../helpers/raw-origin';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import {
  Rng,
  seeds,
  dummyPlaceholder,
  runFuzzClient,
  readResponses,
  readRequests,
  refusalOf,
  header,
  refHeader,
  show,
  type RefRequest,
  echoOrigin,
  addApiCredential,
  nothingLeaked,
} from '../helpers/framing-kit';
import { generate, HOST, OTHER, type Gen } from '../helpers/framing-requests';

const CASES_PER_SEED = 160;
const DUMMY = dummyPlaceholder('api');

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex').slice(0, 12);

// --- The oracle ------------------------------------------------------------

function targetPath(target: string): string {
  const m = /^https?:\/\/[^/]+(\/.*)?$/i.exec(target);
  return m ? (m[1] ?? '/') : target;
}

t.test('randomised request framing inside a terminated tunnel', async (t) => {
  const s = await startStack({
    names: [HOST, OTHER],
    records: { [HOST]: { A: ['127.0.0.1'] }, [OTHER]: { A: ['127.0.0.1'] } },
    config: 'agent_request_timeout = "2s"',
  });
  t.teardown(() => s.close());
  let died: number | null = null;
  void s.d.exited.then(() => (died = Date.now()));
  const origin = await echoOrigin(
    s,
    (q, auth) => `seen:${q.method} ${q.target} ${q.body.length} ${sha(q.body)} auth=${auth}`,
  );
  t.teardown(() => origin.close());
  const P = origin.port;
  const A = `${HOST}:${P}`;
  const secret = makeCanary('FUZZREQ');
  addApiCredential(s, P, secret);
  await s.approver();

  const received: Buffer[] = [];
  let total = 0;
  for (const seed of seeds([0x5eed01, 0x5eed02])) {
    const rng = new Rng(seed);
    const gens = new Map<string, Gen>();
    for (let i = 0; i < CASES_PER_SEED; i++) {
      const id = `${seed.toString(16)}-${i}`;
      gens.set(id, generate(rng, id, A, P));
    }
    const started = Date.now();
    const run = await runFuzzClient(
      s.h,
      [...gens.values()].map((g) => g.c),
      { phVar: 'API_TOKEN', dummy: DUMMY, concurrency: 6, tag: String(seed) },
    );
    received.push(run.all);
    t.equal(run.code, 0, `seed ${seed}: the client ran (${run.stderr.slice(0, 500)})`);
    const failures: string[] = [];
    for (const [id, g] of gens) {
      total += 1;
      const got = run.got.get(id);
      const raw = Buffer.from(got?.raw ?? '', 'base64');
      received.push(raw);
      const problems = checkCase(id, g, got?.how ?? 'missing', got?.ms ?? -1, raw, origin.requests, secret);
      if (problems.length > 0)
        failures.push(
          `seed ${seed} case ${id} [${g.notes.join(' ')}] how=${got?.how} ms=${got?.ms}\n  ${problems.join('\n  ')}\n  sent: ${show(g.bytes)}\n  got: ${show(raw)}`,
        );
    }
    if (process.env['FUZZ_REPORT']) appendFileSync(process.env['FUZZ_REPORT'], failures.join('\n\n') + '\n');
    t.same(failures, [], `seed ${seed}: ${gens.size} cases in ${Date.now() - started} ms`);
    t.equal(died, null, `seed ${seed}: the daemon is alive`);
    const health = await s.request({ credential: 'api', method: 'GET', url: `https://${A}/f/health-${seed}/0` });
    t.equal(health.status, 200, `seed ${seed}: the daemon still answers (${health.text.slice(0, 200)})`);
  }

  await t.test('every origin connection holds exactly the requests it parsed', async (t) => {
    const bad: string[] = [];
    for (const c of origin.connections) {
      const parsed = c.requests.reduce((n, q) => n + q.raw.length, 0);
      if (parsed !== c.receivedLength())
        bad.push(
          `conn ${c.id}: received ${c.receivedLength()} bytes, parsed ${parsed}: ${show(Buffer.concat(c.received))}`,
        );
    }
    t.same(bad, []);
  });

  t.comment(`${total} generated cases`);
  t.equal(died, null, 'the daemon never died');
  await nothingLeaked(t, s, received, secret);
});

function checkCase(
  id: string,
  g: Gen,
  how: string,
  ms: number,
  raw: Buffer,
  all: ParsedRequest[],
  secret: string,
): string[] {
  const p: string[] = [];
  const ref = readRequests(g.bytes);
  const atOrigin = all.filter((q) => q.target.startsWith(`/f/${id}/`));
  // 1. What reached the origin: in order, a subsequence of the reference's
  // requests, byte for byte, framed by one content-length.
  let i = 0;
  const matched: RefRequest[] = [];
  for (const q of atOrigin) {
    while (
      i < ref.requests.length &&
      !(
        ref.requests[i]!.method === q.method &&
        targetPath(ref.requests[i]!.target) === q.target &&
        ref.requests[i]!.body.equals(q.body)
      )
    )
      i += 1;
    if (i >= ref.requests.length) {
      p.push(
        `the origin got a request the strict reading has not (or out of order): ${q.method} ${q.target} body ${show(q.body, 200)} (reference: ${ref.requests.map((r) => `${r.method} ${r.target} ${show(r.body, 60)}`).join(' | ')}; stop ${JSON.stringify(ref.stop)})`,
      );
      break;
    }
    const r = ref.requests[i]!;
    matched.push(r);
    i += 1;
    const te = originHeader(q, 'transfer-encoding');
    const cls = q.headers.filter(([k]) => k.toLowerCase() === 'content-length');
    if (te !== undefined) p.push(`${q.target}: transfer-encoding ${te} reached the origin`);
    if (cls.length > 1) p.push(`${q.target}: ${cls.length} content-length lines reached the origin`);
    if (cls.length === 1 && Number(cls[0]![1]) !== q.body.length)
      p.push(`${q.target}: content-length ${cls[0]![1]} for ${q.body.length} body bytes`);
    if (q.body.length > 0 && cls.length === 0) p.push(`${q.target}: a body without content-length`);
    const host = refHeader(r, 'host') ?? '';
    // A trailing dot names the same host (RFC 1034 §3.1).
    if (host.toLowerCase().replace(/\.:/, ':') !== g.c.connect.toLowerCase())
      p.push(`${q.target}: served with host ${JSON.stringify(host)}, the tunnel's is ${g.c.connect}`);
    const auth = originHeader(q, 'authorization');
    const wantSecret = refHeader(r, 'authorization') === `Bearer ${DUMMY}`;
    if (wantSecret !== (auth === `Bearer ${secret}`))
      p.push(
        `${q.target}: authorization ${JSON.stringify(auth)} at the origin, the client's ${JSON.stringify(refHeader(r, 'authorization'))}`,
      );
    if (q.raw.toString('latin1').includes('postern-')) p.push(`${q.target}: a placeholder reached the origin`);
    if (exposures(q.raw.toString('latin1').replace(`Bearer ${secret}`, ''), secret).length > 0)
      p.push(`${q.target}: the secret reached the origin outside its Authorization slot`);
  }
  // 2. The answers.
  const read = readResponses(raw, []);
  if (read.error !== null && !(how === 'closed' && /incomplete/.test(read.error)))
    p.push(`the answers do not parse strictly: ${read.error}`);
  else if (read.error !== null) p.push(`a response cut short by the close: ${read.error}`);
  const answers = read.responses;
  const served = answers.filter((a) => refusalOf(a) === null);
  for (const a of answers) {
    const e = refusalOf(a);
    if (e === null) {
      if (a.status !== 200 || !a.body.toString('latin1').startsWith('seen:'))
        p.push(`an answer that is neither the origin's nor a refusal: ${a.status} ${show(a.body, 200)}`);
    } else {
      if (typeof e.audit_seq !== 'number') p.push(`a refusal without audit_seq: ${show(a.body, 200)}`);
      if (a.status < 400) p.push(`a refusal with status ${a.status}`);
    }
  }
  // Answers align with the reference's requests: the i-th answers the
  // i-th (each request exactly one answer, in order), and one more may
  // answer the error or the cut-short request that stopped the reading.
  const limit = ref.requests.length + (ref.stop.kind === 'error' || ref.stop.kind === 'incomplete' ? 1 : 0);
  if (answers.length > limit)
    p.push(`${answers.length} answers for ${ref.requests.length} request(s) (stop ${JSON.stringify(ref.stop)})`);
  answers.forEach((a, k) => {
    const r = ref.requests[k];
    if (refusalOf(a) === null && r !== undefined) {
      const named = a.body.toString('latin1').split(' ')[1];
      if (named !== targetPath(r.target)) p.push(`answer ${k} names ${named}, request ${k} is ${r.target}`);
    } else if (refusalOf(a) === null) p.push(`answer ${k} is the origin's, for no request of the client's`);
    const earlier = answers.slice(0, k);
    if (earlier.some((e) => /close/i.test(header(e.headers, 'connection') ?? '')))
      p.push(`answer ${k} (${a.status} ${refusalOf(a)?.code ?? ''}) came after an answer that said connection: close`);
    if (earlier.some((e, j) => refusalOf(e) === null && ref.requests[j]?.closesIfServed === true))
      p.push(`answer ${k} came after the served answer to a request that closes the connection`);
  });
  const servedTargets = served.map((a) => a.body.toString('latin1').split(' ')[1]);
  const originTargets = atOrigin.map((q) => q.target);
  if (JSON.stringify(servedTargets) !== JSON.stringify(originTargets))
    p.push(
      `origin answers in the client's order ${JSON.stringify(servedTargets)}, origin saw ${JSON.stringify(originTargets)}`,
    );
  if (
    how === 'idle' ||
    how === 'hard-timeout' ||
    how === 'missing' ||
    how.startsWith('error') ||
    how.startsWith('connect')
  )
    p.push(`the case ended by ${how} after ${ms} ms with ${answers.length} answer(s) of ${limit}`);
  if (how === 'expected' && answers.length < limit) p.push('ended before its answers (client bug)');
  if (how === 'closed' && answers.length < limit) {
    // Closed early: only after a refusal, or after the answer to a request
    // that closes the connection.
    const last = answers[answers.length - 1];
    const lastRef = ref.requests[answers.length - 1];
    const ok = (last !== undefined && refusalOf(last) !== null) || lastRef?.closesIfServed === true;
    if (!ok)
      p.push(
        `closed after ${answers.length} answer(s) of ${limit} without a refusal or closing request (stop ${JSON.stringify(ref.stop)})`,
      );
  }
  if (ms > 12000) p.push(`took ${ms} ms`);
  void matched;
  return p;
}
