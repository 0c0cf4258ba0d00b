// Segments: rotation at segmentSize with a checkpoint first, each new
// segment opened exclusively and starting with its segment entry, a new
// key and the restated vault state; rotations cut short by a crash are
// completed on the next start.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import { Journal } from '../../daemon/audit/journal';
import { segmentPath, sodiumReady } from '../../shared/audit-format';
import {
  AuditKeys,
  ReadEntry,
  auditKeys,
  decryptAll,
  newJournal,
  readJournal,
  verify,
  scratchDir,
} from '../helpers/journal-writer-driver';

const SEGMENT = 4096;
// The checkpoint that ends a segment may go past segmentSize.
const CHECKPOINT_LINE = 400;

const tmpdir = (t: Test): string => scratchDir(t, 'postern-segments-');

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

const pub = (): string => keys.sign.publicKey.toString('base64');

function bySegment(entries: ReadEntry[]): ReadEntry[][] {
  const out: ReadEntry[][] = [];
  for (const e of entries) (out[e.segment] ??= []).push(e);
  return out;
}

// A journal rotated through `segments` segments with a vault entry in segment 0.
async function rotated(
  t: Test,
  segments: number,
  sign: boolean,
): Promise<{ file: string; vaultSeq: number; heads: { seq: number; hash: string }[] }> {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  if (sign) await j.setSigningKey(keys.sign.privateKey);
  const vault = await j.appendVault(7, 'c'.repeat(64));
  const heads = [];
  for (let i = 0; !fs.existsSync(segmentPath(file, segments)); i++) {
    // A mix of single and concurrent appends, so rotations happen inside batches too.
    if (i % 3 === 0)
      heads.push(...(await Promise.all(Array.from({ length: 5 }, (_, k) => j.append({ kind: 'burst', i, k })))));
    else heads.push(await j.append({ kind: 'one', i, pad: 'p'.repeat(i % 300) }));
  }
  await j.close();
  return { file, vaultSeq: vault.seq, heads };
}

t.test('rotation at 4 KiB across more than 5 segments: one continuous, signed chain', async (t) => {
  const { file, vaultSeq, heads } = await rotated(t, 6, true);
  const r = readJournal(file);
  t.same(r.problems, []);
  t.same(await verify(file, { pubkey: pub() }), { ok: true, problem: null });
  const segs = bySegment(r.entries);
  t.ok(segs.length >= 7, `${segs.length} segments`);
  for (let n = 0; n < segs.length; n++) {
    const file_n = segmentPath(file, n);
    const st = fs.statSync(file_n);
    t.equal(st.mode & 0o777, 0o600, `${file_n} is 0600`);
    const types = segs[n]!.map((e) => e.entry.type);
    if (n > 0) {
      t.same(types.slice(0, 3), ['segment', 'key', 'vault'], `segment ${n} opens with segment, key, restated vault`);
      const v = segs[n]![2]!.entry;
      t.match(v, { generation: 7, vault_hash: 'c'.repeat(64) });
    }
    if (n < segs.length - 1) {
      t.equal(types.at(-1), 'checkpoint', `segment ${n} ends with a checkpoint`);
      t.ok(st.size <= SEGMENT + CHECKPOINT_LINE, `segment ${n} is ${st.size} bytes`);
      const withoutCheckpoint = st.size - (fs.readFileSync(file_n, 'utf8').trimEnd().split('\n').at(-1)!.length + 1);
      t.ok(withoutCheckpoint <= SEGMENT, 'only the closing checkpoint goes past segmentSize');
    }
  }
  // Every event uses the key of its own segment.
  for (const seg of segs.slice(1)) {
    const keyId = seg[1]!.entry.seq;
    t.ok(
      seg.every((e) => e.entry.type !== 'event' || e.entry.key_id === keyId),
      'events use their segment’s key',
    );
  }
  const events = decryptAll(r.entries, keys.box.publicKey, keys.box.privateKey);
  t.equal(events.size, heads.length, 'every event decrypts');
  const present = new Map(r.entries.map((e) => [e.entry.seq, e.hash]));
  t.ok(
    heads.every((h) => present.get(h.seq) === h.hash),
    'every acknowledged head is in the files',
  );

  // Reopened: appends go to the last segment, the vault state is the restated one.
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  const lastSeg = segs.length - 1;
  const restated = segs[lastSeg]![2]!.entry.seq;
  t.same(j.latestVault(), { generation: 7, vault_hash: 'c'.repeat(64), seq: restated });
  t.ok(restated > vaultSeq);
  const h = await j.append({ kind: 'after reopen' });
  await j.close();
  t.equal(readJournal(file).entries.find((e) => e.entry.seq === h.seq)?.segment, lastSeg);
});

t.test('rotation without a signing key: no checkpoints, the chain still continuous', async (t) => {
  const { file } = await rotated(t, 5, false);
  const r = readJournal(file);
  t.same(r.problems, []);
  t.notOk(r.entries.some((e) => e.entry.type === 'checkpoint'));
  t.same(await verify(file, { allowUnsignedTail: true }), { ok: true, problem: null });
});

