// The [proxy] table (SPEC §3, §11): its defaults, its effective values, each
// bad value refused in one line naming the key, ca.pem's place in home, and
// a config approved before the table existed staying approved.
import t, { Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalConfig, defaultConfig, diffCanonical, loadConfig } from '../../shared/config';
import { describeChanges } from '../../shared/config-changes';
import { isRefusal, Problem } from '../../shared/errors';

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'ppx-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function load(dir: string, text: string): ReturnType<typeof loadConfig> {
  const file = join(dir, 'config.toml');
  writeFileSync(file, text);
  return loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'home') } });
}

t.test('defaults, effective values, and ca.pem in home', async (t) => {
  const dir = tempDir(t);
  const d = load(dir, '');
  t.same(d.config.proxy, { other_hosts: 'tunnel', leaf_validity: 24 * 3600_000 });
  t.equal(d.paths.caPem, join(dir, 'home', 'ca.pem'));
  const set = load(dir, '[proxy]\nother_hosts = "refuse"\nleaf_validity = "30d"\n');
  t.same(set.config.proxy, { other_hosts: 'refuse', leaf_validity: 30 * 86400_000 });
  t.equal(load(dir, '[proxy]\nleaf_validity = "60m"\n').config.proxy.leaf_validity, 3600_000, 'one hour is enough');
});

t.test('bad values: bad_config, one line, naming the key and saying why', async (t) => {
  const dir = tempDir(t);
  const cases: [string, string, string, RegExp][] = [
    ['other_hosts unknown', 'other_hosts = "allow"', 'proxy.other_hosts', /"tunnel".*"refuse"/],
    ['other_hosts not a string', 'other_hosts = true', 'proxy.other_hosts', /"tunnel"/],
    ['leaf_validity below an hour', 'leaf_validity = "59m"', 'proxy.leaf_validity', /at least "1h"/],
    ['leaf_validity beyond 30 days', 'leaf_validity = "31d"', 'proxy.leaf_validity', /at most 30d/],
    ['leaf_validity a bare number', 'leaf_validity = 86400', 'proxy.leaf_validity', /duration/],
    ['leaf_validity zero', 'leaf_validity = "0h"', 'proxy.leaf_validity', /more than zero/],
    ['leaf_validity a fraction', 'leaf_validity = "1.5d"', 'proxy.leaf_validity', /fractions/],
    ['unknown key', 'leaf_valdity = "24h"', '[unknown key] proxy.leaf_valdity', /did you mean "leaf_validity"/],
  ];
  for (const [name, line, wanted, why] of cases) {
    let refused: unknown = null;
    try {
      load(dir, `[proxy]\n${line}\n`);
    } catch (e) {
      refused = e;
    }
    if (!isRefusal(refused)) {
      t.fail(`${name}: refused`);
      continue;
    }
    t.equal(refused.code, 'bad_config', `${name}: code`);
    const problems = (refused.detail?.['problems'] ?? []) as Problem[];
    const hit = problems.find((p) => p.path === wanted);
    t.ok(hit, `${name}: names ${wanted} (got ${JSON.stringify(problems)})`);
    t.match(hit?.message, why, `${name}: says why`);
    t.ok(refused.message.includes(wanted), `${name}: the message names the key`);
    t.notMatch(refused.message, /\n/, `${name}: one line`);
  }
});

t.test('a config approved before [proxy] existed stays approved at the defaults', async (t) => {
  const current = canonicalConfig(defaultConfig('/home/u/.postern'), null);
  const doc = JSON.parse(current) as Record<string, unknown>;
  t.ok(doc['proxy'], 'the canonical form has the table');
  delete doc['proxy'];
  const old = JSON.stringify(doc);
  t.same(diffCanonical(old, current), [], 'no change');

  const changed = JSON.parse(current) as Record<string, Record<string, unknown>>;
  changed['proxy']!['leaf_validity'] = 3600_000;
  changed['proxy']!['other_hosts'] = 'refuse';
  const changes = diffCanonical(old, JSON.stringify(changed));
  t.same(
    changes.map((c) => c.path),
    ['proxy.other_hosts', 'proxy.leaf_validity'],
    'a value other than the default is a change',
  );
  const text = describeChanges(changes);
  t.match(text, /proxy\.leaf_validity.*1h/, 'shown in the units of the file');
});
