import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { removeStaleTemps, writeFileDurable } from '../../shared/durable-write';
import { randomBytes, sodiumReady } from '../../shared/crypto';
import { decryptVault, encodeVault, newVaultHeader } from '../../shared/vault-format';
import { blobBytes, blobFill, contentsFor, driverArgv } from '../helpers/durable-write-driver';

function tmpdir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-durable-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('writes, replaces, sets the mode, leaves no temp file', async (t) => {
  const dir = tmpdir(t);
  const target = path.join(dir, 'vault');
  writeFileDurable(target, Buffer.from('one'));
  t.equal(fs.readFileSync(target, 'utf8'), 'one');
  t.equal(fs.statSync(target).mode & 0o777, 0o600);
  const inode = fs.statSync(target).ino;
  writeFileDurable(target, Buffer.from('two'), 0o640);
  t.equal(fs.readFileSync(target, 'utf8'), 'two');
  t.equal(fs.statSync(target).mode & 0o777, 0o640, 'exact mode whatever the umask');
  t.not(fs.statSync(target).ino, inode, 'replaced by rename, not rewritten in place');
  t.same(fs.readdirSync(dir), ['vault']);
});

t.test('a symlink at the target is replaced, never followed', async (t) => {
  const dir = tmpdir(t);
  const victim = path.join(dir, 'victim');
  fs.writeFileSync(victim, 'untouched');
  fs.symlinkSync(victim, path.join(dir, 'vault'));
  writeFileDurable(path.join(dir, 'vault'), Buffer.from('new'));
  t.equal(fs.readFileSync(victim, 'utf8'), 'untouched');
  t.notOk(fs.lstatSync(path.join(dir, 'vault')).isSymbolicLink());
  t.equal(fs.readFileSync(path.join(dir, 'vault'), 'utf8'), 'new');
});

t.test('on failure the temp file is removed and the error rethrown', async (t) => {
  const dir = tmpdir(t);
  // rename() of a file onto a non-empty directory fails after the data is written.
  const target = path.join(dir, 'vault');
  fs.mkdirSync(target);
  fs.writeFileSync(path.join(target, 'inside'), 'x');
  t.throws(() => writeFileDurable(target, Buffer.alloc(1000, 1)), { code: /EISDIR|ENOTEMPTY|EEXIST/ });
  t.same(fs.readdirSync(dir), ['vault'], 'no temp file left');
  t.throws(() => writeFileDurable(path.join(dir, 'missing', 'vault'), Buffer.from('x')), { code: 'ENOENT' });
});

t.test('removeStaleTemps removes leftovers of dead writers only', async (t) => {
  const dir = tmpdir(t);
  const child = spawn('true');
  await new Promise((r) => child.once('exit', r));
  const dead = child.pid as number;
  const names = {
    dead: `.vault.tmp-${dead}-aabbcc`,
    mine: `.vault.tmp-${process.pid}-ddeeff`,
    alive: `.vault.tmp-1-001122`, // pid 1 is always running
    malformed: '.vault.tmp-junk',
    other: '.journal.tmp-123-abcdef',
  };
  for (const n of Object.values(names)) fs.writeFileSync(path.join(dir, n), 'x');
  fs.writeFileSync(path.join(dir, 'vault'), 'keep');
  const removed = removeStaleTemps(dir, 'vault');
  t.same(removed.sort(), [names.dead, names.mine, names.malformed].sort());
  t.same(fs.readdirSync(dir).sort(), [names.alive, names.other, 'vault'].sort());
});

