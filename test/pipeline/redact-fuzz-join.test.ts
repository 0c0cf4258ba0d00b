// joins of several credentials' redactors (joinRedactors, byPart as
// the daemon builds them) and the redactor cache's kept joins
// (daemon/stores/redactors.ts). Each occurrence of either credential's
// value, in every form, is replaced whole and marked with the name of the
// credential whose value it is; needles that are prefixes of each other
// give the longest; the streamed output equals redact()'s; a join kept by
// the cache follows a credential's new secret and never hands out a wiped
// join.
import t from 'tap';
import { buildRedactor, joinRedactors, redact, type Redactor } from '../../daemon/pipeline/redact';
import { RedactorCache } from '../../daemon/stores/redactors';
import {
  chunked,
  escapePieces,
  int,
  lat,
  mustBuild,
  needle,
  pick,
  radixCase,
  rng,
  show,
  streamed,
  type Rnd,
} from '../helpers/redact-fuzz';

const INERT = '!#$()*,.;<>?@[]^`{|}~';
const inert = (r: Rnd, len: number, avoid: Buffer[]): string => {
  const bad = new Set(avoid.map((b) => b.toString('latin1')).join(''));
  const alpha = [...INERT].filter((c) => !bad.has(c));
  let s = '';
  for (let i = 0; i < len; i++) s += pick(r, alpha.length ? alpha : ['~']);
  return s;
};

// An occurrence of n with nothing decodable around it: [text, before, after].
function written(r: Rnd, n: Buffer): [string, string, string] {
  const k = int(r, 4);
  if (k === 0) return [escapePieces(r, n, true, 0.6).join(''), '', ''];
  if (k === 1) return [n.toString('hex').toUpperCase(), '', ''];
  // UTF-16 only of valid UTF-8 (minimal.test.ts covers the other case).
  if (k === 2 && Buffer.from(n.toString('utf8'), 'utf8').equals(n))
    return [Buffer.from(n.toString('utf8'), 'utf16le').toString('latin1'), '', ''];
  if (k === 2) return [n.toString('hex'), '', ''];
  const c = radixCase('base64', Buffer.from([int(r, 256)]), n, Buffer.alloc(0), true, r);
  return [c.chars, c.chars.slice(0, c.first), c.chars.slice(c.last)];
}

const endsInEscapeByte = (b: Buffer): boolean => [0x25, 0x5c, 0x26].includes(b[b.length - 1] as number);

t.test('two credentials joined: each occurrence marked with its own name', async (t) => {
  const fails = new Map<string, string>();
  let cases = 0;
  for (let seed = 1; seed <= 200; seed++) {
    const r = rng(seed * 31337);
    const a = needle(r, pick(r, ['ascii', 'binary', 'utf8', 'short'] as const));
    // b: unrelated, or a with more after it (a is a prefix of b), or a inside b.
    const rel = int(r, 3);
    const tail = needle(r, 'short');
    const b = rel === 0 ? needle(r, 'ascii') : rel === 1 ? Buffer.concat([a, tail]) : Buffer.concat([tail, a]);
    if (endsInEscapeByte(a) || endsInEscapeByte(b) || a.equals(b)) continue;
    const ra = mustBuild([a, Buffer.concat([lat('Bearer '), a])], 'A');
    const rb = mustBuild([b], 'B');
    const join = joinRedactors([ra, rb], 'A|B', null, true);
    let body = '';
    let want = '';
    for (let k = 0; k < 4; k++) {
      const gap = inert(r, 1 + int(r, 6), [a, b]);
      const [which, n] = r() < 0.5 ? (['A', a] as const) : (['B', b] as const);
      const [text, before, after] = written(r, n);
      body += gap + text;
      want += gap + before + `[REDACTED:${which}]` + after;
    }
    const data = lat(body);
    const got = redact(join, data);
    cases += 1;
    const key = `rel ${rel}`;
    if (!got.data.equals(lat(want)) && !fails.has(key))
      fails.set(
        key,
        `seed ${seed} a ${show(a)} b ${show(b)}\n  body ${show(body)}\n  want ${show(want)}\n  got  ${show(got.data)}`,
      );
    const s = streamed(join, chunked(r, data, 1 + int(r, 5)), Infinity, r() < 0.5);
    if ((!s.data.equals(got.data) || s.count !== got.count) && !fails.has(`${key} stream`))
      fails.set(`${key} stream`, `seed ${seed} body ${show(body)} redact ${show(got.data)} stream ${show(s.data)}`);
    join.wipe();
    ra.wipe();
    rb.wipe();
  }
  for (const [k, v] of fails) t.fail(`${k}: ${v}`);
  t.equal(fails.size, 0, `${cases} joined bodies`);
});

