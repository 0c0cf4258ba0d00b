// Liveness through held /proc files (daemon/identity/identify.ts): an
// instance checked once keeps its stat, cmdline and pagemap open, and later checks
// read through them. They must answer exactly as reading by pid does: an
// exec (same pid, even the same program) and an exit are "not running",
// and the files of such an instance are closed; the number held is bounded,
// and the descriptors never outgrow the bound.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import fs, { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { heldProcFiles, identify, readProcess, stillRunning, type ProcessInfo } from '../../daemon/identity/identify';
import { eventually } from '../helpers/postern';

const UID = process.getuid!();
const fdCount = (): number => readdirSync('/proc/self/fd').length;

async function running(c: ChildProcess): Promise<ProcessInfo> {
  let info: ProcessInfo | null = null;
  await eventually(() => (info = readProcess(c.pid!, UID)) !== null, 5000);
  return info!;
}

t.test('a checked instance: running while it runs, not once it execs or exits', async (t) => {
  // sh execs sleep after a moment: the same pid, another program.
  const c = spawn('/bin/sh', ['-c', 'sleep 0.6; exec sleep 30'], { stdio: 'ignore' });
  t.teardown(() => c.kill('SIGKILL'));
  const before = readProcess(c.pid!, UID)!;
  t.ok(before, 'read');
  const held = heldProcFiles();
  t.ok(stillRunning(before), 'running');
  t.equal(heldProcFiles(), held + 1, 'its files are held');
  t.ok(stillRunning(before), 'running, read through the held files');
  t.ok(await eventually(() => !stillRunning(before), 5000), 'after the exec: not running');
  t.equal(heldProcFiles(), held, 'and its files were closed');
  const after = readProcess(c.pid!, UID)!;
  t.not(after.key, before.key, 'the exec is another instance');
  t.ok(stillRunning(after), 'which runs');
  c.kill('SIGKILL');
  await new Promise((r) => c.once('exit', r));
  t.notOk(stillRunning(after), 'after the exit: not running');
  t.notOk(stillRunning(after), 'still not, once its files are closed');
  t.equal(heldProcFiles(), held, 'nothing held for it');
});

t.test('an exec of the same program with the same arguments is another instance too', async (t) => {
  // The script execs /bin/sh with its own command line once.
  const script = 'if [ -z "$AGAIN" ]; then sleep 0.6; export AGAIN=1; exec /bin/sh -c "$SCRIPT"; fi; sleep 30';
  const c = spawn('/bin/sh', ['-c', script], { stdio: 'ignore', env: { ...process.env, SCRIPT: script } });
  t.teardown(() => c.kill('SIGKILL'));
  const first = await running(c);
  t.ok(stillRunning(first), 'running');
  t.ok(await eventually(() => !stillRunning(first), 5000), 'after the exec: not running');
  t.same(readProcess(c.pid!, UID)?.cmdline, ['/bin/sh', '-c', script], 'the same program and arguments');
});

t.test('an exec that keeps the key (randomisation off): not running, and the key refused from then on', async (t) => {
  // The same environment too (its size moves arg_start): a file marks the
  // second program.
  const mark = join(mkdtempSync(join(tmpdir(), 'pt-held-')), 'again');
  const script = `if [ ! -e ${mark} ]; then sleep 0.6; : > ${mark}; exec /bin/sh -c "$SCRIPT"; fi; sleep 30`;
  const c = spawn('setarch', ['-R', '/bin/sh', '-c', script], {
    stdio: 'ignore',
    env: { ...process.env, SCRIPT: script },
  });
  t.teardown(() => c.kill('SIGKILL'));
  let first: ProcessInfo | null = null;
  // setarch execs the shell: wait for the shell's first program
  await eventually(() => (first = readProcess(c.pid!, UID))?.cmdline[0] === '/bin/sh', 5000);
  t.ok(first && stillRunning(first), 'running');
  t.ok(await eventually(() => !stillRunning(first!), 5000), 'after the exec: not running');
  const after = readProcess(c.pid!, UID)!;
  t.equal(after.key, first!.key, 'the key is the same: only the held address space tells them apart');
  t.notOk(stillRunning(after), 'a key whose program was replaced names neither program');
});

t.test('bounded: the oldest are closed, every answer stays right', async (t) => {
  const children = Array.from({ length: 140 }, () => spawn('/bin/sleep', ['30'], { stdio: 'ignore' }));
  t.teardown(() => children.forEach((c) => c.kill('SIGKILL')));
  const infos = [];
  for (const c of children) infos.push(await running(c));
  const fdsBefore = fdCount();
  for (const i of infos) t.ok(stillRunning(i), `pid ${i.pid} running`);
  t.ok(heldProcFiles() <= 128, `at most 128 held (${heldProcFiles()})`);
  t.ok(fdCount() - fdsBefore <= 3 * 128, `descriptors bounded (${fdCount() - fdsBefore} more)`);
  for (const i of infos) t.ok(stillRunning(i), `pid ${i.pid} still running, held or read again`);
  for (const c of children.slice(0, 70)) c.kill('SIGKILL');
  await Promise.all(
    children.slice(0, 70).map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : 0)),
  );
  infos.forEach((i, n) => t.equal(stillRunning(i), n >= 70, `pid ${i.pid}: ${n >= 70 ? 'running' : 'gone'}`));
});

// A process that connects again is read through the files held for it, not
// through new ones: the connection's identity costs no open of /proc. Once
// it execs, the next connection opens afresh and the dead instance's files
// are closed.
t.test('a process that connects again: read through its held files', async (t) => {
  const c = spawn('/bin/sh', ['-c', 'sleep 0.8; exec sleep 30'], { stdio: 'ignore' });
  t.teardown(() => c.kill('SIGKILL'));
  await running(c);
  const opened: string[] = [];
  const real = fs.openSync;
  (fs as { openSync: typeof fs.openSync }).openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    if (String(path).startsWith(`/proc/${c.pid}/`)) opened.push(String(path));
    return (real as (...a: unknown[]) => number)(path, ...rest);
  }) as typeof fs.openSync;
  t.teardown(() => void ((fs as { openSync: typeof fs.openSync }).openSync = real));
  const first = identify(c.pid!, UID);
  const held = heldProcFiles();
  const openedFirst = opened.length;
  t.ok(openedFirst >= 3, `the first connection opens its files (${opened.join(', ')})`);
  for (let i = 0; i < 5; i++)
    t.equal(identify(c.pid!, UID).process.key, first.process.key, `connection ${i + 2}: the same instance`);
  t.equal(opened.length, openedFirst, 'later connections open nothing');
  t.equal(heldProcFiles(), held, 'and hold nothing more');
  t.ok(
    await eventually(() => {
      try {
        return identify(c.pid!, UID).process.key !== first.process.key;
      } catch {
        return false;
      }
    }, 5000),
    'after the exec: another instance',
  );
  t.ok(opened.length > openedFirst, 'whose files were opened afresh');
  t.equal(heldProcFiles(), held, "the dead instance's files were closed for the new one's");
  t.notOk(stillRunning(first.process), 'the first instance is not running');
});
