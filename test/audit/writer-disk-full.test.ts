// A full disk, for real: the journal on a 64 KiB tmpfs (we run as root).
// Appends that cannot be written are refused with audit_unavailable, the
// file is cut back to its last complete line, and the journal carries on
// once there is space again. If the cut itself fails (the file made
// append-only with chattr +a), the journal refuses everything after.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Head, Journal } from '../../daemon/audit/journal';
import { sodiumReady } from '../../shared/audit-format';
import { Refusal } from '../../shared/errors';
import { AuditKeys, auditKeys, newJournal, readJournal, verify } from '../helpers/journal-writer-driver';

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

// A fresh 64 KiB tmpfs; `cleanup` runs before it is unmounted (close the journal there).
function smallDisk(t: Test, cleanup: () => Promise<void>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-full-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', dir]);
  t.teardown(async () => {
    await cleanup();
    try {
      execFileSync('chattr', ['-R', '-a', dir], { stdio: 'ignore' });
    } catch {
      // nothing was append-only
    }
    execFileSync('umount', [dir]);
    fs.rmdirSync(dir);
  });
  return dir;
}

// Appends in groups of 8 until one is refused; returns what was acknowledged and the first refusal.
async function fill(j: Journal): Promise<{ acked: Head[]; refusal: unknown }> {
  const acked: Head[] = [];
  for (let round = 0; round < 500; round++) {
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => j.append({ kind: 'fill', round, i, pad: 'z'.repeat(900) })),
    );
    for (const r of results) if (r.status === 'fulfilled') acked.push(r.value);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) return { acked, refusal: failed.reason };
  }
  return { acked, refusal: null };
}

t.test('ENOSPC: refused, cut back to a complete line, carries on once space is free', async (t) => {
  let j: Journal | null = null;
  const dir = smallDisk(t, async () => {
    await j?.close().catch(() => undefined);
  });
  const file = await newJournal(dir, keys);
  const filler = path.join(dir, 'filler');
  fs.writeFileSync(filler, Buffer.alloc(16 * 1024, 1));
  j = await Journal.open({ path: file, segmentSize: 1024 * 1024 });
  await j.setSigningKey(keys.sign.privateKey);
  await j.appendVault(3, 'e'.repeat(64));

  const { acked, refusal } = await fill(j);
  t.ok(refusal instanceof Refusal, 'an append was refused');
  t.match(refusal, {
    code: 'audit_unavailable',
    message: /could not be written \(ENOSPC: no space left on device\); the action was not performed; free space/,
  });
  t.ok(acked.length > 10, `${acked.length} appends were written first`);
  const data = fs.readFileSync(file);
  t.equal(data.at(-1), 0x0a, 'the file ends on a complete line');
  const r = readJournal(file);
  t.same(r.problems, []);
  const present = new Map(r.entries.map((e) => [e.entry.seq, e.hash]));
  t.ok(
    acked.every((h) => present.get(h.seq) === h.hash),
    'every acknowledged append is in the file',
  );
  t.equal(r.entries.at(-1)!.entry.seq, j.head().seq, 'the head is the last line in the file');
  t.same(await verify(file, { allowUnsignedTail: true }), { ok: true, problem: null });
  await t.rejects(
    j.append({ kind: 'still full', pad: 'z'.repeat(30_000) }),
    { code: 'audit_unavailable' },
    'more than the cut freed is still refused',
  );

  fs.rmSync(filler);
  const h = await j.append({ kind: 'space again' });
  t.equal(h.seq, j.head().seq);
  await j.close();
  t.same(await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }), { ok: true, problem: null });
  // Nothing torn was left behind: the next start has nothing to repair.
  const j2 = await Journal.open({ path: file, segmentSize: 1024 * 1024 });
  j = j2;
  t.notOk(readJournal(file).entries.some((e) => e.entry.type === 'repair'));
  t.same(j2.latestVault(), { generation: 3, vault_hash: 'e'.repeat(64), seq: 3 });
});

t.test('the cut fails too: the journal refuses everything after (fail closed)', async (t) => {
  let j: Journal | null = null;
  const dir = smallDisk(t, async () => {
    await j?.close().catch(() => undefined);
  });
  const file = await newJournal(dir, keys);
  const filler = path.join(dir, 'filler');
  fs.writeFileSync(filler, Buffer.alloc(16 * 1024, 1));
  j = await Journal.open({ path: file, segmentSize: 1024 * 1024 });
  await j.setSigningKey(keys.sign.privateKey);
  // Writes still work on an append-only file; truncation does not.
  execFileSync('chattr', ['+a', file]);

  const { acked, refusal } = await fill(j);
  t.match(refusal, { code: 'audit_unavailable', message: /ENOSPC/ });
  const later = await Promise.allSettled([
    j.append({ kind: 'after' }),
    j.checkpoint(),
    j.appendVault(1, 'f'.repeat(64)),
  ]);
  for (const r of later)
    t.match(r, {
      status: 'rejected',
      reason: {
        code: 'audit_unavailable',
        message: /unusable: after a failed write \(ENOSPC\) it could not be cut back.*EPERM.*restart the daemon/,
      },
    });
  t.throws(() => j!.assertSameFile(), { code: 'audit_unavailable', message: /unusable/ });
  fs.rmSync(filler);
  await t.rejects(
    j.append({ kind: 'space again' }),
    { code: 'audit_unavailable', message: /unusable/ },
    'still refused with space free',
  );
  await j.close();
  const size = fs.statSync(file).size;
  const torn = fs.readFileSync(file).at(-1) !== 0x0a;

  // The next start (file writable again) cuts the half line and records it.
  execFileSync('chattr', ['-a', file]);
  j = await Journal.open({ path: file, segmentSize: 1024 * 1024 });
  await j.setSigningKey(keys.sign.privateKey);
  await j.close();
  const r = readJournal(file);
  t.same(r.problems, []);
  const repair = r.entries.find((e) => e.entry.type === 'repair');
  if (torn)
    t.match(repair?.entry, { at_offset: size - (repair?.entry as { cut_bytes: number } | undefined)!.cut_bytes });
  else t.notOk(repair);
  t.ok(torn, 'the refused write had left half a line (a partial write at the end of the disk)');
  const present = new Map(r.entries.map((e) => [e.entry.seq, e.hash]));
  t.ok(
    acked.every((h) => present.get(h.seq) === h.hash),
    'every acknowledged append survived',
  );
  t.same(await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }), { ok: true, problem: null });
});