t.test('a segment smaller than its opening entries still makes progress', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: 64 });
  await j.setSigningKey(keys.sign.privateKey);
  await j.appendVault(1, 'd'.repeat(64));
  for (let i = 0; i < 6; i++) await j.append({ kind: 'tiny', i });
  await j.close();
  const r = readJournal(file);
  t.same(r.problems, []);
  t.ok(r.segments >= 6 && r.segments <= 9, `${r.segments} segments: one event each, no endless rotation`);
  t.same(await verify(file, { pubkey: pub() }), { ok: true, problem: null });
});

t.test('a file already at the next segment path: the rotation fails closed, nothing overwritten', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  t.teardown(() => j.close().catch(() => undefined));
  await j.setSigningKey(keys.sign.privateKey);
  const stray = segmentPath(file, 1);
  fs.writeFileSync(stray, 'not yours\n');
  let refusal: unknown = null;
  for (let i = 0; i < 200 && refusal === null; i++) {
    await j.append({ kind: 'fill', i, pad: 'f'.repeat(100) }).catch((e: unknown) => {
      refusal = e;
    });
  }
  t.match(refusal, { code: 'audit_unavailable', message: new RegExp(`${stray}.*EEXIST.*not performed`) });
  t.equal(fs.readFileSync(stray, 'utf8'), 'not yours\n', 'the stray file is untouched');
  t.same(
    readJournal(file).problems.filter((p) => !p.startsWith('segment 1')),
    [],
  );
  t.equal(fs.readFileSync(file, 'utf8').at(-1), '\n', 'segment 0 ends on a complete line (its checkpoint)');
  // Once the file is moved away the journal rotates and carries on.
  fs.rmSync(stray);
  await j.append({ kind: 'after' });
  await j.close();
  t.ok(fs.existsSync(stray));
  t.same(readJournal(file).problems, []);
  t.same(await verify(file, { pubkey: pub() }), { ok: true, problem: null });
});

// A crash while starting segment n leaves a prefix of its opening lines.
const CUT_SHORT: Array<{ name: string; keep: (lines: string[]) => string; repair: boolean }> = [
  { name: 'an empty segment file', keep: () => '', repair: false },
  { name: 'half of the segment entry', keep: (l) => l[0]!.slice(0, 40), repair: true },
  { name: 'the segment entry only', keep: (l) => `${l[0]}\n`, repair: false },
  { name: 'segment and key, no restated vault', keep: (l) => `${l[0]}\n${l[1]}\n`, repair: false },
  {
    name: 'segment, key and half the vault entry',
    keep: (l) => `${l[0]}\n${l[1]}\n${l[2]!.slice(0, 30)}`,
    repair: true,
  },
];

for (const c of CUT_SHORT) {
  t.test(`rotation cut short (${c.name}): the next start completes it`, async (t) => {
    const { file } = await rotated(t, 2, true);
    const last = segmentPath(file, 2);
    const lines = fs.readFileSync(last, 'utf8').split('\n');
    const prefix = c.keep(lines);
    fs.writeFileSync(last, prefix);
    const vaultBefore = readJournal(file)
      .entries.filter((e) => e.entry.type === 'vault')
      .at(-1)!.entry;

    const j = await Journal.open({ path: file, segmentSize: SEGMENT });
    await j.setSigningKey(keys.sign.privateKey);
    const h = await j.append({ kind: 'after repair' });
    const vault = j.latestVault();
    await j.close();
    const r = readJournal(file);
    t.same(r.problems, []);
    t.same(await verify(file, { pubkey: pub() }), { ok: true, problem: null });
    const seg2 = bySegment(r.entries)[2]!;
    const types = seg2.map((e) => e.entry.type);
    t.equal(types[0], 'segment', 'the segment starts with its segment entry');
    t.equal(types.includes('repair'), c.repair, c.repair ? 'the cut is recorded' : 'nothing was cut');
    if (c.repair) {
      const rep = seg2.find((e) => e.entry.type === 'repair')!.entry;
      t.match(rep, {
        cut_bytes: Buffer.byteLength(prefix.slice(prefix.lastIndexOf('\n') + 1)),
        at_offset: prefix.lastIndexOf('\n') + 1,
      });
    }
    const restatedVault = seg2.filter((e) => e.entry.type === 'vault');
    t.equal(restatedVault.length, 1, 'the last segment holds the vault state exactly once');
    t.match(restatedVault[0]!.entry, {
      generation: (vaultBefore as { generation: number }).generation,
      vault_hash: (vaultBefore as { vault_hash: string }).vault_hash,
    });
    t.equal(vault?.seq, restatedVault[0]!.entry.seq);
    t.ok(seg2.some((e) => e.entry.seq === h.seq));
  });
}

t.test('a journal that never had a vault entry rotates and reopens without one', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  for (let i = 0; !fs.existsSync(segmentPath(file, 3)); i++) await j.append({ kind: 'v', i, pad: 'v'.repeat(200) });
  await j.close();
  const j2 = await Journal.open({ path: file, segmentSize: SEGMENT });
  t.equal(j2.latestVault(), null);
  await j2.close();
  t.same(readJournal(file).problems, []);
  t.notOk(readJournal(file).entries.some((e) => e.entry.type === 'vault'));
});
