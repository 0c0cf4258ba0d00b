// The writer's system calls, watched with strace on a real child process
// (test/helpers/journal-writer-driver.ts): group commit (one pwrite and one
// fdatasync per batch, not per append), the durable creation of a journal,
// and the order of a rotation.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { segmentPath, sodiumReady } from '../../shared/audit-format';
import { AuditKeys, auditKeys, driverArgv, newJournal, readJournal } from '../helpers/journal-writer-driver';

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

function tmpdir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-strace-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface Call {
  name: string;
  args: string;
  result: string;
}

// Runs the driver under strace (every thread, one file each, timestamps) and
// returns the calls of all threads in time order. `-y` names each fd's file.
function traced(dir: string, ...args: string[]): { calls: Call[]; stdout: string } {
  const log = path.join(dir, 'trace');
  const stdout = execFileSync(
    '/usr/bin/strace',
    [
      '-f',
      '-ff',
      '-ttt',
      '-y',
      '-o',
      log,
      '-e',
      'trace=openat,pwrite64,write,fsync,fdatasync,ftruncate',
      ...driverArgv(...args),
    ],
    { encoding: 'utf8', env: process.env },
  );
  const lines: Array<[number, string]> = [];
  for (const name of fs.readdirSync(dir).filter((n) => n.startsWith('trace.'))) {
    for (const l of fs.readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      const m = /^(\d+\.\d+) (.*)$/.exec(l);
      if (m) lines.push([Number(m[1]), m[2] as string]);
    }
    fs.rmSync(path.join(dir, name));
  }
  lines.sort((a, b) => a[0] - b[0]);
  const calls: Call[] = [];
  for (const [, l] of lines) {
    const m = /^(\w+)\((.*)\)\s+=\s+(.*)$/.exec(l);
    if (m) calls.push({ name: m[1] as string, args: m[2] as string, result: m[3] as string });
  }
  return { calls, stdout };
}

const on =
  (file: string) =>
  (c: Call): boolean =>
    c.args.startsWith(`${/^\d+/.exec(c.args)?.[0]}<${file}>`);

t.test('64 concurrent appends: one pwrite and one fdatasync for all of them', async (t) => {
  const dir = tmpdir(t);
  const file = await newJournal(dir, keys);
  const { calls, stdout } = traced(dir, 'burst', file, String(64 * 1024 * 1024), '64');
  const stats = JSON.parse(stdout) as {
    before: { syncs: number; entries: number };
    after: { syncs: number; entries: number };
  };
  t.equal(stats.after.entries - stats.before.entries, 64, 'the driver appended 64 events');
  const syncs = calls.filter((c) => c.name === 'fdatasync' && on(file)(c));
  const writes = calls.filter((c) => c.name === 'pwrite64' && on(file)(c));
  // Open writes its key entry (one batch), the 64 appends are one batch; no
  // signing key, so close writes nothing.
  t.equal(syncs.length, 2, `fdatasync on the journal: ${syncs.length}`);
  t.equal(writes.length, 2, 'one pwrite per batch');
  t.ok(syncs.every((c) => c.result === '0'));
  const burstWrite = writes[1]!;
  t.equal(Number(burstWrite.result), Number(/, (\d+), \d+$/.exec(burstWrite.args)?.[1]), 'the whole batch in one call');
  t.equal(readJournal(file).entries.filter((e) => e.entry.type === 'event').length, 64);
  t.same(readJournal(file).problems, []);
});

t.test('createJournal: O_EXCL|O_NOFOLLOW 0600, fsync of the file, then of the directory', async (t) => {
  const dir = tmpdir(t);
  const file = path.join(dir, 'journal');
  const { calls } = traced(
    dir,
    'create',
    file,
    keys.sign.publicKey.toString('base64'),
    keys.box.publicKey.toString('base64'),
  );
  const iOpen = calls.findIndex((c) => c.name === 'openat' && c.args.includes(`"${file}"`));
  t.ok(iOpen >= 0, 'the journal is opened');
  const open = calls[iOpen]!;
  for (const flag of ['O_CREAT', 'O_EXCL', 'O_NOFOLLOW']) t.ok(open.args.includes(flag), `opened with ${flag}`);
  t.match(open.args, /, 0600$/);
  const iWrite = calls.findIndex((c, i) => i > iOpen && c.name === 'pwrite64' && on(file)(c));
  const iSync = calls.findIndex((c, i) => i > iWrite && c.name === 'fsync' && on(file)(c));
  const iDirSync = calls.findIndex((c, i) => i > iSync && c.name === 'fsync' && on(dir)(c));
  t.ok(
    iWrite > iOpen && iSync > iWrite && iDirSync > iSync,
    'write, fsync of the file, fsync of the directory, in that order',
  );
  t.equal(fs.statSync(file).mode & 0o777, 0o600);
});

t.test(
  'rotation: checkpoint durable in the old segment, the new one created exclusively, directory fsynced before it is written',
  async (t) => {
    const dir = tmpdir(t);
    const file = await newJournal(dir, keys);
    const { calls } = traced(dir, 'burst', file, '4096', '60', keys.sign.privateKey.toString('hex'));
    const seg1 = segmentPath(file, 1);
    t.ok(fs.existsSync(seg1), 'rotated');
    const iLastOld = calls.findLastIndex(
      (c, i) =>
        c.name === 'fdatasync' &&
        on(file)(c) &&
        i < calls.findIndex((d) => d.name === 'openat' && d.args.includes(`"${seg1}"`)),
    );
    const iCreate = calls.findIndex((c) => c.name === 'openat' && c.args.includes(`"${seg1}"`));
    const create = calls[iCreate]!;
    for (const flag of ['O_CREAT', 'O_EXCL', 'O_NOFOLLOW'])
      t.ok(create.args.includes(flag), `segment 1 opened with ${flag}`);
    t.match(create.args, /, 0600$/);
    const iDirSync = calls.findIndex((c, i) => i > iCreate && c.name === 'fsync' && on(dir)(c));
    const iFirstWrite = calls.findIndex((c) => c.name === 'pwrite64' && on(seg1)(c));
    t.ok(iLastOld >= 0 && iLastOld < iCreate, 'segment 0 was fdatasynced before segment 1 was created');
    t.ok(iDirSync > iCreate && iDirSync < iFirstWrite, 'the directory is fsynced before segment 1 is written');
    t.notOk(
      calls.slice(iCreate).some((c) => c.name === 'pwrite64' && on(file)(c)),
      'nothing is written to segment 0 after that',
    );
    const r = readJournal(file);
    t.same(r.problems, []);
    const seg0 = r.entries.filter((e) => e.segment === 0);
    t.equal(seg0.at(-1)!.entry.type, 'checkpoint', 'segment 0 ends with the checkpoint');
    // Opening the last segment never follows a link.
    const reopen = traced(tmpdir(t), 'burst', file, '4096', '1');
    const last = segmentPath(file, r.segments - 1);
    const openLast = reopen.calls.find(
      (c) => c.name === 'openat' && c.args.includes(`"${last}"`) && c.args.includes('O_RDWR'),
    );
    t.ok(openLast?.args.includes('O_NOFOLLOW'), `the last segment is opened O_RDWR|O_NOFOLLOW: ${openLast?.args}`);
  },
);
