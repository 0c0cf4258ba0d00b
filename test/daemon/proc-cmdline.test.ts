// /proc/<pid>/cmdline and stat read into a reused buffer
// (daemon/platform/proc.ts): every byte of a command line longer than the
// buffer (it grows, then is given back), a short one after it, a process
// that is gone, and a stat whose command name holds ") (", spaces and
// bytes above ASCII.
import t from 'tap';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCmdline, readStat } from '../../daemon/platform/proc';

async function withChild(args: string[], f: (pid: number) => void): Promise<void> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)', ...args], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 200));
    f(child.pid as number);
  } finally {
    child.kill('SIGKILL');
  }
}

const expected = (args: string[]): Buffer =>
  Buffer.from([process.execPath, '-e', 'setTimeout(() => {}, 30000)', ...args].map((a) => `${a}\0`).join(''));

t.test('long, then short, then gone', async (t) => {
  const long = ['x'.repeat(100_000), 'y'.repeat(5000)];
  await withChild(long, (pid) => t.ok(readCmdline(pid)?.equals(expected(long)), 'a 105 kB command line, whole'));
  await withChild(['short'], (pid) => {
    const a = readCmdline(pid);
    const b = readCmdline(pid);
    t.ok(a?.equals(expected(['short'])), 'a short one after it');
    b?.fill(0);
    t.ok(a?.equals(expected(['short'])), 'changing one read leaves the other');
  });
  const gone = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((r) => gone.on('exit', r));
  t.equal(readCmdline(gone.pid as number), null, 'a process that is gone: null');
});

t.test('stat: fields counted after the last ")" whatever the command name holds', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'postern-stat-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const exe = join(dir, 'a) 1 2 (\u00e9');
  copyFileSync('/bin/sleep', exe);
  chmodSync(exe, 0o755);
  const child = spawn(exe, ['30'], { stdio: 'ignore' });
  t.teardown(() => child.kill('SIGKILL'));
  await new Promise((r) => setTimeout(r, 200));
  const st = readStat(child.pid as number);
  t.equal(st?.ppid, process.pid, 'the parent is this process');
  t.match(st?.startTime, /^\d+$/);
  const again = readStat(child.pid as number);
  t.equal(again?.startTime, st?.startTime, 'read twice, the same');
  t.equal(readStat(2 ** 22 + 1), null, 'no such process: null');
});
