// The idempotency store on its own (SPEC §6.5), with its clock injected:
// records are scoped by (scope, credential, key), at most 10,000 are kept
// (the oldest dropped first), each lives 24 h, and a ticket that outlived
// its record (dropped, expired, purged) never touches a newer record with
// the same key.
import t from 'tap';
import {
  IdempotencyStore,
  IDEMPOTENCY_MAX_RECORDS,
  IDEMPOTENCY_TTL_MS,
  Lookup,
  Ticket,
} from '../../daemon/stores/idempotency';
import { Refusal } from '../../shared/errors';

function clock(start = 1_700_000_000_000): { now: () => number; at: number; advance(ms: number): void } {
  const c = { at: start, now: () => c.at, advance: (ms: number) => void (c.at += ms) };
  return c;
}

function ticketOf(l: Lookup): Ticket {
  if (l.kind !== 'new') throw new Error(`expected a new record, got ${l.kind}`);
  return l.ticket;
}

function codeOf(f: () => unknown): string | null {
  try {
    f();
    return null;
  } catch (e) {
    return e instanceof Refusal ? e.code : `not a refusal: ${String(e)}`;
  }
}

const reply = (n: number) => ({ kind: 'reply' as const, reply: { status: 200, body: `r${n}` }, auditSeq: n });

t.test('the limits are the documented ones', async (t) => {
  t.equal(IDEMPOTENCY_MAX_RECORDS, 10_000);
  t.equal(IDEMPOTENCY_TTL_MS, 24 * 3600 * 1000);
});

t.test('same request replays, another is a conflict, an unfinished one is in progress', async (t) => {
  const c = clock();
  const s = new IdempotencyStore(c.now);
  const tk = ticketOf(s.lookup('session:a', 'api', 'k', 'h1'));
  t.equal(
    codeOf(() => s.lookup('session:a', 'api', 'k', 'h1')),
    'in_progress',
  );
  t.equal(
    codeOf(() => s.lookup('session:a', 'api', 'k', 'h2')),
    'idempotency_conflict',
    'a different request is a conflict even while in flight',
  );
  tk.finish(reply(7));
  const again = s.lookup('session:a', 'api', 'k', 'h1');
  t.equal(again.kind, 'replay');
  t.same(again.kind === 'replay' ? again.outcome : null, reply(7));
  t.equal(
    codeOf(() => s.lookup('session:a', 'api', 'k', 'h2')),
    'idempotency_conflict',
  );
  // The scope, the credential and the key each make a separate record.
  t.equal(s.lookup('session:b', 'api', 'k', 'h1').kind, 'new');
  t.equal(s.lookup('session:a', 'other', 'k', 'h1').kind, 'new');
  t.equal(s.lookup('session:a', 'api', 'k2', 'h1').kind, 'new');
  t.equal(s.size, 4);
});

t.test('an abandoned key runs again; a refusal outcome replays as recorded', async (t) => {
  const s = new IdempotencyStore(clock().now);
  ticketOf(s.lookup('p', 'api', 'k', 'h1')).abandon();
  t.equal(s.size, 0);
  const tk = ticketOf(s.lookup('p', 'api', 'k', 'h2'));
  const refusal = new Refusal('upstream_timeout', 'late', { maybe_executed: true, audit_seq: 9 });
  tk.finish({ kind: 'refusal', refusal, auditSeq: 9 });
  const r = s.lookup('p', 'api', 'k', 'h2');
  t.equal(r.kind, 'replay');
  if (r.kind === 'replay' && r.outcome.kind === 'refusal') {
    t.equal(r.outcome.refusal.code, 'upstream_timeout');
    t.equal(r.outcome.auditSeq, 9);
  } else t.fail('a refusal outcome');
});

t.test('at most 10,000 records: the oldest is dropped first', async (t) => {
  const c = clock();
  const s = new IdempotencyStore(c.now);
  const tickets: Ticket[] = [];
  for (let i = 0; i < IDEMPOTENCY_MAX_RECORDS; i++) {
    const tk = ticketOf(s.lookup('session:a', 'api', `k${i}`, `h${i}`));
    tk.finish(reply(i));
    tickets.push(tk);
    c.advance(1);
  }
  t.equal(s.size, IDEMPOTENCY_MAX_RECORDS);
  t.equal(s.lookup('session:a', 'api', 'k0', 'h0').kind, 'replay', 'all 10,000 are kept');
  // One more: k0 was just looked up but is still the oldest by age, so it goes.
  ticketOf(s.lookup('session:a', 'api', 'new', 'hn')).finish(reply(-1));
  t.equal(s.size, IDEMPOTENCY_MAX_RECORDS);
  const k0 = s.lookup('session:a', 'api', 'k0', 'h-other');
  t.equal(k0.kind, 'new', 'the oldest record is gone: its key is free, even for another request');
  t.equal(s.size, IDEMPOTENCY_MAX_RECORDS, 're-adding k0 dropped the next oldest');
  t.equal(s.lookup('session:a', 'api', 'k1', 'h1').kind, 'new', 'k1 was the next oldest');
  t.equal(s.lookup('session:a', 'api', 'k9999', 'h9999').kind, 'replay', 'the newest of the first batch is kept');
  t.equal(s.lookup('session:a', 'api', 'new', 'hn').kind, 'replay');
  // The dropped record's late ticket does not touch the new record.
  tickets[0]!.finish(reply(123));
  tickets[0]!.abandon();
  t.equal(
    codeOf(() => s.lookup('session:a', 'api', 'k0', 'h-other')),
    'in_progress',
    'the new k0 record is untouched by the old ticket',
  );
});

