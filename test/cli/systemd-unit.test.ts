// `postern systemd-unit` (SPEC §5) prints a user unit for this installation
// that `systemd-analyze --user verify` accepts without a word, as root and
// as another user; so does the example in docs/systemd. systemd-analyze is
// required: without it these tests fail rather than pass unchecked.
import t, { Test } from 'tap';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanEnv, cli, CLI, makeHome, ROOT } from '../helpers/postern';
import { FORBIDDEN_ENV } from '../../shared/hardening';
import { systemdUnit } from '../../cli/commands/systemd-unit';

const NOBODY = 65534;

// `systemd-analyze --user verify` needs a runtime directory of its user's
// own (XDG_RUNTIME_DIR), which a login session would provide; the unit file
// is named postern.service because verify takes the unit name from it.
function verify(t: Test, unitText: string, uid = process.getuid?.() ?? 0): { code: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'pt-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const runtime = join(dir, 'runtime');
  mkdirSync(runtime, { mode: 0o700 });
  const unit = join(dir, 'postern.service');
  writeFileSync(unit, unitText, { mode: 0o644 });
  chmodSync(dir, 0o755);
  if (uid !== process.getuid?.()) chownSync(runtime, uid, uid);
  const asUser = uid === process.getuid?.() ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  const argv = [
    ...asUser,
    'env',
    '-i',
    'PATH=/usr/bin:/bin',
    `HOME=${runtime}`,
    `XDG_RUNTIME_DIR=${runtime}`,
    'systemd-analyze',
    '--user',
    'verify',
    unit,
  ];
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw r.error;
  const output = `${r.stdout}${r.stderr}`;
  if (/env: .*systemd-analyze.*No such file/.test(output))
    throw new Error("systemd-analyze is missing: install Debian's systemd package");
  return { code: r.status, output };
}

function execStart(unit: string): string {
  return /^ExecStart=(.*)$/m.exec(unit)?.[1] ?? '';
}

t.test('systemd-analyze is installed', async (t) => {
  const r = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  t.equal(r.error, undefined, 'systemd-analyze runs (Debian package: systemd)');
  t.equal(r.status, 0);
});

t.test('the unit runs the node and main.js in use, passes verify as root and as another user', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const env = cleanEnv({ POSTERN_HOME: undefined });
  const r = cli({ env }, ['systemd-unit']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stderr, '');
  const unit = r.stdout;
  t.equal(
    execStart(unit),
    `${realpathSync(process.execPath)} ${realpathSync(CLI)} daemon`,
    'this node, this main.js, no --config',
  );
  t.notMatch(unit, /POSTERN_HOME|--config/, 'nothing pinned that was not asked for');
  t.match(
    unit,
    new RegExp(`^UnsetEnvironment=${FORBIDDEN_ENV.join(' ')}$`, 'm'),
    'every variable postern refuses is unset',
  );
  for (const line of [
    'UMask=0077',
    'LimitCORE=0',
    'NoNewPrivileges=yes',
    'RestrictSUIDSGID=yes',
    'LockPersonality=yes',
    'WantedBy=default.target',
  ]) {
    t.match(unit, new RegExp(`^${line}$`, 'm'), line);
  }
  t.match(
    unit,
    new RegExp(`^Documentation=file:${join(ROOT, 'docs', 'operations.md')}$`, 'm'),
    'a documentation link systemd accepts',
  );
  t.same(verify(t, unit), { code: 0, output: '' }, 'verify: no error, no warning');
  if (process.getuid?.() === 0)
    t.same(verify(t, unit, NOBODY), { code: 0, output: '' }, 'verify as a user other than root');

  const json = cli({ env }, ['systemd-unit', '--json']);
  t.equal(json.code, 0);
  t.same(JSON.parse(json.stdout), {
    unit,
    node: realpathSync(process.execPath),
    script: realpathSync(CLI),
    docs: join(ROOT, 'docs', 'operations.md'),
  });
});

