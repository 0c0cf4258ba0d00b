// Start-up repair of a torn last write, refusal of anything else that is
// wrong with the file, and the identity checks: no symlinks, regular files
// only, and assertSameFile once the journal is open.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Journal } from '../../daemon/audit/journal';
import { segmentPath, sodiumReady } from '../../shared/audit-format';
import { AuditKeys, auditKeys, newJournal, readJournal, verify, scratchDir } from '../helpers/journal-writer-driver';

const BIG = 64 * 1024 * 1024;

const tmpdir = (t: Test): string => scratchDir(t, 'postern-repair-');

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

// A closed, signed journal with a few events in it.
async function written(t: Test): Promise<string> {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: BIG });
  await j.setSigningKey(keys.sign.privateKey);
  for (let i = 0; i < 10; i++) await j.append({ kind: 'before', i });
  await j.close();
  return file;
}

const lines = (file: string): string[] => fs.readFileSync(file, 'utf8').split('\n');

// What a crash (or a full disk) can leave after the last complete line.
const TORN: Array<{ name: string; tail: (file: string) => Buffer }> = [
  { name: 'half a line', tail: (f) => Buffer.from(lines(f)[3]!.slice(0, 57)) },
  {
    name: 'a line without its newline',
    tail: (f) => Buffer.from(lines(f)[3]!.replace('"seq":4,', `"seq":${lines(f).length},`)),
  },
  { name: 'zero bytes (blocks allocated, never written)', tail: () => Buffer.alloc(3000) },
  { name: 'a complete line that is not an entry', tail: () => Buffer.from('{"v":1,"seq":\n') },
];

for (const c of TORN) {
  t.test(`torn last write (${c.name}): cut, recorded, verifiable`, async (t) => {
    const file = await written(t);
    const good = fs.readFileSync(file);
    const tail = c.tail(file);
    fs.appendFileSync(file, tail);
    t.equal(
      (await verify(file, { pubkey: keys.sign.publicKey.toString('base64') })).ok,
      false,
      'the verifier sees the torn tail',
    );

    const j = await Journal.open({ path: file, segmentSize: BIG });
    await j.setSigningKey(keys.sign.privateKey);
    const before = readJournal(file).entries;
    const repair = before.find((e) => e.entry.type === 'repair');
    t.ok(repair, 'a repair entry');
    t.match(repair?.entry, { type: 'repair', cut_bytes: tail.length, at_offset: good.length, seq: 14 });
    t.same(
      before.slice(-2).map((e) => e.entry.type),
      ['repair', 'key'],
      'then a fresh key',
    );
    t.ok(fs.readFileSync(file).subarray(0, good.length).equals(good), 'everything before the cut is unchanged');
    const h = await j.append({ kind: 'after' });
    await j.close();
    t.same(readJournal(file).problems, []);
    t.same(await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }), { ok: true, problem: null });
    t.ok(readJournal(file).entries.some((e) => e.entry.seq === h.seq && e.hash === h.hash));
  });
}

