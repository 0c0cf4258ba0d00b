// SPEC §7: an exec is a new process instance even when it runs the same
// interpreter again (same pid, start time and executable): the session
// rooted at the old program ends, the new program must be approved, and its
// card shows the new command line and working directory.
import t from 'tap';
import { mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, auditList, Card } from '../helpers/stack';
import { ControlServer, startIdentityAgent, writeIdentityAgent } from '../helpers/identity-agent';
import { eventually } from '../helpers/postern';

type Answer = { decision: 'deny' | 'once' | 'session'; root_key?: string } | null;
interface CardProcess {
  key: string;
  pid: number;
  exe: string;
  cwd: string;
  cmdline: string[];
}

const PYTHON = '/usr/bin/python3';

function errorCode(json: unknown): string | undefined {
  return (json as { error?: { code?: string } } | null)?.error?.code;
}

t.test(
  'python exec-ing python is a new instance: a new card with the new argv and cwd, and the old session ends',
  async (t) => {
    const s = await startStack();
    t.teardown(() => s.close());
    s.addCredential(
      'api',
      `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
      'exec-secret-0123456789',
    );
    const script = writeIdentityAgent();
    t.teardown(() => script.cleanup());
    const control = await ControlServer.listen(join(s.h.dir, 'control.sock'));
    t.teardown(() => control.close());

    const cards: Card[] = [];
    let plan: (card: Card) => Answer = () => null;
    const admin = await s.approver((card) => {
      cards.push(card);
      return plan(card);
    });
    const sessions = async (): Promise<{ id: string; root: { key: string } }[]> =>
      ((await admin.request('sessions.list'))['result'] as { sessions: { id: string; root: { key: string } }[] })
        .sessions;
    const body = { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') };
    const firstDir = join(script.dir, 'first cwd');
    const secondDir = join(script.dir, 'second cwd');
    mkdirSync(firstDir);
    mkdirSync(secondDir);

    await t.test('a different command line and working directory', async (t) => {
      const started = startIdentityAgent(PYTHON, script, control, { cwd: firstDir, args: ['--as', 'first'] });
      t.teardown(() => started.proc.kill('SIGKILL'));
      const first = await control.next();
      t.equal(first.pid, started.proc.pid, 'the agent is the process the test started');

      // The first program: approved for a session rooted at itself.
      plan = (card) => ({ decision: 'session', root_key: card.process.key });
      let r = await first.request(s.sock, body);
      t.equal(r.status, 200, r.text);
      t.equal(cards.length, 1, 'one card');
      const before = cards[0]!.process as CardProcess;
      t.same(
        { pid: before.pid, cmdline: before.cmdline, cwd: before.cwd },
        { pid: first.pid, cmdline: started.argv, cwd: realpathSync(firstDir) },
        'the card shows the first program',
      );
      r = await first.request(s.sock, body);
      t.equal(r.status, 200, r.text);
      t.equal(cards.length, 1, 'the first program is covered by its session (a new connection, no new card)');
      const granted = await sessions();
      t.same(
        granted.map((x) => x.root.key),
        [before.key],
        'one session, rooted at the first program',
      );

      // Same pid, same interpreter, a different program and directory.
      const argv = [PYTHON, script.path, '--control', control.path, '--as', 'second', 'two words'];
      await first.exec(argv, secondDir);
      const second = await control.next();
      t.equal(second.pid, first.pid, 'the exec kept the pid');
      t.equal(second.cwd, realpathSync(secondDir));

      plan = () => ({ decision: 'deny' });
      r = await second.request(s.sock, body);
      t.equal(r.status, 403, r.text);
      t.equal(errorCode(r.json), 'denied_by_user', 'the new program had to be approved, and was denied');
      t.equal(cards.length, 2, 'the new program produced a card of its own');
      const after = cards[1]?.process as CardProcess | undefined;
      t.equal(after?.pid, first.pid, 'the card names the same pid');
      t.same(after?.cmdline, argv, "the card shows the new program's command line");
      t.equal(after?.cwd, realpathSync(secondDir), "the card shows the new program's working directory");
      t.equal(after?.exe, before.exe, 'the same interpreter');
      t.ok(after !== undefined && after.key !== before.key, 'a new instance');
      t.equal(
        s.up.requests.filter((q) => q.url === '/v1/x').length,
        2,
        "the upstream saw only the first program's two requests",
      );

      t.ok(
        await eventually(async () => (await sessions()).length === 0, 5000),
        'the session rooted at the first program ended',
      );
      const ends = auditList(s).filter((e) => e['kind'] === 'session_end' && e['session'] === granted[0]!.id);
      t.same(
        ends.map((e) => ({ session: e['session'], credential: e['credential'], reason: e['reason'] })),
        [{ session: granted[0]!.id, credential: 'api', reason: 'root_exited' }],
        'journaled as ended because its root is gone',
      );
      await second.exit();
    });

    await t.test(
      'the very same command line and directory: told apart by where the new argument block starts',
      async (t) => {
        // arg_start moves with the randomised stack top on every exec.
        t.not(
          readFileSync('/proc/sys/kernel/randomize_va_space', 'utf8').trim(),
          '0',
          'stack randomisation is on (the kernel default)',
        );
        const started = startIdentityAgent(PYTHON, script, control, { cwd: firstDir, args: ['--as', 'again'] });
        t.teardown(() => started.proc.kill('SIGKILL'));
        const first = await control.next();
        const n = cards.length;
        plan = (card) => ({ decision: 'session', root_key: card.process.key });
        let r = await first.request(s.sock, body);
        t.equal(r.status, 200, r.text);
        t.equal(cards.length, n + 1, 'one card');
        const before = cards[n]!.process as CardProcess;
        const granted = await sessions();
        t.same(
          granted.map((x) => x.root.key),
          [before.key],
          'one session, rooted at the first program',
        );

        await first.exec(started.argv, firstDir);
        const second = await control.next();
        t.equal(second.pid, first.pid, 'the exec kept the pid');
        plan = () => ({ decision: 'deny' });
        r = await second.request(s.sock, body);
        t.equal(errorCode(r.json), 'denied_by_user', 'the new program had to be approved, and was denied');
        t.equal(cards.length, n + 2, 'the new program produced a card of its own');
        const after = cards[n + 1]?.process as CardProcess | undefined;
        t.same(
          { pid: after?.pid, exe: after?.exe, cmdline: after?.cmdline, cwd: after?.cwd },
          { pid: before.pid, exe: before.exe, cmdline: before.cmdline, cwd: before.cwd },
          'everything the card shows is the same',
        );
        // key = pid:start_time:exe_dev:exe_ino:arg_start:argv_hash
        const [a, b] = [before.key.split(':'), (after?.key ?? '').split(':')];
        t.same(
          [b[0], b[1], b[2], b[3], b[5]],
          [a[0], a[1], a[2], a[3], a[5]],
          'same pid, start time, executable and command line',
        );
        t.not(b[4], a[4], 'only arg_start tells the programs apart');
        t.ok(
          await eventually(async () => (await sessions()).length === 0, 5000),
          'the session rooted at the first program ended',
        );
        const ends = auditList(s).filter((e) => e['kind'] === 'session_end' && e['session'] === granted[0]!.id);
        t.same(
          ends.map((e) => e['reason']),
          ['root_exited'],
        );
        await second.exit();
      },
    );
  },
);
