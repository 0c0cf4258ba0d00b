// The journal file's identity (the path still names the open segment) is
// checked once per write batch, just before the batch is written: a burst
// of appends costs one check, and a file replaced after an append was
// accepted but before its batch is written still refuses that append.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Journal } from '../../daemon/audit/journal';
import { sodiumReady } from '../../shared/audit-format';
import {
  AuditKeys,
  auditKeys,
  driverArgv,
  newJournal,
  readJournal,
  scratchDir,
} from '../helpers/journal-writer-driver';

const BIG = 64 * 1024 * 1024;
const tmpdir = (t: Test): string => scratchDir(t, 'postern-identity-');

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

// The stat-family calls that name `file` by path without following a link
// (lstat), made by the driver child under strace.
function lstatsOf(dir: string, file: string, ...args: string[]): number {
  const log = path.join(dir, 'trace');
  execFileSync('/usr/bin/strace', ['-f', '-o', log, '-e', 'trace=lstat,newfstatat,statx', ...driverArgv(...args)], {
    encoding: 'utf8',
    env: process.env,
  });
  const text = fs.readFileSync(log, 'utf8');
  fs.rmSync(log);
  return text.split('\n').filter((l) => l.includes(`"${file}"`) && /lstat\(|AT_SYMLINK_NOFOLLOW/.test(l)).length;
}

t.test('a burst of appends checks the file once per batch, not once per append', async (t) => {
  const dir = tmpdir(t);
  const file = await newJournal(dir, keys);
  const small = lstatsOf(dir, file, 'burst', file, String(BIG), '1');
  const burst = lstatsOf(dir, file, 'burst', file, String(BIG), '256');
  t.ok(small > 0, `the check runs (${small} with one append)`);
  t.ok(burst - small < 8, `256 concurrent appends add ${burst - small} checks`);
  t.same(readJournal(file).problems, []);
});

t.test('a file replaced before the batch is written refuses the batch; nothing reaches either file', async (t) => {
  const dir = tmpdir(t);
  const file = await newJournal(dir, keys);
  const j = await Journal.open({ path: file, segmentSize: BIG });
  t.teardown(() => j.close().catch(() => undefined));
  await j.append({ kind: 'before' });
  const size = fs.statSync(file).size;

  // Accepted in this turn; the batch is encoded and written after it.
  const first = j.append({ kind: 'after', n: 1 });
  const soon = j.appendSoon({ kind: 'after', n: 2 });
  const moved = path.join(dir, 'moved');
  fs.renameSync(file, moved);
  fs.writeFileSync(file, '');
  const settled = await Promise.allSettled([first, soon.assigned, soon.durable]);
  for (const [i, r] of settled.entries()) {
    t.equal(r.status, 'rejected', `promise ${i} refused`);
    const e = (r as PromiseRejectedResult).reason as { code?: string; message?: string };
    t.equal(e.code, 'audit_unavailable');
    t.match(e.message, /replaced by another file/);
  }
  t.equal(fs.statSync(moved).size, size, 'nothing written to the open file');
  t.equal(fs.statSync(file).size, 0, 'nothing written to the new one');

  // Put back, appends go on from where they stopped.
  fs.renameSync(moved, file);
  const head = await j.append({ kind: 'back' });
  t.equal(head.seq, j.head().seq);
  await j.close();
  const events = readJournal(file).entries.filter((e) => e.entry.type === 'event');
  t.equal(events.length, 2, 'the two appends before and after, none of the refused ones');
  t.same(readJournal(file).problems, []);
});
