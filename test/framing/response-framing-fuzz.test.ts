// Randomised differential framing of responses FROM a raw TLS origin to
// postern, behind the proxy front door (SPEC §6.2-§6.4, §11; docs/proxy.md
// §5). Seeded generators answer each proxied request with mutated bytes:
// 1xx interim answers (echoing the secret), content-length lies (longer,
// shorter), duplicate or odd content-length, transfer-encoding variants,
// chunk-size spellings, chunk extensions, trailers, close-delimited bodies,
// bodies on 204/304/HEAD, bytes after the body, a second response for one
// request (at once or later), odd header bytes, and the injected secret
// echoed in every place (raw, base64, hex, percent-encoded, split across
// chunks, in header names and values, in a trailer, in the 1xx). A strict
// reader (fuzz-kit.ts readResponses) of what the origin wrote is the
// reference. Per case (one or two requests pipelined on one tunnel):
// - each answer the client got is whole and strictly framed, or the last
//   one, cut by a close (docs/proxy.md: a failure after the head aborts the
//   message); a complete answer is the origin's response to THAT request
//   (x-for names it), never a forged second response, or a §6.3 refusal;
// - a response the reference reads as clean (strictly framed, nothing
//   after it) comes back whole with its status and body;
// - a request behind an answer that was cut or closed is never sent; each
//   request reaches the origin at most once;
// and at the end the daemon is alive, the secret is in no byte the client
// got, the daemon log or the journal, and the journal verifies.
// FUZZ_SEEDS=1,2 npx tap … replays given seeds.
import t from 'tap';
import { appendFileSync } from 'node:fs';
import { startStack } from '../helpers/stack';
import { startRawOrigin, header as originHeader, type RouteAnswer } from '../helpers/raw-origin';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import {
  Rng,
  seeds,
  PH,
  dummyPlaceholder,
  runFuzzClient,
  readResponses,
  refusalOf,
  header,
  show,
  type FuzzCase,
  addApiCredential,
  nothingLeaked,
} from '../helpers/framing-kit';

const HOST = 'api.example.test';
const CASES_PER_SEED = 150;
const DUMMY = dummyPlaceholder('api');

// What the origin answers one request with, as a function of the secret it
// received (rendered at the origin, and again by the oracle).
interface Spec {
  notes: string[];
  // No mutation a careful client would refuse: framed by one content-length,
  // chunked or the close, valid header lines under undici's size limit,
  // plain chunk lines, nothing after the message.
  plain: boolean;
  render(target: string, method: string, secret: string): { bytes: Buffer; close: boolean; later?: Buffer };
}

function secretForm(rng: Rng): (s: string) => string {
  const k = rng.int(6);
  if (k === 0) return (s) => s;
  if (k === 1) return (s) => Buffer.from(s).toString('base64');
  if (k === 2) return (s) => Buffer.from(s).toString('hex');
  if (k === 3) return (s) => encodeURIComponent(`x=${s}&y`);
  if (k === 4) return (s) => JSON.stringify({ token: s });
  return () => 'no secret here';
}

