// Loading the daemon config from real files: effective values, every kind of
// bad input (each refusal naming its key path), home and config location
// precedence, file checks, the canonical hash and the difference shown to the
// human who approves a changed config.
import t, { Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import {
  ConfigPath,
  defaultConfig,
  diffCanonical,
  loadConfig,
  LoadedConfig,
  parseDnsServer,
  resolveLocations,
  SETTINGS,
} from '../../shared/config';
import { describeChanges } from '../../shared/config-changes';
import { X509Certificate } from 'node:crypto';
import { isRefusal, Problem, Refusal } from '../../shared/errors';

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'pcfg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// A config passed with --config, with POSTERN_HOME set to a temp home that
// is the same for every load within one test (so hashes can be compared).
const testDirs = new WeakMap<Test, string>();
function load(t: Test, text: string): LoadedConfig {
  let dir = testDirs.get(t);
  if (dir === undefined) {
    dir = tempDir(t);
    testDirs.set(t, dir);
  }
  const file = join(dir, 'c.toml');
  writeFileSync(file, text);
  return loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'home') } });
}

function refusalOf(fn: () => unknown): Refusal {
  try {
    fn();
  } catch (e) {
    if (isRefusal(e)) return e;
    throw e;
  }
  throw new Error('expected a Refusal, got a value');
}

function problemsOf(r: Refusal): Problem[] {
  return (r.detail?.problems ?? []) as Problem[];
}

const PEM_A = `${rootCertificates[0]}\n`;
const PEM_B = `${rootCertificates[1]}\n`;

t.test('a good config gives effective values in ms, bytes and absolute paths', async (t) => {
  const dir = tempDir(t);
  const home = join(dir, 'home');
  writeFileSync(join(dir, 'ca.pem'), PEM_A + PEM_B);
  const file = join(dir, 'config.toml');
  writeFileSync(
    file,
    `
[daemon]
home = "${home}"
agent_socket = "/run/postern/agent.sock"
vault = "data/vault"
log_level = "debug"
log_format = "pretty"
auto_lock = "90m"
unlock_max = "2d"
approval_timeout = "500ms"
agent_uids = [1002, 1001, 1002]
agent_socket_mode = "0660"
agent_socket_group = "agents"
daemon_uid = 999

[http]
max_request_body = "64KiB"
max_response_body = "5MB"
max_concurrent = 8
dns_servers = ["127.0.0.1:5353", "::1", "[FE80::1]:53", "1.1.1.1"]
ca_file = "${join(dir, 'ca.pem')}"

[ssh]
max_output = "512B"
`,
  );
  const c = loadConfig({ configFlag: file, env: {} });
  t.equal(c.exists, true);
  t.equal(c.configPath, file);
  t.equal(c.home, home);
  t.same(c.config.daemon, {
    home,
    agent_socket: '/run/postern/agent.sock',
    admin_socket: join(home, 'admin.sock'),
    vault: join(home, 'data/vault'),
    audit_log: join(home, 'audit.log'),
    audit_segment_size: 64 * 1024 * 1024,
    log_level: 'debug',
    log_format: 'pretty',
    auto_lock: 90 * 60_000,
    unlock_max: 2 * 86_400_000,
    approval_timeout: 500,
    max_pending: 32,
    session_ttl: 8 * 3_600_000,
    agent_uids: [1001, 1002],
    agent_socket_mode: 0o660,
    agent_socket_group: 'agents',
    daemon_uid: 999,
    agent_request_timeout: 10_000,
  });
  t.same(c.config.http, {
    timeout: 30_000,
    max_timeout: 600_000,
    max_request_body: 65_536,
    max_response_body: 5_000_000,
    max_concurrent: 8,
    dns_servers: ['127.0.0.1:5353', '[::1]:53', '[fe80::1]:53', '1.1.1.1:53'],
    ca_file: join(dir, 'ca.pem'),
  });
  t.same(c.config.ssh, {
    timeout: 30_000,
    max_output: 512,
    connection_idle: 10_000,
    ssh_agent_socket: join(home, 'ssh-agent.sock'),
  });
  t.same(c.paths, {
    agentSocket: '/run/postern/agent.sock',
    sshAgentSocket: join(home, 'ssh-agent.sock'),
    adminSocket: join(home, 'admin.sock'),
    vault: join(home, 'data/vault'),
    auditLog: join(home, 'audit.log'),
    caPem: join(home, 'ca.pem'),
  });
  t.equal(c.caFileContents?.toString(), PEM_A + PEM_B);
  t.match(c.hash, /^sha256:[0-9a-f]{64}$/);
  const canonical = JSON.parse(c.canonical);
  t.equal(canonical.daemon.agent_socket_mode, '0660', 'mode as its octal string');
  t.equal(canonical.daemon.home, home, 'home absolute');
  t.equal(canonical.http.max_response_body, 5_000_000);
  t.match(canonical.http.ca_file_sha256, /^[0-9a-f]{64}$/);
  t.notMatch(c.canonical.replace(/"(?:[^"\\]|\\.)*"/g, '""'), /\s/, 'no whitespace outside strings');
  t.match(
    canonical.http.ca_certificates,
    [{ subject: /CN=/, sha256: /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/ }, { subject: /CN=/ }],
    'each CA certificate by subject and fingerprint',
  );
});

