// A config approved by an older postern lacks the settings added since. Those
// are no change while they keep their defaults (so an upgrade does not lock
// anyone out), and a change as soon as they do not.
import t from 'tap';
import { canonicalConfig, defaultConfig, diffCanonical } from '../../shared/config';

const current = canonicalConfig(defaultConfig('/home/u/.postern'), null);

function without(canonical: string, paths: string[]): string {
  const doc = JSON.parse(canonical) as Record<string, Record<string, unknown>>;
  for (const p of paths) {
    const [table, key] = p.split('.') as [string, string];
    delete doc[table]![key];
    if (Object.keys(doc[table]!).length === 0) delete doc[table];
  }
  return JSON.stringify(doc);
}

t.test('settings missing from the approved record, at their defaults: no change', async (t) => {
  const old = without(current, ['mcp.max_result', 'daemon.log_format', 'audit.refusal_burst']);
  t.not(old, current, 'the old record really lacks them');
  t.same(diffCanonical(old, current), []);
});

t.test('a setting missing from the approved record and set to another value: a change', async (t) => {
  const doc = JSON.parse(current) as Record<string, Record<string, unknown>>;
  doc['mcp']!['max_result'] = 2 * 1024 * 1024;
  const changed = JSON.stringify(doc);
  t.same(
    diffCanonical(without(current, ['mcp.max_result']), changed).map((c) => c.path),
    ['mcp.max_result'],
  );
});

t.test('a path setting missing from the approved record is always a change', async (t) => {
  t.same(
    diffCanonical(without(current, ['daemon.vault']), current).map((c) => c.path),
    ['daemon.vault'],
  );
});

t.test('a key removed from the current record, or no approved record at all, still counts', async (t) => {
  t.same(
    diffCanonical(current, without(current, ['mcp.max_result'])).map((c) => c.path),
    ['mcp.max_result'],
  );
  t.ok(diffCanonical('', current).length > 10, 'no approved record: every key');
});