t.test('a smaller bound is honoured exactly', async (t) => {
  const s = new IdempotencyStore(clock().now, 3);
  for (const k of ['a', 'b', 'c', 'd']) ticketOf(s.lookup('p', 'api', k, k)).finish(reply(1));
  t.equal(s.size, 3);
  t.equal(s.lookup('p', 'api', 'a', 'other').kind, 'new', 'a (oldest) was dropped');
  t.equal(s.lookup('p', 'api', 'c', 'c').kind, 'replay');
  t.equal(s.lookup('p', 'api', 'd', 'd').kind, 'replay');
  t.equal(s.lookup('p', 'api', 'b', 'other').kind, 'new', 'b was dropped when a came back');
});

t.test('records live 24 h', async (t) => {
  const c = clock();
  const s = new IdempotencyStore(c.now);
  const first = ticketOf(s.lookup('session:a', 'api', 'k', 'h1'));
  first.finish(reply(1));
  c.advance(IDEMPOTENCY_TTL_MS / 2);
  ticketOf(s.lookup('session:a', 'api', 'later', 'h2')).finish(reply(2));
  c.advance(IDEMPOTENCY_TTL_MS / 2 - 1);
  t.equal(s.lookup('session:a', 'api', 'k', 'h1').kind, 'replay', 'one millisecond short of 24 h: still replayed');
  c.advance(1);
  const after = s.lookup('session:a', 'api', 'k', 'h-other');
  t.equal(after.kind, 'new', 'at 24 h the record is gone: the key is free even for another request');
  t.equal(s.lookup('session:a', 'api', 'later', 'h2').kind, 'replay', 'a younger record stays');
  // The expired record's ticket cannot overwrite or remove the new one.
  first.finish(reply(99));
  first.abandon();
  t.equal(
    codeOf(() => s.lookup('session:a', 'api', 'k', 'h-other')),
    'in_progress',
  );
  c.advance(IDEMPOTENCY_TTL_MS);
  t.equal(s.lookup('session:a', 'api', 'later', 'h-x').kind, 'new', 'the younger one expires in its turn');
});

t.test('an in-flight record also expires after 24 h', async (t) => {
  const c = clock();
  const s = new IdempotencyStore(c.now);
  const stuck = ticketOf(s.lookup('p', 'api', 'k', 'h'));
  c.advance(IDEMPOTENCY_TTL_MS);
  const fresh = ticketOf(s.lookup('p', 'api', 'k', 'h'));
  stuck.finish(reply(1));
  t.equal(
    codeOf(() => s.lookup('p', 'api', 'k', 'h')),
    'in_progress',
    'the stale ticket did not finish the fresh record',
  );
  fresh.finish(reply(2));
  const r = s.lookup('p', 'api', 'k', 'h');
  t.same(r.kind === 'replay' ? r.outcome : null, reply(2));
});

t.test('purge: one scope on session end, everything on lock', async (t) => {
  const s = new IdempotencyStore(clock().now);
  ticketOf(s.lookup('session:a', 'api', 'k', 'h')).finish(reply(1));
  ticketOf(s.lookup('session:b', 'api', 'k', 'h')).finish(reply(2));
  const inFlight = ticketOf(s.lookup('session:a', 'api', 'k2', 'h'));
  ticketOf(s.lookup('process:1', 'api', 'k', 'h')).finish(reply(3));
  s.purgeScope('session:a');
  t.equal(s.size, 2);
  t.equal(s.lookup('session:a', 'api', 'k', 'other').kind, 'new', "session a's record is gone");
  inFlight.finish(reply(4));
  t.equal(
    s.lookup('session:a', 'api', 'k2', 'other').kind,
    'new',
    'a purged in-flight record does not come back when its request ends',
  );
  t.equal(s.lookup('session:b', 'api', 'k', 'h').kind, 'replay', "session b's record stays");
  s.purgeAll();
  t.equal(s.size, 0);
  t.equal(s.lookup('process:1', 'api', 'k', 'other').kind, 'new');
});