t.test('every kind of bad input is refused as bad_config naming its path', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'not-pem.txt'), 'hello\n');
  writeFileSync(join(dir, 'broken.pem'), '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  const cases: [string, string, string, RegExp?][] = [
    ['unknown key', '[http]\nfoo = 1', '[unknown key] http.foo'],
    ['misspelt key', '[http]\nmax_timout = "1m"', '[unknown key] http.max_timout', /did you mean "max_timeout"/],
    ['quoted key with invisible characters', '[http]\n"a\\nb\\u202e" = 1', '[unknown key] http."a\\nb\\u{202e}"'],
    ['unknown table', '[htp]\ntimeout = "1s"', '[unknown table] htp', /did you mean "http"/],
    ['top-level key', 'timeout = "30s"', '[unknown key] timeout', /belongs under \[http\] or \[ssh\]/],
    ['table that is not a table', 'http = 1', 'http', /must be a table/],
    ['array of tables', '[[ssh]]\ntimeout = "1s"', 'ssh', /must be a table/],
    ['integer as string', '[http]\nmax_concurrent = "64"', 'http.max_concurrent'],
    ['duration as number', '[daemon]\nauto_lock = 8', 'daemon.auto_lock', /duration string/],
    ['negative size', '[http]\nmax_request_body = "-1MiB"', 'http.max_request_body', /negative/],
    ['fractional duration', '[http]\ntimeout = "1.5s"', 'http.timeout', /fractions/],
    ['unknown unit', '[ssh]\ntimeout = "10 parsecs"', 'ssh.timeout'],
    ['size too large', '[ssh]\nmax_output = "2GiB"', 'ssh.max_output', /at most 1GiB/],
    ['mode 0777', '[daemon]\nagent_socket_mode = "0777"', 'daemon.agent_socket_mode', /every user/],
    ['mode 0606', '[daemon]\nagent_socket_mode = "0606"', 'daemon.agent_socket_mode', /every user/],
    ['mode rw', '[daemon]\nagent_socket_mode = "rw"', 'daemon.agent_socket_mode', /not an octal mode/],
    ['mode with exec bits', '[daemon]\nagent_socket_mode = "0770"', 'daemon.agent_socket_mode', /execute/],
    ['mode without owner write', '[daemon]\nagent_socket_mode = "0460"', 'daemon.agent_socket_mode', /read and write/],
    ['mode as a number', '[daemon]\nagent_socket_mode = 600', 'daemon.agent_socket_mode', /in quotes/],
    ['mode with setuid', '[daemon]\nagent_socket_mode = "4600"', 'daemon.agent_socket_mode'],
    ['uid as a string', '[daemon]\nagent_uids = [1000, "bob"]', 'daemon.agent_uids[1]', /uid/],
    ['uids not a list', '[daemon]\nagent_uids = 1000', 'daemon.agent_uids', /list of uids/],
    ['negative uid', '[daemon]\nagent_uids = [-5]', 'daemon.agent_uids[0]', /negative/],
    ['daemon_uid -2', '[daemon]\ndaemon_uid = -2', 'daemon.daemon_uid'],
    ['dns name', '[http]\ndns_servers = ["dns.google"]', 'http.dns_servers[0]', /not an IP address/],
    ['dns port', '[http]\ndns_servers = ["1.2.3.4:99999"]', 'http.dns_servers[0]', /port/],
    ['dns zone id', '[http]\ndns_servers = ["fe80::1%eth0"]', 'http.dns_servers[0]', /zone/],
    ['dns v4 in brackets', '[http]\ndns_servers = ["[1.2.3.4]:53"]', 'http.dns_servers[0]'],
    ['dns number', '[http]\ndns_servers = ["1.1.1.1", 53]', 'http.dns_servers[1]'],
    ['dns not a list', '[http]\ndns_servers = "1.1.1.1"', 'http.dns_servers', /list of addresses/],
    ['log level', '[daemon]\nlog_level = "verbose"', 'daemon.log_level', /"info"/],
    ['date for a string', '[daemon]\nlog_level = 1979-05-27', 'daemon.log_level'],
    ['relative home', '[daemon]\nhome = "relative/dir"', 'daemon.home', /absolute/],
    ['empty home', '[daemon]\nhome = ""', 'daemon.home'],
    ['~user path', '[daemon]\nagent_socket = "~bob/agent.sock"', 'daemon.agent_socket', /full path/],
    ['empty vault path', '[daemon]\nvault = ""', 'daemon.vault'],
    ['NUL in a path', '[daemon]\nvault = "a\\u0000b"', 'daemon.vault', /NUL/],
    ['bad group', '[daemon]\nagent_socket_group = "a b"', 'daemon.agent_socket_group'],
    ['zero concurrency', '[http]\nmax_concurrent = 0', 'http.max_concurrent', /at least 1/],
    ['fractional concurrency', '[http]\nmax_concurrent = 1.5', 'http.max_concurrent'],
    ['timeout above max_timeout', '[http]\ntimeout = "20m"', 'http.timeout', /max_timeout/],
    ['two roles one path', '[daemon]\naudit_log = "vault"', 'daemon.audit_log', /same path as daemon.vault/],
    [
      'socket path too long',
      `[daemon]\nagent_socket = "/tmp/${'a'.repeat(120)}"`,
      'daemon.agent_socket',
      /at most 107/,
    ],
    ['missing ca_file', `[http]\nca_file = "${join(dir, 'nope.pem')}"`, 'http.ca_file', /ENOENT/],
    ['ca_file without PEM', `[http]\nca_file = "${join(dir, 'not-pem.txt')}"`, 'http.ca_file', /no PEM certificate/],
    [
      'ca_file with a broken certificate',
      `[http]\nca_file = "${join(dir, 'broken.pem')}"`,
      'http.ca_file',
      /cannot be parsed/,
    ],
    ['ca_file a directory', `[http]\nca_file = "${dir}"`, 'http.ca_file', /not a regular file/],
    ['mcp result beyond a client line', '[mcp]\nmax_result = "9MiB"', 'mcp.max_result', /at most "8MiB"/],
    ['mcp result too small for its envelope', '[mcp]\nmax_result = "1KiB"', 'mcp.max_result', /at least "4KiB"/],
    ['mcp result as a number', '[mcp]\nmax_result = 1048576', 'mcp.max_result'],
    ['syntax error', '[http]\ntimeout = \n', '[syntax] line 2, column 11'],
    ['duplicate key', '[http]\ntimeout = "1s"\ntimeout = "2s"\n', '[syntax] line 3, column 1'],
    ['unsafe key', '[http]\n__proto__ = 1\n', '[syntax] line 2, column 1'],
  ];
  for (const [name, text, wantedPath, why] of cases) {
    const file = join(dir, 'config.toml');
    writeFileSync(file, text);
    const r = refusalOf(() => loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'home') } }));
    t.equal(r.code, 'bad_config', `${name}: code`);
    const problems = problemsOf(r);
    const hit = problems.find((p) => p.path === wantedPath);
    t.ok(hit, `${name}: names ${wantedPath} (got ${JSON.stringify(problems)})`);
    t.ok(r.message.startsWith(`${file}: `), `${name}: message names the file`);
    t.ok(r.message.includes(wantedPath), `${name}: message names the path`);
    t.notMatch(r.message, /\n/, `${name}: one line`);
    if (why) t.match(hit?.message, why, `${name}: says why`);
  }
});

