// doctor reports what to fix, and fails (exit 1) on anything unsafe.
import t from 'tap';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanEnv, cli, init, makeHome } from '../helpers/postern';

interface Finding {
  level: string;
  what: string;
  fix?: string;
}

t.test('doctor on a fresh home, then with problems', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  let r = cli(h, ['doctor', '--json']);
  const fresh = JSON.parse(r.stdout) as { result: string; findings: Finding[] };
  t.not(fresh.result, 'fail', JSON.stringify(fresh.findings.filter((f) => f.level === 'fail')));
  t.equal(r.code, 0);
  t.ok(
    fresh.findings.some((f) => f.level === 'ok' && /config approved/.test(f.what)),
    'reports the config approved',
  );
  t.ok(
    fresh.findings.some((f) => /socket/.test(f.what) && f.level === 'warn'),
    'no daemon: sockets missing is a warning',
  );

  chmodSync(join(h.home, 'config.toml'), 0o644);
  const cfg = join(h.home, 'config.toml');
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('# timeout = "30s"', 'timeout = "5s"'));
  r = cli({ env: cleanEnv({ POSTERN_HOME: h.home, NODE_OPTIONS: '--no-warnings' }) }, ['doctor', '--json']);
  t.equal(r.code, 1);
  const bad = JSON.parse(r.stdout) as { result: string; findings: Finding[] };
  t.equal(bad.result, 'fail');
  const fails = bad.findings.filter((f) => f.level === 'fail');
  t.ok(
    fails.some((f) => /config .* mode 0644/.test(f.what) && /chmod 0600/.test(f.fix ?? '')),
    'config mode, with the chmod to run',
  );
  t.ok(
    fails.some(
      (f) => f.what === 'config changed since approval: http.timeout: 30s → 5s' && /config approve/.test(f.fix ?? ''),
    ),
    'config changed, in the units of the file, with what to run',
  );
  t.ok(
    fails.some((f) => /NODE_OPTIONS/.test(f.what)),
    'NODE_OPTIONS reported',
  );
  const text = cli(h, ['doctor']);
  t.match(text.stdout, /\[fail\]/);
});