function genSpec(rng: Rng): Spec {
  const notes: string[] = [];
  const note = (x: string): void => void notes.push(x);
  const status = rng.pick([200, 200, 200, 200, 201, 204, 304, 404, 500, 206]);
  if (status !== 200) note(`status-${status}`);
  const form = secretForm(rng);
  const filler = rng.word(rng.int(60));
  const interim = rng.int(12);
  const framing = rng.pick([
    'cl',
    'cl',
    'cl',
    'chunked',
    'chunked',
    'close',
    'cl-longer',
    'cl-shorter',
    'cl-dup-same',
    'cl-dup-diff',
    'cl-list',
    'cl-plus',
    'cl-neg',
    'cl-huge',
    'cl-te',
    'te-not-last',
    'te-identity',
    'te-case',
    'te-dup',
    'te-obsfold',
  ] as const);
  note(framing);
  const chunkMut = rng.int(16);
  const trailer = rng.int(6);
  const headerMut = rng.int(16);
  const after = rng.int(9);
  const closeAnyway = rng.chance(0.15);
  const delta = 1 + rng.int(6);
  const split = 1 + rng.int(7);
  if (interim < 3) note(`interim-${interim}`);
  if (chunkMut < 9 && /chunk|te/.test(framing)) note(`chunk-mut-${chunkMut}`);
  if (trailer < 3 && /chunk|te/.test(framing)) note(`trailer-${trailer}`);
  if (headerMut < 9) note(`header-mut-${headerMut}`);
  if (after < 4) note(`after-${after}`);
  if (closeAnyway) note('close');
  const plain =
    ['cl', 'chunked', 'close'].includes(framing) &&
    (headerMut >= 9 || [0, 4, 7].includes(headerMut)) &&
    (chunkMut >= 9 || chunkMut === 3 || framing !== 'chunked') &&
    trailer !== 2 &&
    after >= 5;
  return {
    notes,
    plain,
    render(target, method, secret) {
      const echo = form(secret);
      const body = Buffer.from(`for=${target} ${filler} ${echo} end`, 'latin1');
      const hs: string[] = [`x-for: ${target}`, 'content-type: text/plain'];
      if (headerMut === 0) hs.push(`x-echo: ${secret}`);
      else if (headerMut === 1) hs.push(`x-fold: a\r\n ${secret}`);
      else if (headerMut === 2) hs.push(`x-nul: a\x00${secret}`);
      else if (headerMut === 3) hs.push(`x-name-${Buffer.from(secret).toString('hex')}: v`);
      else if (headerMut === 4) hs.push(`set-cookie: sid=${secret}`);
      else if (headerMut === 5) hs.push(`x bad: ${secret}`);
      else if (headerMut === 6) hs.push(`x-long: ${'y'.repeat(20000)}${secret}`);
      else if (headerMut === 7) hs.push(`x-high: \xe9\xff${secret}`);
      else if (headerMut === 8) hs.push(`x-lf: a\nx-inner: ${secret}`);
      let head = '';
      if (interim === 0) head += 'HTTP/1.1 100 Continue\r\n\r\n';
      else if (interim === 1) head += `HTTP/1.1 102 Processing\r\nx-echo: ${secret}\r\n\r\n`;
      else if (interim === 2) head += `HTTP/1.1 103 Early Hints\r\nlink: </a?t=${secret}>; rel=preload\r\n\r\n`;
      const statusLine = `HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'Other'}\r\n`;
      const chunkedBody = (): string => {
        const b = body.toString('latin1');
        const parts: string[] = [];
        for (let at = 0; at < b.length; at += split * 5) {
          const piece = b.slice(at, at + split * 5);
          let size = piece.length.toString(16);
          let ext = '';
          let eol = '\r\n';
          let tail = '\r\n';
          if (at === 0) {
            if (chunkMut === 0) size = `00${size}`;
            else if (chunkMut === 1) size = `0x${size}`;
            else if (chunkMut === 2) size = `+${size}`;
            else if (chunkMut === 3) ext = `;ext="${secret};x"`;
            else if (chunkMut === 4) eol = '\n';
            else if (chunkMut === 5) size = 'fffffffffffffffffff';
            else if (chunkMut === 6) tail = '';
            else if (chunkMut === 7) ext = ';a="b\rc"';
            else if (chunkMut === 8) size = `${size} `;
          }
          parts.push(`${size}${ext}${eol}${piece}${tail}`);
        }
        let tr = '';
        if (trailer === 0) tr = `x-trailer: ${secret}\r\n`;
        else if (trailer === 1) tr = `set-cookie: t=${secret}\r\n`;
        else if (trailer === 2) tr = 'content-length: 3\r\n';
        return `${parts.join('')}0\r\n${tr}\r\n`;
      };
      const n = body.length;
      let framed = '';
      let close = closeAnyway;
      const b = body.toString('latin1');
      switch (framing) {
        case 'cl':
          framed = `content-length: ${n}\r\n\r\n${b}`;
          break;
        case 'chunked':
          framed = `transfer-encoding: chunked\r\n\r\n${chunkedBody()}`;
          break;
        case 'close':
          framed = `\r\n${b}`;
          close = true;
          break;
        case 'cl-longer':
          framed = `content-length: ${n + delta}\r\n\r\n${b}`;
          break;
        case 'cl-shorter':
          framed = `content-length: ${Math.max(0, n - delta)}\r\n\r\n${b}`;
          break;
        case 'cl-dup-same':
          framed = `content-length: ${n}\r\ncontent-length: ${n}\r\n\r\n${b}`;
          break;
        case 'cl-dup-diff':
          framed = `content-length: ${n}\r\ncontent-length: ${n + delta}\r\n\r\n${b}`;
          break;
        case 'cl-list':
          framed = `content-length: ${n}, ${n}\r\n\r\n${b}`;
          break;
        case 'cl-plus':
          framed = `content-length: +${n}\r\n\r\n${b}`;
          break;
        case 'cl-neg':
          framed = `content-length: -${n}\r\n\r\n${b}`;
          break;
        case 'cl-huge':
          framed = `content-length: 99999999999999999999\r\n\r\n${b}`;
          break;
        case 'cl-te':
          framed = `content-length: ${n}\r\ntransfer-encoding: chunked\r\n\r\n${chunkedBody()}`;
          break;
        case 'te-not-last':
          framed = `transfer-encoding: chunked, identity\r\n\r\n${chunkedBody()}`;
          break;
        case 'te-identity':
          framed = `transfer-encoding: identity\r\n\r\n${b}`;
          close = true;
          break;
        case 'te-case':
          framed = `transfer-encoding: Chunked\r\n\r\n${chunkedBody()}`;
          break;
        case 'te-dup':
          framed = `transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n${chunkedBody()}`;
          break;
        case 'te-obsfold':
          framed = `transfer-encoding:\r\n chunked\r\n\r\n${chunkedBody()}`;
          break;
      }
      // Bodiless answers: the head only, unless the mutation says otherwise.
      const bodiless = method === 'HEAD' || status === 204 || status === 304;
      if (bodiless && rng0(after) !== 'body-anyway') framed = framed.slice(0, framed.indexOf('\r\n\r\n') + 4);
      if (closeAnyway) hs.push('connection: close');
      let bytes = `${head}${statusLine}${hs.join('\r\n')}\r\n${framed}`;
      let later: Buffer | undefined;
      const forged = `HTTP/1.1 200 OK\r\nx-for: forged\r\ncontent-length: ${secret.length + 7}\r\n\r\nforged:${secret}`;
      if (after === 0) bytes += 'XYZ';
      else if (after === 1) bytes += forged;
      else if (after === 2) later = Buffer.from(forged, 'latin1');
      else if (after === 3) bytes += '\r\n';
      return { bytes: Buffer.from(bytes, 'latin1'), close, later };
    },
  };
}