t.test('every problem is listed at once', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'config.toml');
  writeFileSync(
    file,
    `
surprise = 1
[daemon]
auto_lock = "1.5s"
agent_socket_mode = "0777"
agent_uids = ["root"]
[http]
foo = "bar"
max_request_body = "-1MiB"
dns_servers = ["nonsense"]
ca_file = "${join(dir, 'missing.pem')}"
[extra]
x = 1
`,
  );
  const r = refusalOf(() => loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } }));
  t.equal(r.code, 'bad_config');
  const paths = problemsOf(r)
    .map((p) => p.path)
    .sort();
  t.same(paths, [
    '[unknown key] http.foo',
    '[unknown key] surprise',
    '[unknown table] extra',
    'daemon.agent_socket_mode',
    'daemon.agent_uids[0]',
    'daemon.auto_lock',
    'http.ca_file',
    'http.dns_servers[0]',
    'http.max_request_body',
  ]);
  t.match(r.message, /9 problems in the config/);
  t.match(r.message, /executor\.example\.toml/, 'says where to look');
});

t.test('config location: --config, else POSTERN_CONFIG, else <home>/config.toml', async (t) => {
  const dir = tempDir(t);
  const flag = join(dir, 'flag.toml');
  const envFile = join(dir, 'env.toml');
  const home = join(dir, 'home');
  writeFileSync(flag, '[daemon]\nlog_level = "warn"\n');
  writeFileSync(envFile, '[daemon]\nlog_level = "error"\n');
  mkdirSync(home);
  writeFileSync(join(home, 'config.toml'), '[daemon]\nlog_level = "fatal"\n');
  const env = { POSTERN_CONFIG: envFile, POSTERN_HOME: home };
  t.equal(loadConfig({ configFlag: flag, env }).config.daemon.log_level, 'warn', 'flag wins');
  t.equal(loadConfig({ env }).config.daemon.log_level, 'error', 'then POSTERN_CONFIG');
  t.equal(loadConfig({ env: { POSTERN_HOME: home } }).config.daemon.log_level, 'fatal', 'then the home');
  t.equal(
    loadConfig({ env: { POSTERN_HOME: home, POSTERN_CONFIG: '' } }).configPath,
    join(home, 'config.toml'),
    'empty variable is unset',
  );
  t.same(resolveLocations({ configFlag: flag, env }), {
    configPath: flag,
    homeFromEnvOrDefault: home,
    configExplicit: true,
  });
  t.same(resolveLocations({ env }), { configPath: envFile, homeFromEnvOrDefault: home, configExplicit: true });
  t.same(resolveLocations({ env: { POSTERN_HOME: home } }), {
    configPath: join(home, 'config.toml'),
    homeFromEnvOrDefault: home,
    configExplicit: false,
  });
  t.same(resolveLocations({ env: {} }), {
    configPath: join(homedir(), '.postern', 'config.toml'),
    homeFromEnvOrDefault: join(homedir(), '.postern'),
    configExplicit: false,
  });
});

