// executor.example.toml and the config `postern init` writes: both derived
// from the one settings table, both loading to the defaults, and the
// defaults being exactly those of SPEC §3.
import t, { Test } from 'tap';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, exampleConfigText, initialConfigText, loadConfig, SETTINGS } from '../../shared/config';
import { isRefusal } from '../../shared/errors';
import { parseToml } from '../../shared/toml';
import { ROOT } from '../helpers/repo-root';

const EXAMPLE = join(ROOT, 'executor.example.toml');

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'pex-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// SPEC §3, written out independently of the table: a wrong default in the
// table fails here even though the example is generated from the table.
const SPEC_DEFAULTS = {
  daemon: {
    agent_socket: 'agent.sock',
    admin_socket: 'admin.sock',
    vault: 'vault',
    audit_log: 'audit.log',
    log_level: 'info',
    log_format: 'auto',
    auto_lock: 8 * 3600_000,
    unlock_max: 24 * 3600_000,
    approval_timeout: 120_000,
    max_pending: 32,
    session_ttl: 8 * 3600_000,
    agent_uids: [],
    agent_socket_mode: 0o600,
    agent_socket_group: '',
    daemon_uid: -1,
  },
  http: {
    timeout: 30_000,
    max_timeout: 600_000,
    max_request_body: 1024 * 1024,
    max_response_body: 8 * 1024 * 1024,
    max_concurrent: 64,
    dns_servers: [],
    ca_file: '',
  },
  ssh: { timeout: 30_000, max_output: 8 * 1024 * 1024, ssh_agent_socket: 'ssh-agent.sock' },
  proxy: { other_hosts: 'tunnel', leaf_validity: 24 * 3600_000 },
  audit: { refusal_burst: 20 },
  mcp: { max_result: 1024 * 1024 },
};

// Settings postern adds where SPEC §3 is silent, each documented in
// docs/design-notes.md.
const BEYOND_SPEC = {
  daemon: { audit_segment_size: 64 * 1024 * 1024, agent_request_timeout: 10_000 },
  ssh: { connection_idle: 10_000 },
};

const PATH_KEYS = new Set(['agent_socket', 'admin_socket', 'vault', 'audit_log', 'ssh_agent_socket']);

t.test('the defaults are those of SPEC §3', async (t) => {
  const home = '/srv/h';
  const d = defaultConfig(home);
  t.equal(d.daemon.home, home);
  for (const table of ['daemon', 'http', 'ssh', 'proxy', 'audit', 'mcp'] as const) {
    for (const [key, value] of Object.entries(SPEC_DEFAULTS[table])) {
      const got = (d[table] as Record<string, unknown>)[key];
      t.same(got, PATH_KEYS.has(key) ? join(home, value as string) : value, `${table}.${key}`);
    }
  }
  for (const [key, value] of Object.entries(BEYOND_SPEC.daemon))
    t.same((d.daemon as Record<string, unknown>)[key], value, `daemon.${key}`);
  for (const [key, value] of Object.entries(BEYOND_SPEC.ssh))
    t.same((d.ssh as Record<string, unknown>)[key], value, `ssh.${key}`);
  const listed = [SPEC_DEFAULTS, BEYOND_SPEC]
    .flatMap((o) => Object.values(o))
    .reduce((n, o) => n + Object.keys(o).length, 0);
  t.equal(SETTINGS.length, 1 + listed, 'no setting beyond SPEC §3 and the documented additions');
  t.equal(SETTINGS.find((s) => s.path === 'daemon.home')?.default, '~/.postern');
});

t.test('executor.example.toml is the text derived from the table', async (t) => {
  t.equal(
    readFileSync(EXAMPLE, 'utf8'),
    exampleConfigText(),
    'regenerate executor.example.toml from exampleConfigText() after changing SETTINGS',
  );
});

