// `postern run -- CMD` (SPEC §11, §5): CMD starts with the proxy variables
// (one per-run token as user name and password, a loopback port), NO_PROXY
// cleared, NODE_USE_ENV_PROXY=1, every CA variable naming one private bundle
// (system roots plus <home>/ca.pem) that is gone when run ends, and the
// placeholders the daemon's POST /v1/runs reply names; SSH_AUTH_SOCK naming
// the ssh-agent front door (the caller's kept when the config turns it
// off). run exits with CMD's status (3 stays 3, 128 + n for a signal), 127
// for a CMD not found and 126 for one not executable, each with one line;
// a refusal of POST /v1/runs is the CLI's refusal (exit 1), an unreachable
// daemon exit 3; a missing ca.pem is one warning line. The agent socket is a
// real peer that answers POST /v1/runs and records what it gets.
import t from 'tap';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { cleanEnv, makeHome } from '../helpers/postern';
import { cliBytes } from '../helpers/cli-bytes';
import { makeTestCa } from '../helpers/https-upstream';
import { PEER_ENV, startRunsPeer } from '../helpers/runs-peer';
import { ROOT } from '../helpers/repo-root';

const STACK = /^\s+at .+:\d+:\d+\)?$|\b(TypeError|ReferenceError|RangeError|Error):/m;
const CA_VARIABLES = [
  'SSL_CERT_FILE',
  'CURL_CA_BUNDLE',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
  'GIT_SSL_CAINFO',
  'AWS_CA_BUNDLE',
  'PIP_CERT',
  'NPM_CONFIG_CAFILE',
];
const SYSTEM_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

// CMD: a Node child that prints what it was started with.
const REPORT = `
const fs = require('node:fs');
const bundle = process.env.SSL_CERT_FILE;
process.stdout.write(JSON.stringify({
  env: process.env,
  bundle: fs.readFileSync(bundle, 'utf8'),
  mode: (fs.statSync(bundle).mode & 0o777).toString(8),
  dirMode: (fs.statSync(require('node:path').dirname(bundle)).mode & 0o777).toString(8),
}));`;

interface Report {
  env: Record<string, string>;
  bundle: string;
  mode: string;
  dirMode: string;
}