t.test('home: the config\'s, else POSTERN_HOME, else ~/.postern; "~/" expands', async (t) => {
  const dir = tempDir(t);
  const userHome = join(dir, 'user');
  mkdirSync(join(userHome, '.postern'), { recursive: true });
  const savedHome = process.env.HOME;
  process.env.HOME = userHome; // os.homedir() reads it
  t.teardown(() => {
    process.env.HOME = savedHome;
  });
  const file = join(dir, 'c.toml');

  writeFileSync(file, `[daemon]\nhome = "${join(dir, 'from-config')}"\n`);
  t.equal(
    loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'from-env') } }).home,
    join(dir, 'from-config'),
    'config home wins',
  );

  writeFileSync(file, '[daemon]\nhome = "~/elsewhere"\n');
  t.equal(
    loadConfig({ configFlag: file, env: {} }).home,
    join(userHome, 'elsewhere'),
    "~/ is the user's home directory",
  );

  writeFileSync(file, '[daemon]\nhome = "~"\n');
  t.equal(loadConfig({ configFlag: file, env: {} }).home, userHome, '~ alone');

  writeFileSync(file, '');
  t.equal(
    loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'from-env') } }).home,
    join(dir, 'from-env'),
    'then POSTERN_HOME',
  );
  t.equal(
    loadConfig({ configFlag: file, env: { POSTERN_HOME: '~/envhome' } }).home,
    join(userHome, 'envhome'),
    'POSTERN_HOME expands ~/ too',
  );
  t.equal(loadConfig({ configFlag: file, env: {} }).home, join(userHome, '.postern'), 'then ~/.postern');

  writeFileSync(join(userHome, '.postern', 'config.toml'), '[http]\nmax_concurrent = 3\n');
  const found = loadConfig({ env: {} });
  t.equal(found.configPath, join(userHome, '.postern', 'config.toml'), 'the default config location');
  t.equal(found.config.http.max_concurrent, 3);

  writeFileSync(file, '[daemon]\nagent_socket = "~/agent.sock"\n');
  t.equal(
    loadConfig({ configFlag: file, env: { POSTERN_HOME: join(dir, 'h') } }).paths.agentSocket,
    join(userHome, 'agent.sock'),
    '~/ in other paths',
  );
});

t.test('relative paths are relative to home, absolute ones stay', async (t) => {
  const c = load(
    t,
    '[daemon]\nhome = "/srv/postern"\nagent_socket = "/run/agent.sock"\nadmin_socket = "sub/../admin.sock"\nvault = "v/vault"\n',
  );
  t.same(c.paths, {
    agentSocket: '/run/agent.sock',
    sshAgentSocket: '/srv/postern/ssh-agent.sock',
    adminSocket: '/srv/postern/admin.sock',
    vault: '/srv/postern/v/vault',
    auditLog: '/srv/postern/audit.log',
    caPem: '/srv/postern/ca.pem',
  });
});

