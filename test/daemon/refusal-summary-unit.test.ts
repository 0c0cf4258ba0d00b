// The counting behind refusal summaries (SPEC §9) with a clock the test
// moves: 20 in full a second per process instance, the rest counted per
// kind, code and credential and written when the second ends or at
// flushAll; each summarised refusal points at the last one written in full;
// processes whose seconds are over are forgotten.
import t from 'tap';
import { RefusalSummaries, Refuser } from '../../daemon/audit/refusal-summary';

t.test('burst, summary, pointer to the last full entry, forgetting', async (t) => {
  let now = 1_000_000_000_000;
  const written: Record<string, unknown>[] = [];
  let seq = 0;
  const s = new RefusalSummaries(
    async (p) => {
      written.push(p);
      return { seq: ++seq };
    },
    () => 20,
    () => undefined,
    () => now,
  );
  const a: Refuser = { key: 'A', pid: 1, uid: 2, exe: '/bin/a' };
  const b: Refuser = { key: 'B', pid: 3, uid: 2, exe: '/bin/b' };
  const seqs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const r = s.admit(a, 'http_refused', 'unknown_credential', 'x');
    t.equal(r.full, true);
    if (r.full) r.done(100 + i);
    seqs.push(100 + i);
  }
  const counted = [
    s.admit(a, 'http_refused', 'unknown_credential', 'x'),
    s.admit(a, 'http_refused', 'bad_request', null),
    s.admit(a, 'agent_refused', 'vault_locked', null),
  ];
  for (const r of counted) {
    t.equal(r.full, false);
    if (!r.full) t.equal(await r.auditSeq, 119, 'the last written in full');
  }
  // Another process has its own burst.
  const other = s.admit(b, 'ssh_refused', 'denied_by_user', 'y');
  t.equal(other.full, true);
  if (other.full) other.done(null);
  t.equal(written.length, 0, 'nothing written before the second ends');
  now += 1000;
  const next = s.admit(a, 'http_refused', 'unknown_credential', 'x');
  t.equal(next.full, true, 'a new second, a new burst');
  if (next.full) next.done(200);
  t.equal(written.length, 1, 'the summary of the past second');
  t.match(written[0], {
    kind: 'refusals_summarised',
    instance: 'A',
    pid: 1,
    uid: 2,
    exe: '/bin/a',
    total: 3,
    journaled_in_full: 20,
    first_at: new Date(now - 1000).toISOString(),
    last_at: new Date(now - 1000).toISOString(),
    counts: [
      { kind: 'http_refused', code: 'unknown_credential', credential: 'x', count: 1 },
      { kind: 'http_refused', code: 'bad_request', credential: null, count: 1 },
      { kind: 'agent_refused', code: 'vault_locked', credential: null, count: 1 },
    ],
  });
  t.equal(s.tracked, 1, 'B, whose second is over with nothing counted, is forgotten');
  for (let i = 0; i < 25; i++) {
    const r = s.admit(a, 'http_refused', 'unknown_credential', 'x');
    if (r.full) r.done(300 + i);
  }
  await s.flushAll();
  t.equal(written.length, 2, 'flushAll writes the open summary');
  t.match(written[1], { total: 6, counts: [{ code: 'unknown_credential', count: 6 }] });
  t.equal(s.tracked, 0);
});
