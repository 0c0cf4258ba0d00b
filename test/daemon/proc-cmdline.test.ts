// /proc/<pid>/cmdline read into a reused buffer (daemon/platform/proc.ts):
// every byte of a command line longer than the buffer (it grows, then is
// given back), a short one after it, and a process that is gone.
import t from 'tap';
import { spawn } from 'node:child_process';
import { readCmdline } from '../../daemon/platform/proc';

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