t.test('the ssh-agent socket: relative to home, absolute, or "" for off', async (t) => {
  const rel = load(t, '[daemon]\nhome = "/srv/postern"\n[ssh]\nssh_agent_socket = "run/agent-ssh.sock"\n');
  t.equal(rel.paths.sshAgentSocket, '/srv/postern/run/agent-ssh.sock');
  const abs = load(t, '[daemon]\nhome = "/srv/postern"\n[ssh]\nssh_agent_socket = "/run/u/ssh.sock"\n');
  t.equal(abs.paths.sshAgentSocket, '/run/u/ssh.sock');
  const off = load(t, '[daemon]\nhome = "/srv/postern"\n[ssh]\nssh_agent_socket = ""\n');
  t.equal(off.paths.sshAgentSocket, null, '"" turns the front door off');
  t.equal(off.config.ssh.ssh_agent_socket, '');
});

t.test('a config inside a home that names another home is refused as ambiguous', async (t) => {
  const dir = tempDir(t);
  const home = join(dir, 'home');
  mkdirSync(home);
  const inHome = join(home, 'config.toml');
  writeFileSync(inHome, `[daemon]\nhome = "${join(dir, 'other')}"\n`);
  const r = refusalOf(() => loadConfig({ env: { POSTERN_HOME: home } }));
  t.equal(r.code, 'bad_config');
  t.same(
    problemsOf(r).map((p) => p.path),
    ['daemon.home'],
  );
  t.match(r.message, /remove daemon\.home/);
  t.match(r.message, /--config/);

  t.equal(
    loadConfig({ configFlag: inHome, env: { POSTERN_HOME: home } }).home,
    join(dir, 'other'),
    'with --config the config names its home',
  );
  t.equal(
    loadConfig({ env: { POSTERN_HOME: home, POSTERN_CONFIG: inHome } }).home,
    join(dir, 'other'),
    'and with POSTERN_CONFIG',
  );

  writeFileSync(inHome, `[daemon]\nhome = "${home}/"\n`);
  t.equal(loadConfig({ env: { POSTERN_HOME: home } }).home, home, 'the same home written differently is fine');
  symlinkSync(home, join(dir, 'alias'));
  writeFileSync(inHome, `[daemon]\nhome = "${join(dir, 'alias')}"\n`);
  t.equal(loadConfig({ env: { POSTERN_HOME: home } }).home, join(dir, 'alias'), 'so is a link to the same directory');
});

t.test('the config must be a regular file, not a symlink', async (t) => {
  const dir = tempDir(t);
  const real = join(dir, 'real.toml');
  writeFileSync(real, '');
  const link = join(dir, 'link.toml');
  symlinkSync(real, link);
  const r = refusalOf(() => loadConfig({ configFlag: link, env: {} }));
  t.equal(r.code, 'bad_config');
  t.match(r.message, /symbolic link/);
  t.ok(r.message.startsWith(`${link}: `));

  const home = join(dir, 'home');
  mkdirSync(home);
  symlinkSync(real, join(home, 'config.toml'));
  t.match(refusalOf(() => loadConfig({ env: { POSTERN_HOME: home } })).message, /symbolic link/, 'in the home too');
  t.match(
    refusalOf(() => loadConfig({ env: { POSTERN_HOME: home }, allowMissing: true })).message,
    /symbolic link/,
    'a link is not "missing"',
  );

  t.match(refusalOf(() => loadConfig({ configFlag: dir, env: {} })).message, /not a regular file/, 'a directory');
  const under = refusalOf(() => loadConfig({ configFlag: join(real, 'sub.toml'), env: {}, allowMissing: true }));
  t.match(under.message, /cannot read the config file \(ENOTDIR\)/, 'a path through a file is an error, not "missing"');

  writeFileSync(real, Buffer.from([0x5b, 0x68, 0xff, 0x5d]));
  t.match(refusalOf(() => loadConfig({ configFlag: real, env: {} })).message, /UTF-8/, 'not UTF-8');
  writeFileSync(real, Buffer.alloc(1024 * 1024 + 1, 0x23));
  t.match(refusalOf(() => loadConfig({ configFlag: real, env: {} })).message, /larger than/, 'too large');
});