// Damage beyond the last write is not the writer's to repair: it refuses
// and leaves every byte as it was.
const DAMAGE: Array<{ name: string; mangle: (file: string) => void; why: RegExp }> = [
  {
    name: 'two bad lines at the end',
    mangle: (f) => fs.appendFileSync(f, 'garbage\nmore garbage'),
    why: /not JSON/,
  },
  {
    name: 'an edited entry in the middle',
    mangle: (f) => {
      const l = lines(f);
      l[4] = l[4]!.replace(/"time":"[^"]+"/, '"time":"2001-01-01T00:00:00.000Z"');
      fs.writeFileSync(f, l.join('\n'));
    },
    why: /entry 6 does not name the hash of entry 5/,
  },
  {
    // A crash leaves part of a write, never a whole entry that does not
    // belong: this was put there, and is evidence to keep.
    name: 'a complete entry at the end that does not chain (a copy of an earlier one)',
    mangle: (f) => fs.appendFileSync(f, `${lines(f)[5]}\n`),
    why: /seq 6 after 13/,
  },
  {
    name: 'the last entry (a checkpoint) edited',
    mangle: (f) => {
      const l = lines(f);
      const last = l.length - 2; // the file ends with "\n"
      l[last] = l[last]!.replace(/"prev":"(.)/, (_m, c: string) => `"prev":"${c === '0' ? '1' : '0'}`);
      fs.writeFileSync(f, l.join('\n'));
    },
    why: /does not name the hash of entry/,
  },
  {
    name: 'a line deleted in the middle',
    mangle: (f) => {
      const l = lines(f);
      l.splice(6, 1);
      fs.writeFileSync(f, l.join('\n'));
    },
    why: /seq 8 after 6/,
  },
  {
    name: 'a line longer than any entry at the end',
    mangle: (f) => fs.appendFileSync(f, 'x'.repeat(70_000)),
    why: /longer than any entry/,
  },
  {
    name: 'no genesis entry',
    mangle: (f) => {
      const l = lines(f);
      fs.writeFileSync(f, l.slice(1).join('\n'));
    },
    why: /genesis/,
  },
];

for (const c of DAMAGE) {
  t.test(`damage (${c.name}): refused with audit_unavailable, file untouched`, async (t) => {
    const file = await written(t);
    c.mangle(file);
    const bytes = fs.readFileSync(file);
    await t.rejects(Journal.open({ path: file, segmentSize: BIG }), { code: 'audit_unavailable', message: c.why });
    await t.rejects(Journal.open({ path: file, segmentSize: BIG }), {
      message: /damaged at byte \d+.*postern audit verify/,
    });
    t.ok(fs.readFileSync(file).equals(bytes), 'not a byte changed');
  });
}

t.test('a damaged earlier segment end is refused', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: 2048 });
  for (let i = 0; !fs.existsSync(segmentPath(file, 2)); i++) await j.append({ kind: 's', i, pad: 'q'.repeat(100) });
  await j.close();
  fs.appendFileSync(segmentPath(file, 1), 'half a li');
  await t.rejects(Journal.open({ path: file, segmentSize: 2048 }), {
    code: 'audit_unavailable',
    message: /journal\.1 is damaged.*earlier segment/,
  });
});

t.test('a symlink at the journal path is refused, never followed', async (t) => {
  const real = await written(t);
  const dir = tmpdir(t);
  const link = path.join(dir, 'journal');
  fs.symlinkSync(real, link);
  const before = fs.readFileSync(real);
  await t.rejects(Journal.open({ path: link, segmentSize: BIG }), {
    code: 'audit_unavailable',
    message: /ELOOP.*symbolic link/,
  });
  t.ok(fs.readFileSync(real).equals(before), 'the link target is untouched');

  // The last segment being a link is refused too.
  const seg1 = segmentPath(real, 1);
  const elsewhere = path.join(dir, 'elsewhere');
  fs.writeFileSync(elsewhere, '');
  fs.symlinkSync(elsewhere, seg1);
  await t.rejects(Journal.open({ path: real, segmentSize: BIG }), {
    code: 'audit_unavailable',
    message: /journal\.1.*ELOOP/,
  });
  t.equal(fs.readFileSync(elsewhere, 'utf8'), '');
});

t.test('anything but a regular file at the path is refused', async (t) => {
  const dir = tmpdir(t);
  const asDir = path.join(dir, 'journal-dir');
  fs.mkdirSync(asDir);
  await t.rejects(Journal.open({ path: asDir, segmentSize: BIG }), { code: 'audit_unavailable' });
  const fifo = path.join(dir, 'journal-fifo');
  execFileSync('mkfifo', [fifo]);
  await t.rejects(Journal.open({ path: fifo, segmentSize: BIG }), { code: 'audit_unavailable', message: /ENOTREG/ });
  await t.rejects(Journal.open({ path: path.join(dir, 'missing'), segmentSize: BIG }), {
    code: 'audit_unavailable',
    message: /ENOENT/,
  });
});

t.test('assertSameFile: the path must still name the open file', async (t) => {
  const file = await written(t);
  const dir = path.dirname(file);
  const open = async (): Promise<Journal> => {
    const j = await Journal.open({ path: file, segmentSize: BIG });
    t.teardown(() => j.close().catch(() => undefined));
    return j;
  };

  const j = await open();
  t.doesNotThrow(() => j.assertSameFile(), 'the same file');
  // Another file renamed over the path.
  const other = path.join(dir, 'other');
  fs.copyFileSync(file, other);
  fs.renameSync(other, file);
  t.throws(() => j.assertSameFile(), { code: 'audit_unavailable', message: /replaced by another file.*not performed/ });
  await j.close();

  const j2 = await open();
  const moved = path.join(dir, 'moved');
  fs.renameSync(file, moved);
  t.throws(() => j2.assertSameFile(), { code: 'audit_unavailable', message: /removed or renamed/ });
  fs.symlinkSync(moved, file);
  t.throws(
    () => j2.assertSameFile(),
    { code: 'audit_unavailable', message: /symbolic link/ },
    'a link to the very same file is still refused',
  );
  fs.rmSync(file);
  fs.renameSync(moved, file);
  t.doesNotThrow(() => j2.assertSameFile(), 'put back: the same file again');
  // A hard link is the same file.
  fs.linkSync(file, path.join(dir, 'hard'));
  t.doesNotThrow(() => j2.assertSameFile());
  await j2.close();
  t.same(readJournal(file).problems, []);
});
