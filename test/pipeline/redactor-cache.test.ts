// The redactors a credential's requests share (daemon/stores/redactors.ts):
// one built per set of needles and reused while they hold, rebuilt when
// they change, and wiped only when no request still scans with it, so a
// response in flight is redacted in full even after a refresh, a credential
// change or a lock replaced its redactor. Each case scans a real response
// body with the leased redactor and looks for the secret in what is left.
import t from 'tap';
import { buildRedactor, joinRedactors, redact, type Redactor } from '../../daemon/pipeline/redact';
import { RedactorCache } from '../../daemon/stores/redactors';

const SECRET = 'tk_live_Q9x7Yv0123456789ABCDEF';
const OTHER = 'tk_live_ZZ44Yv9876543210fedcba';
const needles = (s: string): Buffer[] => [Buffer.from(`Bearer ${s}`), Buffer.from(s)];
const body = (s: string): Buffer =>
  Buffer.from(`{"echo":"${s}","b64":"${Buffer.from(s).toString('base64')}","hex":"${Buffer.from(s).toString('hex')}"}`);

// The body redacted with r: no form of the secret is left.
function clean(r: Redactor | null, s: string): boolean {
  if (!r) return false;
  const out = redact(r, body(s)).data.toString();
  return (
    !out.includes(s) &&
    !out.includes(Buffer.from(s).toString('base64')) &&
    !out.includes(Buffer.from(s).toString('hex')) &&
    out.includes(`[REDACTED:${r.label}]`)
  );
}

function counting(): { cache: RedactorCache; builds: () => number; joins: () => number } {
  let n = 0;
  let j = 0;
  const cache = new RedactorCache(
    (ns, label) => {
      n += 1;
      return buildRedactor(ns, label);
    },
    (parts, label) => {
      j += 1;
      return joinRedactors(parts, label, null, true);
    },
  );
  return { cache, builds: () => n, joins: () => j };
}

t.test('the same needles share one redactor; the caller wiping its needles does not disturb it', async (t) => {
  const { cache, builds } = counting();
  const first = needles(SECRET);
  const a = cache.acquire('api', first);
  for (const n of first) n.fill(0); // what sendWithSecret does after the send
  const b = cache.acquire('api', needles(SECRET));
  t.equal(builds(), 1, 'built once');
  t.equal(a.redactor, b.redactor, 'the same redactor');
  t.ok(clean(b.redactor, SECRET), 'it still finds every form');
  a.release();
  b.release();
  const c = cache.acquire('api', needles(SECRET));
  t.equal(builds(), 1, 'kept after every lease ended: still current');
  t.ok(clean(c.redactor, SECRET));
  c.release();
});

t.test('other needles: a new redactor; the old one is wiped only when its last scan ends', async (t) => {
  const { cache, builds } = counting();
  const old = cache.acquire('api', needles(SECRET));
  const fresh = cache.acquire('api', needles(OTHER)); // a token refreshed meanwhile
  t.equal(builds(), 2);
  t.not(fresh.redactor, old.redactor);
  t.ok(clean(old.redactor, SECRET), 'the scan in flight still redacts in full');
  t.ok(clean(fresh.redactor, OTHER));
  old.release();
  t.notOk(clean(old.redactor, SECRET), 'wiped once released (the test of this very check)');
  t.ok(clean(fresh.redactor, OTHER), 'the current one untouched');
  old.release(); // a second release does nothing
  t.ok(clean(fresh.redactor, OTHER));
  fresh.release();
});

t.test('a different credential with the same needles has its own redactor (its own label)', async (t) => {
  const { cache, builds } = counting();
  const a = cache.acquire('api', needles(SECRET));
  const b = cache.acquire('api-2', needles(SECRET));
  t.equal(builds(), 2);
  t.equal(b.redactor?.label, 'api-2');
  a.release();
  b.release();
  t.equal(cache.size, 2);
});