t.test('a missing config: refused, or the defaults with allowMissing', async (t) => {
  const dir = tempDir(t);
  const home = join(dir, 'home');
  const r = refusalOf(() => loadConfig({ env: { POSTERN_HOME: home } }));
  t.equal(r.code, 'bad_config');
  t.match(r.message, /postern init/);
  t.match(r.message, /--config/);
  t.ok(r.message.startsWith(join(home, 'config.toml')));

  const c = loadConfig({ env: { POSTERN_HOME: home }, allowMissing: true });
  t.equal(c.exists, false);
  t.equal(c.configPath, join(home, 'config.toml'));
  t.same(c.config, defaultConfig(home));
  t.equal(c.caFileContents, null);

  mkdirSync(home);
  writeFileSync(join(home, 'config.toml'), '# nothing set\n');
  const empty = loadConfig({ env: { POSTERN_HOME: home } });
  t.equal(empty.exists, true);
  t.equal(empty.hash, c.hash, 'an empty file and no file are the same config');
});

// A different valid value for every setting; the test below fails if a
// setting is added to the table without one.
const ALTERNATIVES: Record<ConfigPath, string> = {
  'daemon.home': '"/srv/other-home"',
  'daemon.agent_socket': '"a.sock"',
  'daemon.admin_socket': '"b.sock"',
  'daemon.vault': '"vault2"',
  'daemon.audit_log': '"journal"',
  'daemon.audit_segment_size': '"1MiB"',
  'daemon.log_level': '"warn"',
  'daemon.log_format': '"json"',
  'daemon.auto_lock': '"7h"',
  'daemon.unlock_max': '"12h"',
  'daemon.approval_timeout': '"60s"',
  'daemon.max_pending': '40',
  'daemon.session_ttl': '"1h"',
  'daemon.agent_uids': '[1234]',
  'daemon.agent_socket_mode': '"0660"',
  'daemon.agent_socket_group': '"agents"',
  'daemon.daemon_uid': '0',
  'daemon.agent_request_timeout': '"3s"',
  'http.timeout': '"31s"',
  'http.max_timeout': '"11m"',
  'http.max_request_body': '"2MiB"',
  'http.max_response_body': '"1MiB"',
  'http.max_concurrent': '65',
  'http.dns_servers': '["127.0.0.1:5353"]',
  'http.ca_file': '"ca.pem"',
  'ssh.timeout': '"29s"',
  'ssh.max_output': '"9MiB"',
  'ssh.connection_idle': '"20s"',
  'ssh.ssh_agent_socket': '""',
  'proxy.other_hosts': '"refuse"',
  'proxy.leaf_validity': '"12h"',
  'audit.refusal_burst': '50',
  'mcp.max_result': '"2MiB"',
};

t.test('the hash ignores order, whitespace and comments, and explicit defaults', async (t) => {
  const a = load(t, '[http]\nmax_concurrent = 10\ntimeout = "5s"\n[daemon]\nlog_level = "warn"\n');
  const b = load(
    t,
    '# a comment\n[daemon]\n  log_level   =   "warn"   # trailing\n\n[http]\ntimeout="5s"\nmax_concurrent=10\nmax_timeout = "10m"\n[ssh]\n',
  );
  t.equal(a.canonical, b.canonical);
  t.equal(a.hash, b.hash);
  const c = load(t, '[daemon]\nagent_uids = [2, 1, 2]\n');
  const d = load(t, '[daemon]\nagent_uids = [1, 2]\n');
  t.equal(c.hash, d.hash, 'uids are a set');
  const e = load(t, '[http]\ndns_servers = ["1.1.1.1"]\n');
  const f = load(t, '[http]\ndns_servers = ["1.1.1.1:53"]\n');
  t.equal(e.hash, f.hash, 'the default DNS port is explicit');
});

t.test('any value change changes the hash, and the diff names the key', async (t) => {
  t.same(Object.keys(ALTERNATIVES).sort(), SETTINGS.map((s) => s.path).sort(), 'an alternative for every setting');
  const dir = tempDir(t);
  const home = join(dir, 'home');
  mkdirSync(home);
  writeFileSync(join(home, 'ca.pem'), PEM_A);
  const file = join(dir, 'c.toml');
  writeFileSync(file, '');
  const base = loadConfig({ configFlag: file, env: { POSTERN_HOME: home } });
  const seen = new Set([base.hash]);
  for (const s of SETTINGS) {
    writeFileSync(file, `[${s.table}]\n${s.key} = ${ALTERNATIVES[s.path]}\n`);
    const changed = loadConfig({ configFlag: file, env: { POSTERN_HOME: home } });
    t.notOk(seen.has(changed.hash), `${s.path}: a new hash`);
    seen.add(changed.hash);
    const paths = diffCanonical(base.canonical, changed.canonical).map((c) => c.path);
    t.ok(paths.includes(s.path), `${s.path}: named in the diff (${paths.join(', ')})`);
    t.match(
      describeChanges(diffCanonical(base.canonical, changed.canonical)),
      s.path === 'http.ca_file' ? /http\.ca_file/ : new RegExp(`${s.path.replace('.', '\\.')}: `),
    );
  }
});

