// A request's one log line merges its intent and its outcome in one copy,
// with the journal's `pid` (the requester's) renamed `peer_pid` and the
// daemon's own pid dropped; the line's formatter then leaves it as it is.
import t from 'tap';
import { logFields, ownPidOnly } from '../../daemon/logger';

t.test('later payloads win, key order is the first occurrence, pid becomes peer_pid', async (t) => {
  const intent = { kind: 'http_intent', pid: 4242, credential: 'gh', url: 'https://a/' };
  const outcome = { kind: 'http_result', intent_seq: 7, status: 200 };
  const merged = logFields(intent, outcome);
  t.same(Object.keys(merged), ['kind', 'peer_pid', 'credential', 'url', 'intent_seq', 'status']);
  t.same(merged, {
    kind: 'http_result',
    peer_pid: 4242,
    credential: 'gh',
    url: 'https://a/',
    intent_seq: 7,
    status: 200,
  });
  t.equal(ownPidOnly(merged), merged, 'the formatter copies nothing more');
  t.same(intent, { kind: 'http_intent', pid: 4242, credential: 'gh', url: 'https://a/' }, 'the payloads are untouched');
});

t.test('the same as spreading the payloads and renaming, for every mix of pids', async (t) => {
  const own = process.pid;
  for (const a of [undefined, 1, own])
    for (const b of [undefined, 2, own]) {
      const x: Record<string, unknown> = { a: 1, ...(a === undefined ? {} : { pid: a }), m: 'x' };
      const y: Record<string, unknown> = { m: 'y', ...(b === undefined ? {} : { pid: b }), z: 3 };
      const spread = { ...x, ...y };
      const expected: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(spread)) {
        if (k !== 'pid') expected[k] = v;
        else if (v !== own) expected['peer_pid'] = v;
      }
      t.same(logFields(x, y), expected, `pids ${a} then ${b}`);
      t.same(Object.keys(logFields(x, y)), Object.keys(expected), `pids ${a} then ${b}: order`);
    }
});
