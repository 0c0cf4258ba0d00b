// `postern sessions` and `sessions revoke` through the CLI, without any
// session: an empty list, a bad id (exit 1), --all, usage errors (exit 2),
// no daemon (exit 3). Ending authority never asks for the passphrase: stdin
// is closed and no --passphrase-file is given. Listing and revoking real
// sessions is covered with real approvals in auto.test.ts and
// card-tmux.test.ts.
import t from 'tap';
import { cli, init, makeHome, startDaemon } from '../helpers/postern';

t.test('sessions with a daemon', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);

  let r = cli(h, ['sessions']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'no sessions\n');
  r = cli(h, ['sessions', '--json']);
  t.equal(r.code, 0);
  t.same(JSON.parse(r.stdout), { sessions: [] });

  r = cli(h, ['sessions', 'revoke', 'deadbeefdeadbeef']);
  t.equal(r.code, 1, 'an unknown id: exit 1');
  t.match(r.stderr, /^postern: no session "deadbeefdeadbeef"; see `postern sessions`$/m);
  r = cli(h, ['sessions', 'revoke', 'nope', '--json']);
  t.equal(r.code, 1);
  t.equal(JSON.parse(r.stdout).error.code, 'not_found');

  r = cli(h, ['sessions', 'revoke', '--all']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, '0 sessions ended\n');
  r = cli(h, ['--json', 'sessions', 'revoke', '--all']);
  t.same(JSON.parse(r.stdout), { revoked: 0 });

  r = cli(h, ['sessions', 'revoke']);
  t.equal(r.code, 2, 'neither an id nor --all');
  t.match(r.stderr, /say which session to end/);
  r = cli(h, ['sessions', 'revoke', 'abc', '--all']);
  t.equal(r.code, 2, 'both an id and --all');
  t.match(r.stderr, /not both/);

  // Locked: listing and revoking still work (ending authority needs nothing).
  t.equal(cli(h, ['lock']).code, 0);
  r = cli(h, ['sessions']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'no sessions\n');
  r = cli(h, ['sessions', 'revoke', '--all']);
  t.equal(r.code, 0, r.stderr);
});

t.test('sessions without a daemon: exit 3', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  for (const args of [['sessions'], ['sessions', 'revoke', '--all'], ['sessions', 'revoke', 'abc']]) {
    const r = cli(h, args);
    t.equal(r.code, 3, args.join(' '));
    t.match(r.stderr, /not reachable/);
  }
});