t.test('a changed CA file changes the hash although the path did not', async (t) => {
  const dir = tempDir(t);
  const ca = join(dir, 'ca.pem');
  writeFileSync(ca, PEM_A);
  const file = join(dir, 'c.toml');
  writeFileSync(file, `[http]\nca_file = "${ca}"\n`);
  const before = loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } });
  writeFileSync(ca, PEM_A + PEM_B);
  const after = loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } });
  t.not(after.hash, before.hash);
  const changes = diffCanonical(before.canonical, after.canonical);
  t.same(
    changes.map((c) => c.path),
    ['http.ca_file_sha256', 'http.ca_certificates'],
  );
  // Each certificate by its subject and SHA-256 fingerprint, as openssl
  // x509 -fingerprint -sha256 prints it.
  const named = (pem: string): string => {
    const x = new X509Certificate(pem);
    return `${JSON.stringify(x.subject.split('\n').join(', '))} (SHA-256 ${x.fingerprint256})`;
  };
  t.match(named(PEM_B), /^"[^"]*CN=[^"]+" \(SHA-256 ([0-9A-F]{2}:){31}[0-9A-F]{2}\)$/);
  t.equal(describeChanges(changes), `http.ca_file certificates: added ${named(PEM_B)}`);
  t.equal(
    describeChanges(diffCanonical(after.canonical, before.canonical)),
    `http.ca_file certificates: removed ${named(PEM_B)}`,
  );
  writeFileSync(ca, PEM_B);
  const swapped = loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } });
  t.equal(
    describeChanges(diffCanonical(before.canonical, swapped.canonical)),
    `http.ca_file certificates: added ${named(PEM_B)}; removed ${named(PEM_A)}`,
  );
  writeFileSync(ca, `# a comment\n${PEM_A}`);
  const commented = loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } });
  t.equal(
    describeChanges(diffCanonical(before.canonical, commented.canonical)),
    'http.ca_file contents changed (the same certificates)',
  );
  writeFileSync(ca, PEM_A);
  // A record approved before certificates were listed: the same file is no
  // change (an upgrade does not lock anyone out); another file is.
  const older = JSON.parse(before.canonical) as { http: Record<string, unknown> };
  delete older.http['ca_certificates'];
  t.same(diffCanonical(JSON.stringify(older), before.canonical), [], 'the same file: no change');
  t.equal(
    describeChanges(diffCanonical(JSON.stringify(older), swapped.canonical)),
    `http.ca_file certificates: added ${named(PEM_B)}`,
    'another file: its certificates are added',
  );

  writeFileSync(file, '');
  const none = loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } });
  t.notMatch(
    none.canonical,
    /ca_certificates/,
    'no CA file: no list, so records approved before the list existed still match',
  );
  t.equal(
    describeChanges(diffCanonical(none.canonical, before.canonical)),
    `http.ca_file: "" → ${JSON.stringify(ca)}; http.ca_file certificates: added ${named(PEM_A)}`,
  );
  t.equal(
    describeChanges(diffCanonical(before.canonical, none.canonical)),
    `http.ca_file: ${JSON.stringify(ca)} → ""; http.ca_file certificates: removed ${named(PEM_A)}`,
  );

  writeFileSync(ca, PEM_A + PEM_B);
  const link = join(dir, 'link.pem');
  symlinkSync(ca, link);
  writeFileSync(file, `[http]\nca_file = "link.pem"\n`);
  t.equal(
    loadConfig({ configFlag: file, env: { POSTERN_HOME: dir } }).caFileContents?.toString(),
    PEM_A + PEM_B,
    'a linked CA bundle is followed, relative to home',
  );
});