t.test('the example names every setting, in the order of the table, each with a reason', async (t) => {
  const text = readFileSync(EXAMPLE, 'utf8');
  let at = 0;
  for (const s of SETTINGS) {
    const line = new RegExp(`^(# )?${s.key} = .*# \\S`, 'm');
    const section = text.indexOf(`[${s.table}]`);
    const next = text.slice(section + 1).search(/^\[/m);
    const body = text.slice(section, next < 0 ? undefined : section + 1 + next);
    t.match(body, line, `${s.path} in [${s.table}] with a comment`);
    const pos = text.indexOf(`${s.key} = `, Math.max(at, section));
    t.ok(pos > at, `${s.path} after the previous setting`);
    at = pos;
  }
  const parsed = parseToml(text) as Record<string, Record<string, unknown>>;
  t.same(Object.keys(parsed), ['daemon', 'http', 'ssh', 'proxy', 'audit', 'mcp']);
  t.same(
    Object.entries(parsed).flatMap(([table, keys]) => Object.keys(keys).map((k) => `${table}.${k}`)),
    SETTINGS.map((s) => s.path).filter((p) => p !== 'daemon.home'),
    'every setting but home is active',
  );
  t.match(text, /^# home = "~\/\.postern"/m, 'home is shown, commented out');
  t.match(text, /refused as\n# ambiguous/, 'and the example says why');
});

t.test('the example loads via --config to the defaults', async (t) => {
  const dir = tempDir(t);
  const home = join(dir, 'home');
  const c = loadConfig({ configFlag: EXAMPLE, env: { POSTERN_HOME: home } });
  t.equal(c.exists, true);
  t.same(c.config, defaultConfig(home));
  t.same(c.config, loadConfig({ env: { POSTERN_HOME: home }, allowMissing: true }).config);
});

t.test('a copy of the example loads inside any home', async (t) => {
  const dir = tempDir(t);
  const home = join(dir, 'home');
  mkdirSync(home);
  copyFileSync(EXAMPLE, join(home, 'config.toml'));
  const c = loadConfig({ env: { POSTERN_HOME: home } });
  t.equal(c.home, home);
  t.same(c.config, defaultConfig(home));
});

t.test('with home uncommented, a copy loads via --config and sets the home', async (t) => {
  const dir = tempDir(t);
  const text = readFileSync(EXAMPLE, 'utf8').replace(/^# home = /m, 'home = ');
  t.match(text, /^home = "~\/\.postern"/m);
  const file = join(dir, 'uncommented.toml');
  writeFileSync(file, text);
  const c = loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'elsewhere') } });
  t.equal(c.home, join(homedir(), '.postern'));
  t.same(c.config, defaultConfig(join(homedir(), '.postern')));

  // ...and the reason it is commented out: inside another home it is ambiguous.
  const home = join(dir, 'home');
  mkdirSync(home);
  writeFileSync(join(home, 'config.toml'), text);
  try {
    loadConfig({ env: { POSTERN_HOME: home } });
    t.fail('an uncommented home inside another home must be refused');
  } catch (e) {
    t.ok(isRefusal(e) && e.code === 'bad_config' && /daemon\.home/.test(e.message), String(e));
  }
});

t.test('the config `postern init` writes sets nothing and loads to the defaults', async (t) => {
  const text = initialConfigText();
  const parsed = parseToml(text) as Record<string, Record<string, unknown>>;
  t.same(parsed, { daemon: {}, http: {}, ssh: {}, proxy: {}, audit: {}, mcp: {} }, 'every setting commented out');
  t.notMatch(text, /^home\s*=/m, 'no home key set');
  for (const s of SETTINGS)
    t.match(text, new RegExp(`^# ${s.key} = .*# \\S`, 'm'), `${s.path} shown with its default and reason`);
  const dir = tempDir(t);
  const home = join(dir, 'home');
  mkdirSync(home);
  writeFileSync(join(home, 'config.toml'), text);
  const c = loadConfig({ env: { POSTERN_HOME: home } });
  t.same(c.config, defaultConfig(home));
  t.equal(
    c.hash,
    loadConfig({ env: { POSTERN_HOME: home }, allowMissing: true, configFlag: join(dir, 'absent.toml') }).hash,
  );
});