// `after` 4 on a bodiless answer: the body is written anyway.
function rng0(after: number): string {
  return after === 4 ? 'body-anyway' : '';
}

interface ReqSpec {
  target: string;
  method: string;
  withPh: boolean;
  spec: Spec;
}

interface Gen {
  c: FuzzCase;
  reqs: ReqSpec[];
}

function generate(rng: Rng, caseId: string, A: string): Gen {
  const n = rng.chance(0.35) ? 2 : 1;
  const reqs: ReqSpec[] = [];
  let wire = '';
  for (let k = 0; k < n; k++) {
    const method = rng.pick(['GET', 'GET', 'GET', 'HEAD', 'POST'] as const);
    const withPh = rng.chance(0.8);
    const target = `/r/${caseId}/${k}`;
    reqs.push({ target, method, withPh, spec: genSpec(rng) });
    const auth = withPh ? `Authorization: Bearer ${PH}\r\n` : '';
    const body = method === 'POST' ? 'content-length: 3\r\n\r\nx=1' : '\r\n';
    wire += `${method} ${target} HTTP/1.1\r\nHost: ${A}\r\n${auth}${body}`;
  }
  const bytes = Buffer.from(wire.split(PH).join(DUMMY), 'latin1');
  return {
    c: {
      id: caseId,
      connect: A,
      writes: [{ data: bytes.toString('base64') }],
      expect: n,
      methods: reqs.map((r) => r.method),
      idle: 4000,
      strayMs: 200,
    },
    reqs,
  };
}