t.test('diffCanonical and describeChanges', async (t) => {
  const base = load(t, '');
  const smaller = load(
    t,
    '[http]\nmax_response_body = "1MiB"\n[daemon]\nlog_level = "warn"\napproval_timeout = "60s"\nauto_lock = "1500ms"\n',
  );
  const changes = diffCanonical(base.canonical, smaller.canonical);
  t.same(changes, [
    { path: 'daemon.log_level', from: 'info', to: 'warn' },
    { path: 'daemon.auto_lock', from: 28_800_000, to: 1500 },
    { path: 'daemon.approval_timeout', from: 120_000, to: 60_000 },
    { path: 'http.max_response_body', from: 8_388_608, to: 1_048_576 },
  ]);
  // In the units of the file, not raw numbers.
  t.equal(
    describeChanges(changes),
    'daemon.log_level: "info" → "warn"; daemon.auto_lock: 8h → 1500ms; daemon.approval_timeout: 2m → 1m; http.max_response_body: 8MiB → 1MiB',
  );
  const counts = diffCanonical(
    base.canonical,
    load(t, '[http]\nmax_concurrent = 8\nmax_request_body = "1500B"\n').canonical,
  );
  t.equal(
    describeChanges(counts),
    'http.max_request_body: 1MiB → 1500B; http.max_concurrent: 64 → 8',
    'a count stays a number; a size no larger unit divides is said in bytes',
  );
  t.same(diffCanonical(base.canonical, base.canonical), []);
  t.equal(describeChanges([]), 'no changes');

  const older = JSON.stringify({ daemon: { retired: 1 }, http: {}, ssh: {} });
  const oneSided = diffCanonical(older, '{"daemon":{"fresh":[1]}}');
  t.same(oneSided, [
    { path: 'daemon.fresh', from: undefined, to: [1] },
    { path: 'daemon.retired', from: 1, to: undefined },
  ]);
  t.equal(describeChanges(oneSided), 'daemon.fresh: (absent) → [1]; daemon.retired: 1 → (absent)');
  t.equal(
    diffCanonical('', base.canonical).length,
    SETTINGS.length + 1,
    'no approved record: every key, and the CA hash',
  );
  t.equal(refusalOf(() => diffCanonical('{not json', base.canonical)).code, 'internal_error');
  t.equal(refusalOf(() => diffCanonical('[]', base.canonical)).code, 'internal_error');
});

t.test(
  'a CA record with hidden characters or of the wrong shape is shown escaped, never trusted as data',
  async (t) => {
    const sneaky = [{ subject: 'CN=Good CA\u202e\u001b[2J', sha256: 'AA:BB\u200b' }];
    const text = describeChanges([
      { path: 'http.ca_file_sha256', from: 'a', to: 'b' },
      { path: 'http.ca_certificates', from: undefined, to: sneaky },
    ]);
    t.equal(text, 'http.ca_file certificates: added "CN=Good CA\\u{202e}\\u001b[2J" (SHA-256 AA:BB\\u{200b})');
    // Hand-written records: not a list, or entries without subject/sha256.
    t.equal(
      describeChanges([
        { path: 'http.ca_file_sha256', from: 'a', to: 'b' },
        { path: 'http.ca_certificates', from: 'junk', to: [{ subject: 1 }, null] },
      ]),
      'http.ca_file certificates: the record changed but names no readable certificate',
    );
    const pem = { subject: 'CN=A', sha256: '01' };
    const other = { subject: 'CN=B', sha256: '02' };
    t.equal(
      describeChanges([
        { path: 'http.ca_file_sha256', from: 'a', to: 'b' },
        { path: 'http.ca_certificates', from: [pem, other], to: [other, pem] },
      ]),
      'http.ca_file certificates: the same ones, in another order',
    );
  },
);

t.test('describeChanges escapes characters that could mislead the approver', async (t) => {
  const base = load(t, '');
  const sneaky = load(t, '[daemon]\nagent_socket = "/tmp/a\u202egol.sock"\nvault = "x\u200by"\n');
  const text = describeChanges(diffCanonical(base.canonical, sneaky.canonical));
  t.notMatch(text, /[\u202e\u200b]/);
  t.match(text, /\\u\{202e\}/);
  t.match(text, /\\u\{200b\}/);
});

t.test('parseDnsServer accepts the documented forms', async (t) => {
  const good: [string, string, number, 4 | 6][] = [
    ['1.2.3.4', '1.2.3.4', 53, 4],
    ['1.2.3.4:5353', '1.2.3.4', 5353, 4],
    ['::1', '::1', 53, 6],
    ['[::1]', '::1', 53, 6],
    ['[2001:DB8::1]:853', '2001:db8::1', 853, 6],
  ];
  for (const [text, address, port, family] of good)
    t.same(parseDnsServer(text), { ok: true, value: { address, port, family } }, text);
  for (const bad of ['', 'localhost', '1.2.3.4:', '1.2.3.4:0', '1.2.3', '[::1]:x', '::1:53:', '01.2.3.4']) {
    t.equal(parseDnsServer(bad).ok, false, bad);
  }
});
