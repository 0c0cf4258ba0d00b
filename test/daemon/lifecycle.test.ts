// The daemon's life cycle through the real CLI and real sockets: init,
// modes, start, one daemon per home, unlock, lock, status, exit codes,
// config pinning, auto-lock, signals, hardening.
import t from 'tap';
import { chmodSync, lstatSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import net from 'node:net';
import { agentRequest, cleanEnv, cli, init, makeHome, startDaemon, canConnect } from '../helpers/postern';

const mode = (p: string): string => (lstatSync(p).mode & 0o777).toString(8).padStart(4, '0');

t.test('init creates home, config and vault with their modes, once', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const r = init(h, ['--json']);
  t.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  t.match(out.audit_public_key, /^[A-Za-z0-9+/]{43}=$/, 'prints the audit public key');
  t.equal(mode(h.home), '0700');
  t.equal(mode(join(h.home, 'config.toml')), '0600');
  t.equal(mode(join(h.home, 'vault')), '0600');
  const again = init(h);
  t.equal(again.code, 1, 'a second init refuses');
  t.match(again.stderr, /vault already exists/);
  t.notMatch(again.stderr, /\n\s+at /, 'no stack trace');
});

t.test('init refuses short, empty and mismatched passphrases and bad --kdf', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const short = h.file('short', 'elevenchars\n');
  let r = cli(h, ['init', '--kdf', 'interactive', '--passphrase-file', short]);
  t.equal(r.code, 1);
  t.match(r.stderr, /too short/);
  const empty = h.file('empty', '\n');
  r = cli(h, ['init', '--kdf', 'interactive', '--passphrase-file', empty]);
  t.equal(r.code, 1);
  t.match(r.stderr, /empty/);
  r = cli(h, ['init', '--kdf', 'enormous', '--passphrase-file', h.passFile]);
  t.equal(r.code, 2, 'a bad --kdf is a usage error');
  r = cli(h, ['init', '--kdf', 'interactive']);
  t.equal(r.code, 2, 'no terminal and no passphrase file: usage error');
  t.match(r.stderr, /passphrase-file|terminal/);
});

t.test('init accepts an existing empty home and refuses a symlinked or open one', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  t.equal(init(h).code, 0, 'existing empty home accepted');

  const h2 = makeHome();
  t.teardown(() => h2.cleanup());
  const real = join(h2.dir, 'real');
  mkdirSync(real, { mode: 0o700 });
  symlinkSync(real, h2.home);
  const r = init(h2);
  t.equal(r.code, 1);
  t.match(r.stderr, /symlink/);

  const h3 = makeHome();
  t.teardown(() => h3.cleanup());
  mkdirSync(h3.home, { mode: 0o755 });
  chmodSync(h3.home, 0o755);
  const r3 = init(h3);
  t.equal(r3.code, 1);
  t.match(r3.stderr, /chmod 700/);
});

t.test('every daemon command exits 3 while the daemon is down', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  for (const args of [
    ['status'],
    ['lock'],
    ['unlock', '--passphrase-file', h.passFile],
    ['cred', 'list'],
    ['cred', 'show', 'x'],
    ['config', 'approve', '--passphrase-file', h.passFile],
  ]) {
    const r = cli(h, args);
    t.equal(r.code, 3, `${args.join(' ')} → 3`);
    t.match(r.stderr, /not reachable.*postern daemon/, 'says to start the daemon');
  }
});

t.test('daemon: sockets, one per home, unlock and lock, status, SIGTERM', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(mode(join(h.home, 'admin.sock')), '0600');
  t.equal(mode(join(h.home, 'agent.sock')), '0600');

  const second = cli(h, ['daemon']);
  t.equal(second.code, 1, 'a second daemon for the same home refuses');
  t.match(second.stderr, /already running/);
  t.ok(await canConnect(join(h.home, 'admin.sock')), 'the first daemon still serves');

  let health = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  t.same(health.json, { locked: true }, 'starts locked');
  const creds = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/credentials');
  t.equal(creds.status, 423);
  t.equal((creds.json as { error: { code: string } }).error.code, 'vault_locked');

  let r = cli(h, ['unlock', '--passphrase-file', h.file('empty', '\n')]);
  t.equal(r.code, 1, 'an empty passphrase is refused');
  t.match(r.stderr, /is empty/);
  const wrong = h.file('wrong', 'definitely not it\n');
  r = cli(h, ['unlock', '--passphrase-file', wrong]);
  t.equal(r.code, 1);
  t.match(r.stderr, /wrong passphrase/);
  r = cli(h, ['unlock', '--passphrase-file', wrong]);
  t.equal(r.code, 1);
  // The growing delay itself is measured in passphrase-guard.test.ts.
  t.match(r.stderr, /; 2 in a row, each further attempt waits longer;/, 'the second wrong passphrase is counted');

  r = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, r.stderr);
  health = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  t.same(health.json, { locked: false });

  r = cli(h, ['status', '--json']);
  t.equal(r.code, 0);
  const st = JSON.parse(r.stdout);
  t.equal(st.locked, false);
  t.equal(st.pid, d.proc.pid);
  t.match(st.config_hash, /^sha256:[0-9a-f]{64}$/);
  t.ok(Array.isArray(st.sessions) && Array.isArray(st.pending_approvals));
  t.equal(st.counters.unlock_failures, 2);

  r = cli(h, ['lock']);
  t.equal(r.code, 0);
  health = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  t.same(health.json, { locked: true });

  t.equal(await d.stop(), 0, 'SIGTERM: clean exit');
  t.notOk(await canConnect(join(h.home, 'admin.sock')), 'sockets closed');
  t.throws(() => lstatSync(join(h.home, 'agent.sock')), 'socket files removed');
});