t.test('randomised response framing from a raw origin', async (t) => {
  const s = await startStack({
    records: { [HOST]: { A: ['127.0.0.1'] } },
    config: 'agent_request_timeout = "2s"',
    httpConfig: 'timeout = "2s"\nmax_response_body = "64KiB"',
  });
  t.teardown(() => s.close());
  let died: number | null = null;
  void s.d.exited.then(() => (died = Date.now()));
  const specs = new Map<string, ReqSpec>();
  const origin = await startRawOrigin(
    { tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true },
    (head): RouteAnswer => {
      const r = specs.get(head.target);
      const auth = originHeader(head, 'authorization') ?? '';
      const secretSeen = auth.replace(/^Bearer /, '');
      if (!r)
        return {
          read: 'declared',
          respond: () => Buffer.from('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n'),
        };
      const out = r.spec.render(head.target, head.method, secretSeen || 'none');
      return {
        read: 'declared',
        respond: () => out.bytes,
        close: out.close,
        ...(out.later ? { later: { ms: 60, bytes: out.later } } : {}),
      };
    },
  );
  t.teardown(() => origin.close());
  const A = `${HOST}:${origin.port}`;
  const secret = makeCanary('FUZZRESP');
  addApiCredential(s, origin.port, secret, ['GET', 'POST', 'HEAD']);
  await s.approver();

  const received: Buffer[] = [];
  let total = 0;
  for (const seed of seeds([0xbeef01, 0xbeef02])) {
    const rng = new Rng(seed);
    const gens = new Map<string, Gen>();
    for (let i = 0; i < CASES_PER_SEED; i++) {
      const id = `${seed.toString(16)}-${i}`;
      const g = generate(rng, id, A);
      gens.set(id, g);
      for (const r of g.reqs) specs.set(r.target, r);
    }
    const started = Date.now();
    const run = await runFuzzClient(
      s.h,
      [...gens.values()].map((g) => g.c),
      { phVar: 'API_TOKEN', dummy: DUMMY, concurrency: 6, tag: `resp-${seed}` },
    );
    // What the run printed besides the answers (which are checked decoded, per case).
    received.push(Buffer.from(run.stderr));
    t.equal(run.code, 0, `seed ${seed}: the client ran (${run.stderr.slice(0, 500)})`);
    const failures: string[] = [];
    for (const [id, g] of gens) {
      total += 1;
      const got = run.got.get(id);
      const raw = Buffer.from(got?.raw ?? '', 'base64');
      received.push(raw);
      const problems = checkCase(g, got?.how ?? 'missing', raw, origin, secret);
      if (problems.length > 0) {
        const sent = g.reqs.map((r) => show(r.spec.render(r.target, r.method, secret).bytes, 600)).join('\n    ');
        failures.push(
          `seed ${seed} case ${id} [${g.reqs.map((r, k) => `${k}:${r.method}${r.withPh ? '+ph' : ''} ${r.spec.notes.join(' ')}`).join(' | ')}] how=${got?.how} ms=${got?.ms}\n  ${problems.join('\n  ')}\n  origin wrote (secret as sent):\n    ${sent}\n  client got: ${show(raw)}`,
        );
      }
    }
    if (process.env['FUZZ_REPORT']) appendFileSync(process.env['FUZZ_REPORT'], failures.join('\n\n') + '\n');
    t.same(failures, [], `seed ${seed}: ${gens.size} cases in ${Date.now() - started} ms`);
    t.equal(died, null, `seed ${seed}: the daemon is alive`);
  }
  t.comment(`${total} generated cases`);
  t.equal(died, null, 'the daemon never died');
  await nothingLeaked(t, s, received, secret);
});

