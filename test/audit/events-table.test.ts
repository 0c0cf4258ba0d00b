// The journal's event kinds (shared/events.ts) against docs/audit-format.md's
// table under "## Events": the same kinds on both sides, and every field a
// kind's type can write named in its row, by name or through a group the
// document defines in words (requester, HTTP request, SSH request,
// resolution and approval). A kind or a field added on one side only fails
// here. The helper that checks decrypted journals is tried on entries that
// break each of its rules, and the compiler's part is pinned by lines it
// must refuse (the type check of `make check` fails if it accepts one).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EVENT_FIELDS, EVENT_FIELD_GROUPS, EventKind, JournalEvent } from '../../shared/events';
import { eventShapeProblems } from '../helpers/event-shape';
import { ROOT } from '../helpers/postern';

interface Row {
  kind: string;
  fields: string;
}

function documentedRows(): Row[] {
  const doc = readFileSync(join(ROOT, 'docs', 'audit-format.md'), 'utf8');
  const start = doc.indexOf('| `kind` | fields after `kind` | written |');
  if (start < 0) return [];
  const rows: Row[] = [];
  for (const line of doc.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    const m = /^\| `([a-z_]+)` \| (.*?) \| [^|]*\|$/.exec(line);
    if (m) rows.push({ kind: m[1]!, fields: m[2]! });
  }
  return rows;
}

t.test('the document and the types list the same kinds', async (t) => {
  const rows = documentedRows();
  t.ok(rows.length >= 20, `the table is found (${rows.length} rows)`);
  t.same(rows.map((r) => r.kind).sort(), Object.keys(EVENT_FIELDS).sort());
});

t.test("every field a kind's type can write is named in its row", async (t) => {
  for (const row of documentedRows()) {
    const named = new Set([...row.fields.matchAll(/`([a-z_0-9]+)`/g)].map((m) => m[1]!));
    for (const [group, fields] of Object.entries(EVENT_FIELD_GROUPS))
      if (row.fields.includes(group)) for (const f of fields) named.add(f);
    const fields = EVENT_FIELDS[row.kind as EventKind] ?? [];
    const missing = fields.filter((f) => !named.has(f));
    t.same(missing, [], `${row.kind}: every field documented`);
  }
});

t.test('the journal check refuses what is not a typed event', async (t) => {
  const base = { seq: 9, time: '2026-01-01T00:00:00.000Z', type: 'event' };
  const ok = { ...base, kind: 'lock', reason: 'locked by `postern lock`' };
  t.same(eventShapeProblems([ok]), [], 'a typed event passes');
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['unknown kind', { ...base, kind: 'lock_maybe', reason: 'x' }, /unknown kind/],
    ['a field of no type', { ...base, kind: 'lock', reason: 'x', secret: 'x' }, /field secret is not one/],
    ['out of order', { ...base, kind: 'cred_rm', credential_kind: 'http', credential: 'a' }, /out of order/],
    ['an object', { ...base, kind: 'lock', reason: { type: 'Buffer', data: [1] } }, /not a JSON scalar/],
    ['a nested list', { ...base, kind: 'ssh_outcome', intent_seq: 1, offered_host_keys: [[1]] }, /not a JSON/],
  ];
  for (const [what, entry, re] of cases) t.match(eventShapeProblems([entry]).join('; '), re, what);
});

// Compile-time: a Buffer, a nested object or an unknown kind is no event.
export const refusedByTheCompiler: JournalEvent[] = [
  // @ts-expect-error a Buffer is not a journal field
  { kind: 'lock', reason: Buffer.from('x') },
  // @ts-expect-error an object is not a journal field
  { kind: 'agent_refused', code: 'bad_request', endpoint: 'GET /', pid: { n: 1 } },
  // @ts-expect-error no such kind
  { kind: 'lock_maybe', reason: 'x' },
  // @ts-expect-error a field its type does not have
  { kind: 'lock', reason: 'x', secret: 'x' },
];