t.test('a join with an own-needles part (withOwnNeedles shape) finds both', async (t) => {
  const r = rng(99);
  for (let k = 0; k < 50; k++) {
    const cached = mustBuild([needle(r, 'ascii')], 'api');
    const ownSecret = needle(r, 'binary');
    const own = mustBuild([ownSecret], 'api');
    const join = joinRedactors([cached, own], 'api', own);
    const data = Buffer.concat([lat('x '), lat(Buffer.from(ownSecret).toString('base64')), lat(' y')]);
    const got = redact(join, data);
    t.equal(got.count, 1, `own needle found (k=${k})`);
    join.wipe(); // wipes own, not cached
    const again = redact(cached, Buffer.from('nothing'));
    t.equal(again.count, 0);
    cached.wipe();
  }
});

t.test('the cache: a kept join follows a new secret and is never wiped under a holder', async (t) => {
  const cache = new RedactorCache(buildRedactor, (parts, label) => joinRedactors(parts, label, null, true));
  const a1 = lat('alpha-secret-one');
  const a2 = lat('alpha-secret-two');
  const b = lat('bravo-secret-xyz');
  const la = cache.acquire('A', [a1]);
  const lb = cache.acquire('B', [b]);
  const j1 = cache.joined([la, lb], 'A|B') as Redactor;
  t.ok(j1, 'join kept');
  t.equal(cache.joined([la, lb], 'A|B'), j1, 'the same join again');
  t.match(
    redact(j1, lat(`x ${a1.toString('base64')} y ${b.toString('hex')}`)).data.toString(),
    /\[REDACTED:A\].*\[REDACTED:B\]/,
  );
  // A's secret changes while the first request still holds its leases.
  const la2 = cache.acquire('A', [a2]);
  t.equal(redact(j1, lat(`x ${a1.toString()} y`)).count, 1, 'the held join still works while leased');
  const lb2 = cache.acquire('B', [b]);
  const j2 = cache.joined([la2, lb2], 'A|B') as Redactor;
  t.not(j2, j1, 'a new join for the new secret');
  t.equal(redact(j2, lat(`x ${a2.toString()} y`)).count, 1, 'new secret found');
  la.release();
  lb.release();
  t.equal(
    redact(j2, lat(`x ${a2.toString()} y ${b.toString()}`)).count,
    2,
    'new join intact after the old one is wiped',
  );
  t.equal(redact(j1, lat(`x ${a1.toString()} y`)).count, 0, 'old join wiped once released');
  cache.forget('B');
  t.equal(redact(j2, lat(`x ${a2.toString()}`)).count, 1, 'still held: not wiped');
  la2.release();
  lb2.release();
  t.equal(redact(j2, lat(`x ${a2.toString()}`)).count, 0, 'wiped with its part');
  const lb3 = cache.acquire('B', [b]);
  const la3 = cache.acquire('A', [a2]);
  const j3 = cache.joined([la3, lb3], 'A|B') as Redactor;
  t.not(j3, j2, 'no wiped join handed out');
  t.equal(redact(j3, lat(`${a2.toString()} ${b.toString()}`)).count, 2);
  la3.release();
  lb3.release();
  cache.clear();
});