t.test('forget and clear: wiped at once when idle, after the last lease when in use', async (t) => {
  const { cache, builds } = counting();
  const idle = cache.acquire('idle', needles(SECRET));
  const idleRedactor = idle.redactor;
  idle.release();
  const busy = cache.acquire('api', needles(SECRET));
  cache.forget('idle');
  t.notOk(clean(idleRedactor, SECRET), 'an idle redactor is wiped when its credential is forgotten');
  cache.clear(); // the vault locks while a response is streaming
  t.equal(cache.size, 0);
  t.ok(clean(busy.redactor, SECRET), 'the stream in flight still redacts');
  busy.release();
  t.notOk(clean(busy.redactor, SECRET), 'wiped when it ends');
  const again = cache.acquire('api', needles(SECRET));
  t.equal(builds(), 3, 'after the lock, rebuilt from the needles of the next request');
  t.ok(clean(again.redactor, SECRET));
  again.release();
});

t.test('needles too short to search: no redactor, nothing kept that could be mistaken for one', async (t) => {
  const { cache } = counting();
  const l = cache.acquire('api', [Buffer.from('abc')]);
  t.equal(l.redactor, null);
  l.release();
  const m = cache.acquire('api', needles(SECRET));
  t.ok(clean(m.redactor, SECRET), 'longer needles later get a real redactor');
  m.release();
});

// Two credentials covering one host: the join of their redactors is kept
// for the next request, and wiped only when a part is wiped (no lease left).
const bothBody = (): Buffer => Buffer.concat([body(SECRET), body(OTHER)]);
function bothClean(r: Redactor | null): boolean {
  if (!r) return false;
  const out = redact(r, bothBody()).data.toString();
  return (
    !out.includes(SECRET) &&
    !out.includes(OTHER) &&
    out.includes('[REDACTED:api]') &&
    out.includes('[REDACTED:api-admin]')
  );
}

t.test("the join of two credentials' redactors is kept while its parts live", async (t) => {
  const { cache, joins } = counting();
  const a = cache.acquire('api', needles(SECRET));
  const b = cache.acquire('api-admin', needles(OTHER));
  const first = cache.joined([a, b], 'api|api-admin');
  t.ok(bothClean(first), 'each occurrence marked with its own credential');
  a.release();
  b.release();
  const a2 = cache.acquire('api', needles(SECRET));
  const b2 = cache.current('api-admin');
  t.ok(b2);
  const second = cache.joined([a2, b2!], 'api|api-admin');
  t.equal(second, first, 'the next request has the same join');
  t.equal(joins(), 1, 'built once');
  t.not(cache.joined([b2!, a2], 'api-admin|api'), first, 'another order, another label: its own join');
  // api's token refreshed while a2 still scans: the join stays whole for it
  const a3 = cache.acquire('api', needles('tk_live_NEW0000000000000000')); // replaces api's entry
  t.ok(bothClean(second), 'a scan in flight with the join still redacts both');
  a2.release();
  t.notOk(bothClean(second), "wiped with its replaced part when that part's last lease ended");
  t.ok(clean(b2!.redactor, OTHER), 'the other part untouched');
  const fresh = cache.joined([a3, b2!], 'api|api-admin');
  t.not(fresh, second, 'a new join of the new part');
  a3.release();
  b2!.release();
  cache.clear();
  t.equal(
    fresh?.byFirst.every((f) => f.length === 0),
    true,
    'the lock wipes the kept joins with their parts',
  );
});

t.test('a lease not given out by the cache is never joined and kept', async (t) => {
  const { cache, joins } = counting();
  const a = cache.acquire('api', needles(SECRET));
  const own = { redactor: buildRedactor(needles(OTHER), 'api'), release: () => undefined };
  t.equal(cache.joined([a, own], 'api|api'), null, 'a redactor made for one request: the caller joins it');
  t.equal(cache.joined([{ ...a }], 'api'), null, 'a copy of a lease is not the lease');
  t.equal(cache.joined([a], 'api'), null, 'one part: nothing to join');
  t.equal(joins(), 0);
  a.release();
});