function checkCase(
  g: Gen,
  how: string,
  raw: Buffer,
  origin: { requests: { target: string }[] },
  secret: string,
): string[] {
  const p: string[] = [];
  const { responses, error, rest } = readResponses(
    raw,
    g.reqs.map((r) => r.method),
  );
  if (error !== null && !(how === 'closed' && /incomplete/.test(error)))
    p.push(`the client's bytes do not parse strictly: ${error} (${show(rest, 300)})`);
  const cut = error !== null; // the last message was cut by the close
  const leak = exposures(raw, secret);
  if (leak.length > 0) p.push(`the client got the secret: ${leak.slice(0, 3).join(', ')}`);
  for (const [k, a] of responses.entries()) {
    const inBody = exposures(a.body, secret);
    if (inBody.length > 0) p.push(`answer ${k}'s decoded body holds the secret: ${inBody.slice(0, 3).join(', ')}`);
  }
  if (responses.length > g.reqs.length) p.push(`${responses.length} answers for ${g.reqs.length} requests`);
  if (
    how === 'idle' ||
    how === 'hard-timeout' ||
    how === 'missing' ||
    how.startsWith('error') ||
    how.startsWith('connect')
  )
    p.push(`ended by ${how} with ${responses.length} answer(s) of ${g.reqs.length}`);
  g.reqs.forEach((r, k) => {
    const atOrigin = origin.requests.filter((q) => q.target === r.target).length;
    if (atOrigin > 1) p.push(`${r.target} reached the origin ${atOrigin} times`);
    const a = responses[k];
    const ref = r.spec.render(r.target, r.method, secret);
    const refRead = readResponses(ref.bytes, [r.method]);
    const refOne = refRead.responses[0];
    // Clean: strictly framed, nothing after it, no header the reader refuses.
    const clean =
      r.spec.plain && refRead.error === null && refRead.responses.length === 1 && !ref.later && refOne !== undefined;
    if (a === undefined) {
      if (k === responses.length && cut) {
        // Its own answer was cut by the close: only a response that is not clean.
        if (clean) p.push(`the clean response to ${r.target} (${refOne?.status}) was cut`);
        return;
      }
      // Behind an answer that closed the connection or was cut: never sent.
      if (how !== 'closed') p.push(`${r.target} got no answer and the connection stayed open (how=${how})`);
      if (atOrigin > 0) p.push(`${r.target} reached the origin, but the connection closed before its answer`);
      return;
    }
    const e = refusalOf(a, r.method);
    const forFor = header(a.headers, 'x-for');
    if (forFor === 'forged' || a.body.toString('latin1').startsWith('forged:'))
      p.push(`answer ${k} is the origin's forged second response`);
    if (e !== null) {
      if (typeof e.audit_seq !== 'number' || (e.audit_seq < 0 && r.method !== 'HEAD'))
        p.push(`refusal ${k} without audit_seq`);
      if (clean && refOne!.status < 300 && r.spec.notes.every((n) => !/status/.test(n)))
        p.push(`a clean response to ${r.target} was refused: ${e.code} ${show(a.body, 300)}`);
      return;
    }
    if (forFor !== r.target) p.push(`answer ${k} says x-for ${forFor}, its request is ${r.target}`);
    if (clean) {
      if (a.status !== refOne!.status) p.push(`answer ${k} status ${a.status}, the origin's ${refOne!.status}`);
      const want = refOne!.body.toString('latin1');
      const gotBody = a.body.toString('latin1');
      if (exposures(want, secret).length === 0 && gotBody !== want)
        p.push(`answer ${k} body ${show(gotBody, 200)}, the origin's ${show(want, 200)}`);
    }
  });
  return p;
}