t.test('postern run starts CMD with the environment of SPEC §11 and ends with its status', async (t) => {
  const peer = await startRunsPeer();
  t.teardown(() => peer.close());
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  const ca = makeTestCa(['ca.example.test']);
  t.teardown(() => ca.cleanup());
  const env = cleanEnv({
    POSTERN_HOME: h.home,
    POSTERN_AGENT_SOCKET: peer.socket,
    SSH_AUTH_SOCK: '/tmp/some-agent.sock',
    NO_PROXY: 'example.com',
    no_proxy: 'example.com',
    HTTPS_PROXY: 'http://elsewhere:3128',
    SSL_CERT_FILE: '/nowhere.pem',
  });
  const run = (args: string[], e = env) => cliBytes(e, ['run', ...args]);

  await t.test('without ca.pem: one warning, the bundle holds the system roots', async (t) => {
    const r = await run(['--', process.execPath, '-e', REPORT]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stderr, /^postern: warning: .*ca\.pem is missing.*`postern ca`.*\n$/);
    const rep = JSON.parse(r.stdout.toString()) as Report;
    t.equal(rep.bundle.trimEnd(), readFileSync(SYSTEM_BUNDLE, 'utf8').trimEnd());
  });

  copyFileSync(ca.caFile, join(h.home, 'ca.pem'));
  const caPem = readFileSync(ca.caFile, 'utf8');

  await t.test('with ssh.ssh_agent_socket = "", SSH_AUTH_SOCK is left as it was', async (t) => {
    writeFileSync(join(h.home, 'config.toml'), '[ssh]\nssh_agent_socket = ""\n', { mode: 0o600 });
    t.teardown(() => rmSync(join(h.home, 'config.toml')));
    const r = await run(['--', process.execPath, '-e', REPORT]);
    t.equal(r.code, 0, r.stderr);
    const rep = JSON.parse(r.stdout.toString()) as Report;
    t.equal(rep.env['SSH_AUTH_SOCK'], '/tmp/some-agent.sock');
  });

  await t.test('the variables CMD sees, the bundle, and the /v1/runs call', async (t) => {
    const before = peer.runsBodies.length;
    const r = await run(['--', process.execPath, '-e', REPORT]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stderr, '', 'no warning once ca.pem is there');
    t.same(peer.runsBodies.slice(before), [{}], 'no --credential: every HTTP credential');
    const rep = JSON.parse(r.stdout.toString()) as Report;
    const proxy = rep.env['HTTPS_PROXY']!;
    const m = /^http:\/\/([A-Za-z0-9_-]{43}):([A-Za-z0-9_-]{43})@127\.0\.0\.1:(\d+)$/.exec(proxy);
    t.ok(m, `HTTPS_PROXY is http://<token>:<token>@127.0.0.1:<port>: ${proxy}`);
    t.equal(m?.[1], m?.[2], 'the token is user name and password');
    for (const v of ['HTTP_PROXY', 'https_proxy', 'http_proxy']) t.equal(rep.env[v], proxy, v);
    t.equal(rep.env['NO_PROXY'], '', 'NO_PROXY cleared');
    t.equal(rep.env['no_proxy'], '', 'no_proxy cleared');
    t.equal(rep.env['NODE_USE_ENV_PROXY'], '1');
    const bundle = rep.env['SSL_CERT_FILE']!;
    for (const v of CA_VARIABLES) t.equal(rep.env[v], bundle, `${v} names the bundle`);
    t.equal(rep.env['WGETRC'], join(dirname(bundle), 'wgetrc'), "WGETRC: a wgetrc beside the bundle (wget's CA)");
    t.not(bundle, '/nowhere.pem');
    t.equal(rep.env['GH_TOKEN'], PEER_ENV.GH_TOKEN, 'placeholders from the reply');
    t.equal(rep.env['OTHER_KEY'], PEER_ENV.OTHER_KEY);
    t.equal(
      rep.env['SSH_AUTH_SOCK'],
      join(h.home, 'ssh-agent.sock'),
      "SSH_AUTH_SOCK: the daemon's ssh-agent front door",
    );
    t.equal(rep.env['POSTERN_AGENT_SOCKET'], peer.socket, 'the rest of the environment is kept');
    t.equal(rep.mode, '600', 'the bundle is 0600');
    t.equal(rep.dirMode, '700', 'in a private directory');
    t.ok(rep.bundle.startsWith(readFileSync(SYSTEM_BUNDLE, 'utf8').trimEnd()), 'the system roots');
    t.ok(rep.bundle.endsWith(caPem), "and postern's CA");
    t.notOk(existsSync(dirname(bundle)), 'the bundle is removed when run ends');
    // Two runs, two tokens.
    const again = JSON.parse((await run(['--', process.execPath, '-e', REPORT])).stdout.toString()) as Report;
    t.not(again.env['HTTPS_PROXY'], proxy, 'a token per run');
  });

  await t.test('--credential names go to POST /v1/runs', async (t) => {
    const before = peer.runsBodies.length;
    const r = await run(['--credential', 'github', '--credential', 'other', '--', 'true']);
    t.equal(r.code, 0, r.stderr);
    t.same(peer.runsBodies.slice(before), [{ credentials: ['github', 'other'] }]);
  });

  await t.test("CMD's status is run's", async (t) => {
    t.equal((await run(['--', 'sh', '-c', 'exit 0'])).code, 0);
    t.equal((await run(['--', 'sh', '-c', 'exit 3'])).code, 3);
    t.equal((await run(['--', 'sh', '-c', 'kill -TERM $$'])).code, 128 + constants.signals.SIGTERM);
    t.equal((await run(['--', 'sh', '-c', 'kill -KILL $$'])).code, 128 + constants.signals.SIGKILL);
    // Arguments reach CMD as given, without a shell.
    const args = await run(['--', 'printf', '%s|', 'a b', '$HOME', '--json']);
    t.equal(args.stdout.toString(), 'a b|$HOME|--json|');
  });

  await t.test('a signal sent to run reaches CMD', async (t) => {
    const marker = h.file('term-seen', '');
    const { spawn } = await import('node:child_process');
    const p = spawn(
      '/usr/bin/env',
      [
        '-u',
        'NODE_OPTIONS',
        process.execPath,
        join(ROOT, 'dist', 'cli', 'main.js'),
        'run',
        '--',
        'sh',
        '-c',
        `trap 'echo term > ${marker}; exit 7' TERM; echo ready; for i in $(seq 200); do sleep 0.05; done`,
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await new Promise((r) => p.stdout.once('data', r));
    p.kill('SIGTERM');
    const code = await new Promise((r) => p.on('exit', (c) => r(c)));
    t.equal(code, 7, "CMD's trap ran and its status came back");
    t.equal(readFileSync(marker, 'utf8'), 'term\n');
  });

  await t.test('a CMD that cannot start: 127 or 126, one line', async (t) => {
    const missing = await run(['--', 'no-such-command-here']);
    t.equal(missing.code, 127);
    t.match(missing.stderr, /^postern: no-such-command-here: command not found; check the name and PATH\n$/);
    const plain = h.file('not-exec', 'echo hi\n');
    const notExec = await run(['--', plain]);
    t.equal(notExec.code, 126);
    t.match(notExec.stderr, /^postern: .*not-exec: not executable \(EACCES\); check the file and its mode\n$/);
    const dir = await run(['--', h.dir]);
    t.equal(dir.code, 126, 'a directory');
    t.equal(dir.stderr.split('\n').length, 2, dir.stderr);
  });

  await t.test('a refused /v1/runs is the CLI refusal; CMD does not start', async (t) => {
    const marker = join(h.dir, 'started');
    const r = await run(['--credential', 'nope', '--', 'touch', marker]);
    t.equal(r.code, 1);
    t.equal(r.stderr, 'postern: unknown_credential: no credential "nope"; see `postern cred list`\n');
    t.notOk(existsSync(marker));
    const j = await run(['--json', '--credential', 'nope', '--', 'touch', marker]);
    t.equal(j.code, 1);
    t.match(JSON.parse(j.stdout.toString()), { error: { code: 'unknown_credential', audit_seq: 7 } });
  });

  await t.test('no daemon: exit 3; usage errors: exit 2', async (t) => {
    const gone = await run(['--', 'true'], { ...env, POSTERN_AGENT_SOCKET: join(h.dir, 'none.sock') });
    t.equal(gone.code, 3);
    t.match(
      gone.stderr,
      /^postern: the postern daemon is not reachable at .*none\.sock \(ENOENT\); start it with `postern daemon`\n$/,
    );
    const noCmd = await run([]);
    t.equal(noCmd.code, 2);
    t.match(noCmd.stderr, /^postern: missing required argument 'cmd'; see `postern run --help`\n$/);
    const help = await run(['--help']);
    t.match(help.stdout.toString(), /Examples:\n {2}\$ postern run -- /);
  });

  await t.test('no stack trace anywhere', async (t) => {
    for (const args of [['--', 'no-such'], ['--credential', 'nope', '--', 'true'], []]) {
      const r = await run(args);
      t.notMatch(r.stderr, STACK, args.join(' '));
    }
  });
});

// A home whose ca.pem is unreadable is treated as missing (a warning, run
// goes on), not as a crash.
t.test('an unreadable ca.pem is a warning', async (t) => {
  const peer = await startRunsPeer();
  t.teardown(() => peer.close());
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(join(h.home, 'ca.pem'), { recursive: true });
  writeFileSync(join(h.dir, 'x'), '');
  const r = await cliBytes(cleanEnv({ POSTERN_HOME: h.home, POSTERN_AGENT_SOCKET: peer.socket }), [
    'run',
    '--',
    'true',
  ]);
  t.equal(r.code, 0);
  t.match(r.stderr, /^postern: warning: .*ca\.pem is missing/);
});

// A reply whose env would take over one of run's own variables, or is not
// names to strings, is not postern's: CMD does not start.
t.test('a /v1/runs reply with an unusable env starts nothing', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const marker = join(h.dir, 'started');
  for (const env of [
    { HTTPS_PROXY: 'http://evil:1' },
    { 'lower-case': 'x' },
    { GH_TOKEN: 5 },
    { LD_PRELOAD: '' },
    { PATH: '/tmp' },
    { POSTERN_AGENT_SOCKET: '/x' },
    { LD_FOO: 'x' },
  ]) {
    const peer = await startRunsPeer({ env });
    const r = await cliBytes(cleanEnv({ POSTERN_HOME: h.home, POSTERN_AGENT_SOCKET: peer.socket }), [
      'run',
      '--',
      'touch',
      marker,
    ]);
    await peer.close();
    t.equal(r.code, 3, JSON.stringify(env));
    t.match(
      r.stderr,
      /^postern: the agent socket .* answered POST \/v1\/runs without a usable env entry .*postern's daemon\?\n$/,
    );
    t.notOk(existsSync(marker));
  }
});
