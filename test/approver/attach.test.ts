// Who may decide: only an approver that proved the passphrase. The CLI
// approver without it (wrong, empty) fails to attach and exits 1; an admin
// connection that has not attached cannot decide or list approvals; the
// approver checks that the daemon is reachable before asking anything.
import t from 'tap';
import { join } from 'node:path';
import { cli, cliAsync, init, makeHome, startDaemon, PASSPHRASE } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';

async function approvers(h: { env: NodeJS.ProcessEnv }): Promise<number> {
  const r = cli(h, ['status', '--json']);
  return JSON.parse(r.stdout).approvers as number;
}

t.test('no daemon: exit 3 before the passphrase is read', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  // A passphrase file that does not exist: reading it first would exit 1.
  const r = cli(h, ['approver', '--auto', 'deny', '--passphrase-file', join(h.dir, 'missing')]);
  t.equal(r.code, 3, r.stderr);
  t.match(r.stderr, /daemon is not reachable at .*admin\.sock.*postern daemon/);
});

t.test('the CLI approver refuses to attach without the passphrase', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);

  let r = await cliAsync(h, [
    'approver',
    '--auto',
    'approve',
    '--passphrase-file',
    h.file('wrong', 'not the passphrase\n'),
  ]);
  t.equal(r.code, 1, 'wrong passphrase: exit 1');
  t.match(r.stderr, /^postern: wrong passphrase/m, "the daemon's message");
  t.notMatch(r.stdout, /attached/);

  r = await cliAsync(h, ['approver', '--auto', 'approve', '--passphrase-file', h.file('empty', '\n')]);
  t.equal(r.code, 1, 'empty passphrase: exit 1');
  t.match(r.stderr, /passphrase file .* is empty/);

  r = await cliAsync(h, ['approver', '--auto', 'approve', '--passphrase-file', '-'], '');
  t.equal(r.code, 1, 'empty stdin: exit 1');
  t.match(r.stderr, /is empty/);

  t.equal(await approvers(h), 0, 'no approver attached');
});

t.test('usage errors exit 2; a hardened approver refuses NODE_OPTIONS', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const cases: [string[], RegExp][] = [
    [['approver', '--auto', 'maybe'], /--auto takes approve or deny/],
    [['approver', '--root-depth', '1'], /--root-depth only applies with --auto approve/],
    [['approver', '--auto', 'deny', '--root-depth', '1'], /--root-depth only applies with --auto approve/],
    [['approver', '--auto', 'approve', '--root-depth', '-1'], /--root-depth takes a number/],
    [['approver', '--auto', 'approve', '--root-depth', '99'], /--root-depth takes a number/],
    // stdin is a pipe here, not a terminal.
    [['approver'], /reads key presses from a terminal.*--auto/],
  ];
  for (const [args, msg] of cases) {
    const r = cli(h, args);
    t.equal(r.code, 2, args.join(' '));
    t.match(r.stderr, msg);
  }
  const r = cli({ env: { ...h.env, NODE_OPTIONS: '--no-warnings' } }, ['approver', '--auto', 'deny']);
  t.equal(r.code, 1);
  t.match(r.stderr, /postern approver refuses to run: NODE_OPTIONS is set/);
});

t.test('an admin connection that has not attached cannot decide', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const admin = await TestAdmin.connect(join(h.home, 'admin.sock'));
  t.teardown(() => admin.close());
  const code = (r: Record<string, unknown>): unknown => (r['error'] as { code?: string } | undefined)?.code;

  let r = await admin.request('approval.decide', { id: 'abc', decision: 'once' });
  t.equal(code(r), 'denied_by_user', 'decide without attaching');
  t.match((r['error'] as { message: string }).message, /postern approver/);
  r = await admin.request('approvals.list');
  t.equal(code(r), 'denied_by_user', 'listing pending cards without attaching');

  r = await admin.request('approver.attach', {}, [Buffer.from('wrong passphrase!')]);
  t.equal(code(r), 'wrong_passphrase');
  r = await admin.request('approval.decide', { id: 'abc', decision: 'once' });
  t.equal(code(r), 'denied_by_user', 'a failed attach does not attach');
  r = await admin.request('approver.attach', {}, []);
  t.equal(code(r), 'bad_request', 'attach without a passphrase');

  r = await admin.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]);
  t.equal(r['ok'], true, JSON.stringify(r));
  r = await admin.request('approval.decide', { id: 'abc', decision: 'once' });
  t.same(r['result'], { id: 'abc', taken: false }, 'attached: an unknown card is simply not taken');
  r = await admin.request('approvals.list');
  t.same(r['result'], { pending: [] });
});