t.test('verify finds what is wrong, so a clean verify means something', async (t) => {
  const good = systemdUnit({ node: realpathSync(process.execPath), script: realpathSync(CLI) });
  const missing = verify(t, good.replace(`ExecStart=${realpathSync(process.execPath)}`, 'ExecStart=/nonexistent/node'));
  t.not(missing.code, 0, 'a node that is not there fails');
  t.match(
    verify(t, good.replace('[Unit]', '[Unit]\nDocumentation=see docs/operations.md')).output,
    /Invalid URL/,
    'prose in Documentation= is reported',
  );
});

t.test('--config, POSTERN_CONFIG and POSTERN_HOME are carried into the unit, quoted where needed', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const odd = join(h.dir, 'my conf %i $HOME "q"');
  mkdirSync(odd);
  const config = join(odd, 'config.toml');
  writeFileSync(config, '[daemon]\nlog_level = "warn"\n', { mode: 0o600 });
  const home = join(h.dir, 'the home');
  const env = cleanEnv({ POSTERN_HOME: home });

  const r = cli({ env }, ['--config', config, 'systemd-unit']);
  t.equal(r.code, 0, r.stderr);
  const quoted = `"${config.replace(/%/g, '%%').replace(/\$/g, '$$$$').replace(/"/g, '\\"')}"`;
  t.equal(execStart(r.stdout), `${realpathSync(process.execPath)} ${realpathSync(CLI)} --config ${quoted} daemon`);
  t.match(r.stdout, /^Environment="POSTERN_HOME=[^"\n]*\/the home"$/m);
  t.same(verify(t, r.stdout), { code: 0, output: '' }, 'verify accepts the quoting');

  const fromEnv = cli({ env: cleanEnv({ POSTERN_HOME: undefined, POSTERN_CONFIG: config }) }, ['systemd-unit']);
  t.equal(fromEnv.code, 0, fromEnv.stderr);
  t.match(execStart(fromEnv.stdout), / --config "[^\n]*config\.toml" daemon$/, 'POSTERN_CONFIG becomes --config');
  t.notMatch(fromEnv.stdout, /POSTERN_HOME/);

  const relative = spawnSync(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, CLI, '--config', 'my conf %i $HOME "q"/config.toml', 'systemd-unit'],
    { cwd: h.dir, env, encoding: 'utf8' },
  );
  t.equal(relative.status, 0, relative.stderr);
  t.equal(execStart(relative.stdout), execStart(r.stdout), 'a relative --config is made absolute');
});

t.test('a config that is missing, bad or unprintable is refused with a clear error', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const env = cleanEnv({ POSTERN_HOME: undefined });
  const cases: [string, string, RegExp][] = [
    ['missing', join(h.dir, 'nope.toml'), /nope\.toml.*no config file here/],
    ['bad value', h.file('bad.toml', '[daemon]\nlog_format = "loud"\n'), /daemon\.log_format/],
  ];
  const ctl = join(h.dir, 'a\u001b[2Jb');
  mkdirSync(ctl);
  writeFileSync(join(ctl, 'config.toml'), '', { mode: 0o600 });
  cases.push(['control character', join(ctl, 'config.toml'), /control or invisible character/]);
  for (const [what, file, message] of cases) {
    const r = cli({ env }, ['--config', file, 'systemd-unit']);
    t.not(r.code, 0, `${what}: refused`);
    t.equal(r.stdout, '', `${what}: no unit printed`);
    t.match(r.stderr, message, what);
    t.match(r.stderr, /^postern: /, `${what}: an error line`);
    t.notMatch(r.stderr, /\n\s+at /, `${what}: no stack trace`);
    t.notMatch(r.stderr, /\u001b/, `${what}: the control character is not echoed raw`);
  }
});

t.test('docs/systemd/postern.service is the generated unit for a global npm install, and passes verify', async (t) => {
  const text = readFileSync(join(ROOT, 'docs', 'systemd', 'postern.service'), 'utf8');
  const generated = systemdUnit({ node: '/usr/bin/node', script: '/usr/lib/node_modules/postern/dist/cli/main.js' });
  t.ok(text.endsWith(generated), 'regenerate it with systemdUnit() after changing the unit');
  t.match(text, /postern systemd-unit/, 'it tells the reader to generate their own');
  t.same(verify(t, text), { code: 0, output: '' }, 'verify: no error, no warning');
});