t.test('a stale socket left by a killed daemon is replaced; a non-socket is not touched', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d1 = await startDaemon(h);
  d1.proc.kill('SIGKILL');
  await d1.exited;
  t.ok(lstatSync(join(h.home, 'admin.sock')).isSocket(), 'socket file left behind');
  const d2 = await startDaemon(h);
  t.equal(cli(h, ['status']).code, 0, 'the new daemon serves');
  await d2.stop();

  writeFileSync(join(h.home, 'agent.sock'), 'not a socket');
  const r = cli(h, ['daemon']);
  t.equal(r.code, 1);
  t.match(r.stderr, /not a socket/);
  t.equal(readFileSync(join(h.home, 'agent.sock'), 'utf8'), 'not a socket', 'left as it was');
});

t.test('config pinning: a changed config keeps the daemon locked until approved', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const cfg = join(h.home, 'config.toml');
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('# max_response_body = "8MiB"', 'max_response_body = "1MiB"'));
  let r = cli(h, ['unlock', '--passphrase-file', h.passFile, '--json']);
  t.equal(r.code, 1);
  t.match(r.stderr, /config changed since it was approved/);
  t.match(r.stderr, /http\.max_response_body/, 'names what changed');
  t.match(r.stderr, /postern config approve/, 'says what to do');
  t.equal(JSON.parse(r.stdout).error.code, 'config_not_approved');
  const health = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  t.same(health.json, { locked: true }, 'still locked');

  const wrong = h.file('wrong', 'definitely not it\n');
  r = cli(h, ['config', 'approve', '--passphrase-file', wrong]);
  t.equal(r.code, 1, 'approval needs the passphrase');
  t.match(r.stdout, /max_response_body/, 'the difference is shown before the passphrase');
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 1, 'still not approved');

  r = cli(h, ['config', 'approve', '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, r.stderr);
  r = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, r.stderr);
  r = cli(h, ['config', 'approve', '--passphrase-file', h.passFile]);
  t.equal(r.code, 0);
  t.match(r.stdout, /already approved/);
});

t.test('a config with an unknown key, a wrong type or a negative size is refused by name', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const cases: [string, RegExp][] = [
    ['[daemon]\nsurprise = 1\n', /daemon\.surprise/],
    ['[http]\nmax_concurrent = "lots"\n', /http\.max_concurrent/],
    ['[http]\nmax_request_body = "-1MiB"\n', /http\.max_request_body/],
  ];
  for (const [text, path] of cases) {
    writeFileSync(join(h.home, 'config.toml'), text);
    const r = cli(h, ['daemon']);
    t.equal(r.code, 1, text);
    t.match(r.stderr, path);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
});

t.test('auto_lock locks an idle daemon; unlock_max locks a busy one', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(join(h.home, 'config.toml'), '[daemon]\nauto_lock = "1s"\nunlock_max = "3s"\n', { mode: 0o600 });
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const sock = join(h.home, 'agent.sock');
  // Requests every 300 ms keep the idle timer from firing, until unlock_max
  // (3 s) ends the unlocked period anyway.
  const unlockedAt = Date.now();
  let lockedAfter = -1;
  while (Date.now() - unlockedAt < 6000) {
    await new Promise((r) => setTimeout(r, 300));
    const health = (await agentRequest(sock, 'GET', '/v1/health')).json as { locked: boolean };
    if (health.locked) {
      lockedAfter = Date.now() - unlockedAt;
      break;
    }
  }
  t.ok(lockedAfter >= 2500 && lockedAfter < 5000, `locked by unlock_max after ${lockedAfter} ms`);
  const st = JSON.parse(cli(h, ['status', '--json']).stdout);
  t.match(st.lock_reason, /unlock_max/);

  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  await new Promise((r) => setTimeout(r, 1600));
  t.same((await agentRequest(sock, 'GET', '/v1/health')).json, { locked: true }, 'idle: auto-locked');
  t.match(JSON.parse(cli(h, ['status', '--json']).stdout).lock_reason, /auto_lock/);
});

t.test('hardening: NODE_OPTIONS refused; SIGUSR1 opens no inspector and the daemon keeps serving', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const r = cli({ env: cleanEnv({ POSTERN_HOME: h.home, NODE_OPTIONS: '--no-warnings' }) }, ['daemon']);
  const why =
    'NODE_OPTIONS is set (it can inject code into Node through --require, --import or --inspect); unset it and start again';
  t.equal(r.code, 1);
  t.equal(r.stderr, `postern daemon refuses to run: ${why}\n`);
  const u = cli({ env: cleanEnv({ POSTERN_HOME: h.home, NODE_OPTIONS: '--no-warnings' }) }, [
    'unlock',
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(u.code, 1, 'the unlock command refuses too');
  t.equal(u.stderr, `postern unlock refuses to run: ${why}\n`);

  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  process.kill(d.proc.pid!, 'SIGUSR1');
  await new Promise((r) => setTimeout(r, 1000));
  const inspector = await new Promise<boolean>((resolve) => {
    const s = net.connect(9229, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
  t.notOk(inspector, 'nothing listens on 9229');
  t.same(
    (await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health')).json,
    { locked: false },
    'still serving, still unlocked',
  );
  t.notMatch(d.logs(), /Debugger listening/);
});