// The order of system calls, watched with strace on a real child process:
// temp open → write(s) → fsync → close → rename → directory open → fsync.
t.test('strace: temp, write, fsync, rename, directory fsync, in that order', async (t) => {
  const dir = tmpdir(t);
  const target = path.join(dir, 'vault');
  fs.writeFileSync(target, 'old');
  const log = path.join(dir, 'trace');
  const size = 300_000;
  execFileSync('/usr/bin/strace', [
    '-f',
    '-ff',
    '-o',
    log,
    '-s',
    '4096',
    '-y',
    '-e',
    'trace=openat,write,pwrite64,fsync,fdatasync,rename,renameat,renameat2,close',
    ...driverArgv('write', target, String(size)),
  ]);
  t.equal(fs.readFileSync(target).length, size);
  t.ok(fs.readFileSync(target).every((b) => b === 0x5a));
  // One file per thread; the synchronous writes all happen on the main thread.
  const traces = fs
    .readdirSync(dir)
    .filter((n) => n.startsWith('trace.'))
    .map((n) => fs.readFileSync(path.join(dir, n), 'utf8'));
  const lines = traces.find((s) => s.includes('.vault.tmp-'))?.split('\n') ?? [];
  t.ok(lines.length > 0, 'the main thread trace mentions the temp file');

  const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const find = (re: RegExp, from: number): [number, RegExpExecArray] => {
    for (let i = from; i < lines.length; i++) {
      const m = re.exec(lines[i] as string);
      if (m) return [i, m];
    }
    throw new Error(`not found after line ${from}: ${re}`);
  };
  // strace -y decorates fds (and AT_FDCWD) with their paths: `18</dir/file>`.
  const cwd = 'AT_FDCWD(?:<[^>]*>)?';
  const ok = '\\s*=\\s*';
  const [iOpen, open] = find(
    new RegExp(`^openat\\(${cwd}, "(${esc(dir)}/\\.vault\\.tmp-\\d+-[0-9a-f]+)", ([A-Z_|]+), 0600\\)${ok}(\\d+)<`),
    0,
  );
  const temp = open[1] as string;
  const flags = (open[2] as string).split('|');
  t.ok(
    ['O_WRONLY', 'O_CREAT', 'O_EXCL', 'O_NOFOLLOW'].every((f) => flags.includes(f)),
    `temp opened O_CREAT|O_EXCL|O_WRONLY|O_NOFOLLOW (${open[2]})`,
  );
  const fdRe = esc(`${open[3]}<${temp}>`);
  // Writes to the temp fd, all before its fsync.
  const [iFsync] = find(new RegExp(`^fsync\\(${fdRe}\\)${ok}0`), iOpen);
  let written = 0;
  for (let i = iOpen + 1; i < iFsync; i++) {
    const m = new RegExp(`^(?:write|pwrite64)\\(${fdRe}, .*\\)${ok}(\\d+)$`).exec(lines[i] as string);
    if (m) written += Number(m[1]);
  }
  t.equal(written, size, 'all bytes written to the temp fd before its fsync');
  const [iClose] = find(new RegExp(`^close\\(${fdRe}\\)${ok}0`), iFsync);
  const [iRename] = find(
    new RegExp(`^rename(?:at2?)?\\((?:${cwd}, )?"${esc(temp)}", (?:${cwd}, )?"${esc(target)}"(?:, 0)?\\)${ok}0`),
    iClose,
  );
  const [iDir, dirOpen] = find(
    new RegExp(`^openat\\(${cwd}, "${esc(dir)}", (O_RDONLY[A-Z_|]*)\\)${ok}(\\d+)<`),
    iRename,
  );
  t.ok((dirOpen[1] as string).split('|').includes('O_DIRECTORY'), 'the directory is opened as a directory');
  const [iDirSync] = find(new RegExp(`^fsync\\(${dirOpen[2]}<${esc(dir)}>\\)${ok}0`), iDir);
  t.ok(iOpen < iFsync && iFsync < iClose && iClose < iRename && iRename < iDir && iDir < iDirSync, 'in order');
  t.notOk(
    lines.some((l) => new RegExp(`"${esc(target)}", O_WRONLY`).test(l)),
    'the target itself is never opened for writing',
  );
  t.notOk(
    lines.slice(0, iRename).some((l) => l.includes(`<${target}>`)),
    'nothing touches the target before the rename',
  );
});

// The quick variant of the crash test (the 200-kill one is the lead's): a
// child rewrites the vault in a loop and is killed with SIGKILL at a random
// moment, 30 times; each time the file must decrypt to one complete state.
t.test('kill -9 during rewrites: always the old or the new vault, never a mix', async (t) => {
  await sodiumReady();
  const dir = tmpdir(t);
  const vault = path.join(dir, 'vault');
  const key = randomBytes(32);
  writeFileDurable(vault, encodeVault(newVaultHeader('interactive', '{}'), key, contentsFor(1)));
  let last = 1;
  let leftovers = 0;
  for (let round = 0; round < 30; round++) {
    const [cmd, ...args] = driverArgv('loop', vault, key.toString('hex'));
    const child = spawn(cmd as string, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.once('exit', (_code, signal) => r(signal)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.once('data', () => resolve());
      child.once('exit', (code) => reject(new Error(`driver exited (${code}) before its first write`)));
    });
    await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 40)));
    child.kill('SIGKILL');
    t.equal(await exited, 'SIGKILL');

    const { header, contents } = decryptVault(fs.readFileSync(vault), key);
    const n = header.generation;
    const blob = contents.blobs[0] as Buffer;
    const complete =
      (contents.meta as { n: number }).n === n && blob.length === blobBytes(n) && blob.every((b) => b === blobFill(n));
    t.ok(complete, `round ${round}: generation ${n} is complete`);
    t.ok(n > last, `round ${round}: generation moved on (${last} → ${n})`);
    last = n;
    leftovers += removeStaleTemps(dir, 'vault').length;
    t.same(fs.readdirSync(dir), ['vault'], 'only the vault remains once stale temps are removed');
  }
  t.comment(`30 kills; final generation ${last}; ${leftovers} kill(s) landed between temp creation and rename`);
});
