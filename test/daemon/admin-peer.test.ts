// admin.sock trusts uids, both ways: the daemon serves only its own uid, and
// the CLI sends nothing to a socket whose peer is not daemon_uid.
import t from 'tap';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { cli, eventually, init, makeHome, startDaemon } from '../helpers/postern';

t.test('the CLI refuses an admin.sock served by a uid other than daemon_uid', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(join(h.home, 'config.toml'), '[daemon]\ndaemon_uid = 65534\n', { mode: 0o600 });
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  for (const args of [['unlock', '--passphrase-file', h.passFile], ['status'], ['lock']]) {
    const r = cli(h, args);
    t.equal(r.code, 1, args[0]!);
    t.match(r.stderr, /served by uid 0, not the daemon's uid 65534/);
  }
  // The daemon logs every unlock attempt: "kind":"unlock" once it opened
  // (or refused for another reason), "kind":"passphrase_refused" for a
  // wrong passphrase.
  const attempt = /"kind":"(unlock|passphrase_refused)"/;
  t.notMatch(d.logs(), attempt, 'no unlock attempt reached the daemon');

  // The same daemon, reached by a CLI whose config expects uid 0: the
  // pattern does see real attempts, wrong and right.
  const trusting = h.file('trusting.toml', '[daemon]\ndaemon_uid = -1\n');
  const wrong = cli(h, ['--config', trusting, 'unlock', '--passphrase-file', h.file('wrong', 'definitely not it\n')]);
  t.equal(wrong.code, 1, wrong.stderr);
  t.ok(await eventually(() => /"kind":"passphrase_refused"/.test(d.logs())), 'a wrong passphrase is logged');
  const right = cli(h, ['--config', trusting, 'unlock', '--passphrase-file', h.passFile]);
  t.equal(right.code, 0, right.stderr);
  t.ok(await eventually(() => /"kind":"unlock","outcome":"ok"/.test(d.logs())), 'an unlock is logged');
  t.match(d.logs(), attempt);
});

t.test('the daemon refuses admin connections from another uid', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  // Open the path to uid 65534 for this test only (the daemon checked the
  // home's mode at start); the peer check is what must refuse.
  chmodSync(h.dir, 0o711);
  chmodSync(h.home, 0o711);
  chmodSync(join(h.home, 'admin.sock'), 0o666);
  const client = `
    const net = require('node:net');
    const s = net.connect(${JSON.stringify(join(h.home, 'admin.sock'))});
    const json = Buffer.from(JSON.stringify({ id: 1, op: 'status', args: {} }));
    const f = Buffer.alloc(8 + json.length);
    f.writeUInt32LE(4 + json.length, 0); f.writeUInt32LE(json.length, 4); json.copy(f, 8);
    let got = Buffer.alloc(0);
    s.on('connect', () => s.write(f));
    s.on('data', (d) => { got = Buffer.concat([got, d]); });
    s.on('close', () => { process.stdout.write(got.subarray(8).toString()); });
    s.on('error', (e) => { process.stdout.write('ERR ' + e.code); });
  `;
  const r = spawnSync(
    'setpriv',
    [
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      '/usr/bin/env',
      '-u',
      'NODE_OPTIONS',
      process.execPath,
      '-e',
      client,
    ],
    { encoding: 'utf8', timeout: 20_000 },
  );
  const reply = JSON.parse(r.stdout);
  t.equal(reply.ok, false);
  t.equal(reply.error.code, 'denied_peer');
  t.match(reply.error.message, /serves only uid 0/);
  t.ok(await eventually(() => /admin_peer_refused/.test(d.logs())), 'the refusal is logged');
});
