// Hostile config values not covered elsewhere (SPEC §3: "unknown keys and bad
// values are refused naming the key path"). An integer too large for TOML to
// carry losslessly is a bad *value* of a known key: the refusal must name
// the key, not only a line and column, and must not start the daemon.
// Deep nesting and a huge file are refused in one line without a stack trace.
import t from 'tap';
import type { Test } from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, makeHome, init } from '../helpers/postern';

function withConfig(t: Test, text: string): ReturnType<typeof cli> {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  writeFileSync(join(h.home, 'config.toml'), text, { mode: 0o600 });
  return cli(h, ['daemon']);
}

const ROWS: [string, string, RegExp][] = [
  ['max_pending = 99999999999999999999', '[daemon]\nmax_pending = 99999999999999999999\n', /daemon\.max_pending/],
  ['agent_uids = [18446744073709551616]', '[daemon]\nagent_uids = [18446744073709551616]\n', /daemon\.agent_uids/],
  ['http max_concurrent = 9007199254740993', '[http]\nmax_concurrent = 9007199254740993\n', /http\.max_concurrent/],
  ['deep nesting (one line, no crash)', `[daemon]\nagent_uids = ${'['.repeat(5000)}${']'.repeat(5000)}\n`, /config/],
];

for (const [what, text, names] of ROWS) {
  t.test(`config with ${what}: refused in one line naming the key`, async (t) => {
    const r = withConfig(t, text);
    t.equal(r.code, 1, 'the daemon does not start');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
    t.match(r.stderr, names, `names the key path: ${r.stderr.trim()}`);
  });
}
