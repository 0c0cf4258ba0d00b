// SPEC §7: the approval card shows the requesting process chain as the
// kernel reports it (exe, pid, cwd, command line, parent), and marks an
// executable that was deleted after start, or that runs from a memfd.
import t, { Test } from 'tap';
import { copyFileSync, mkdirSync, readFileSync, realpathSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

interface CardProcess {
  key: string;
  pid: number;
  uid: number;
  exe: string;
  exe_deleted: boolean;
  exe_memfd: boolean;
  cwd: string;
  cmdline: string[];
}
interface FullCard {
  id: string;
  process: CardProcess;
  ancestors: CardProcess[];
}

// The session id of a process (/proc/<pid>/stat field 6, counted after the last ')').
function parseStat(pid: number): { sid: number } {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return { sid: Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[3]) };
}

t.test('the card shows the process chain', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'card-secret-0123456789',
  );
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const cards: FullCard[] = [];
  await s.approver((card) => {
    cards.push(card as unknown as FullCard);
    return { decision: 'deny' };
  });
  const body = { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') };
  const node = realpathSync(process.execPath);
  const ask = async (t: Test, a: Agent): Promise<FullCard> => {
    const before = cards.length;
    const r = await a.request(s.sock, body);
    t.equal(
      (r.json as { error: { code: string } }).error.code,
      'denied_by_user',
      'the request reached a human (and was denied)',
    );
    t.equal(cards.length, before + 1, 'one card');
    return cards.at(-1)!;
  };

  const parentDir = join(script.dir, 'parent cwd');
  const childDir = join(script.dir, 'child cwd');
  mkdirSync(parentDir);
  mkdirSync(childDir);
  const parent = await Agent.start(script, { cwd: parentDir });
  t.teardown(() => parent.kill());

  await t.test('exe, pid, cwd, command line of the process and its parent', async (t) => {
    const argv = [process.execPath, script.path, '--label', 'two words'];
    const child = await parent.spawn({ id: 'child', argv, cwd: childDir });
    const card = await ask(t, child);
    t.same(
      {
        pid: card.process.pid,
        uid: card.process.uid,
        exe: card.process.exe,
        cwd: card.process.cwd,
        cmdline: card.process.cmdline,
        exe_deleted: card.process.exe_deleted,
        exe_memfd: card.process.exe_memfd,
      },
      {
        pid: child.pid,
        uid: process.getuid!(),
        exe: node,
        cwd: realpathSync(childDir),
        cmdline: argv,
        exe_deleted: false,
        exe_memfd: false,
      },
    );
    t.ok(card.process.key.startsWith(`${child.pid}:`));
    const up = card.ancestors[0]!;
    t.same(
      { pid: up.pid, exe: up.exe, cwd: up.cwd, cmdline: up.cmdline },
      { pid: parent.pid, exe: node, cwd: realpathSync(parentDir), cmdline: [process.execPath, script.path] },
      'the first ancestor is the parent',
    );
    // The chain stops below the session leader: the test process is next
    // unless it leads its session itself.
    const testLeadsSession = parseStat(process.pid).sid === process.pid;
    t.equal(
      card.ancestors[1]?.pid,
      testLeadsSession ? undefined : process.pid,
      "then the parent's parent: the test process",
    );
    await child.exit();
  });

  await t.test('an executable deleted after start is marked', async (t) => {
    const copy = join(realpathSync(script.dir), 'node-copy');
    copyFileSync(process.execPath, copy);
    const child = await parent.spawn({ id: 'deleted', argv: [copy, script.path] });
    unlinkSync(copy);
    const card = await ask(t, child);
    t.equal(card.process.pid, child.pid);
    t.equal(card.process.exe, `${copy} (deleted)`);
    t.equal(card.process.exe_deleted, true);
    t.equal(card.process.exe_memfd, false);
    await child.exit();
  });

  await t.test('an executable running from a memfd is marked', async (t) => {
    // python creates the memfd (Node has no memfd_create), fills it with
    // node, and execs it in place: the same pid, now running from the memfd.
    const launch = `import os,sys\nfd=os.memfd_create('postern-test-node',0)\nwith open(sys.argv[1],'rb') as f: os.sendfile(fd,f.fileno(),0,os.fstat(f.fileno()).st_size)\nos.execv('/proc/self/fd/%d'%fd,['node',sys.argv[2]])\n`;
    const child = await parent.spawn({
      id: 'memfd',
      argv: ['/usr/bin/python3', '-c', launch, process.execPath, script.path],
    });
    const card = await ask(t, child);
    t.equal(card.process.pid, child.pid);
    t.match(card.process.exe, /^\/memfd:postern-test-node/);
    t.equal(card.process.exe_memfd, true);
    t.same(card.process.cmdline, ['node', script.path]);
    await child.exit();
  });

  await parent.exit();
});
