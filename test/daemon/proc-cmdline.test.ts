// /proc/<pid>/cmdline and stat read into a reused buffer
// (daemon/platform/proc.ts): every byte of a command line longer than the
// buffer (it grows, then is given back), a short one after it, a process
// that is gone, and a stat whose command name holds ") (", spaces and
// bytes above ASCII; stat lines of every length and shape, parsed.
import t from 'tap';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseStat, readCmdline, readStat } from '../../daemon/platform/proc';

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

t.test('stat lines parsed: the four fields, or null', async (t) => {
  // Fields 3..52 of a real line after "1234 (name) ": field N is fields[N - 3].
  const fields = Array.from({ length: 50 }, (_v, i) => String(i + 3));
  fields[0] = 'S';
  fields[1] = '77'; // 4: ppid
  fields[3] = '88'; // 6: session
  fields[19] = '123456'; // 22: start time
  fields[45] = '140737488347136'; // 48: arg_start
  const line = (name: string, f: string[]): string => `1234 (${name}) ${f.join(' ')}\n`;
  // The whole line with field N (counted as the kernel does) replaced.
  const withField = (n: number, v: string): string =>
    line(
      'x',
      fields.map((f, i) => (i === n - 3 ? v : f)),
    );
  const want = { ppid: 77, sid: 88, startTime: '123456', argStart: '140737488347136' };
  t.same(parseStat(line('sleep', fields)), want, 'a whole line');
  t.same(parseStat(line('a) 1 2 (b', fields)), want, 'a command name with ") (" and spaces');
  t.same(parseStat(line('x', fields.slice(0, 45))), { ...want, argStart: '0' }, 'a kernel without field 48: "0"');
  t.same(parseStat(line('x', fields.slice(0, 46))), null, 'field 48 the last, with the newline: not digits');
  t.equal(parseStat(line('x', fields.slice(0, 19))), null, 'no start time');
  t.equal(parseStat('1234 sleep S 1 2'), null, 'no ")"');
  t.equal(parseStat(withField(22, '12a')), null, 'a start time that is not digits');
  t.equal(parseStat(withField(4, '7.5')), null, 'a ppid that is not an integer');
  t.same(parseStat(withField(5, '')), want, 'an empty field unused: the others in place');
  t.equal(parseStat(withField(4, '')), null, 'an empty ppid: null (not 0)');
});
