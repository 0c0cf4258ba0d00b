// Whole segments removed or swapped: the journal cut back at a segment
// boundary (every segment ends with a checkpoint, so what is left is a
// valid journal on its own) is caught by the vault's recorded head at
// unlock (SPEC §8, checkRollback with the daemon's own Journal), and a
// segment file taken from another journal never passes verification.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { Journal } from '../../daemon/audit/journal';
import { checkRollback } from '../../daemon/vault/rollback';
import { GenesisEntry, segmentPath, sodiumReady } from '../../shared/audit-format';
import { verifyJournal } from '../../shared/audit-verify';
import { buildJournal, makeKeys } from '../helpers/journal-fixture';
import { AuditKeys, auditKeys, newJournal, readJournal, scratchDir } from '../helpers/journal-writer-driver';

const SEGMENT = 4096;

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

// A journal written by the daemon's writer through segments 0 to 2, with a
// vault write (its event, the head the vault records, then its vault entry)
// in segment `writeIn`; returns what the vault would hold.
async function written(
  t: Test,
  writeIn: number,
): Promise<{ file: string; vault: { journalId: string; journalHead: string; generation: number } }> {
  const dir = scratchDir(t, 'postern-seg-rollback-');
  const file = await newJournal(dir, keys);
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  await j.setSigningKey(keys.sign.privateKey);
  await j.appendVault(1, 'a'.repeat(64));
  let head = '';
  for (let i = 0; !fs.existsSync(segmentPath(file, 3)); i++) {
    if (!head && fs.existsSync(segmentPath(file, writeIn)) && !fs.existsSync(segmentPath(file, writeIn + 1))) {
      const h = await j.append({ kind: 'cred_add', credential: 'one', generation: 2 });
      head = `${h.seq}:${h.hash}`;
      await j.appendVault(2, 'b'.repeat(64));
    }
    await j.append({ kind: 'filler', i, pad: 'p'.repeat(100) });
  }
  await j.close();
  fs.rmSync(segmentPath(file, 3)); // segments 0 to 2 stay
  const genesis = readJournal(file).entries[0]?.entry as GenesisEntry;
  return { file, vault: { journalId: genesis.journal_id, journalHead: head, generation: 2 } };
}

async function rollbackVerdict(file: string, vault: { journalId: string; journalHead: string; generation: number }) {
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  try {
    return await checkRollback(vault, j);
  } finally {
    await j.close();
  }
}

t.test("the last segment removed: the journal verifies, the vault's head is missing", async (t) => {
  const { file, vault } = await written(t, 2);
  t.match(await rollbackVerdict(file, vault), { ok: true }, 'the untouched journal agrees with the vault');
  const { file: cut, vault: same } = await written(t, 2);
  fs.rmSync(segmentPath(cut, 2));
  const r = await verifyJournal(cut);
  t.equal(r.ok, true, 'what is left is a valid journal on its own (no head pinned)');
  t.match(
    await rollbackVerdict(cut, same),
    { ok: false, problem: /does not contain: the journal was cut back or replaced/ },
    'unlock finds the journal cut back',
  );
});

t.test('a segment file from another journal in place of segment 1 or 2 never passes', async (t) => {
  const root = scratchDir(t, 'postern-seg-foreign-');
  const a = await buildJournal(join(root, 'a'), 300, { segmentEvery: 100 });
  const b = await buildJournal(join(root, 'b'), 300, { segmentEvery: 100, keys: await makeKeys() });
  for (const n of [1, 2]) {
    const dir = join(root, `swap${n}`);
    fs.mkdirSync(dir);
    for (const k of [0, 1, 2])
      fs.copyFileSync(segmentPath(k === n ? b.path : a.path, k), segmentPath(join(dir, 'audit.log'), k));
    const r = await verifyJournal(join(dir, 'audit.log'), { allowUnsignedTail: true });
    t.equal(r.ok, false, `segment ${n} of another journal: not ok (${r.problem?.kind} at ${r.problem?.seq})`);
    t.ok((r.head?.seq ?? 0) <= n * 100, `segment ${n}: no entry of it passed`);
    t.ok(r.problem !== null && r.problem.seq !== null && r.problem.seq <= n * 100 + 1, 'reported where it begins');
  }
});

// The verifier calls a skipped segment number `missing_segment`; the daemon
// refuses to open a damaged journal (docs/audit-format.md, *A torn last
// write*), so it must not pick the segment before the gap as the last one
// and write on there.
t.test('a segment number skipped, a later segment file present: refused at start-up, left untouched', async (t) => {
  const root = scratchDir(t, 'postern-seg-gap-');
  const j = await buildJournal(join(root, 'j'), 300, { segmentEvery: 100 });
  fs.copyFileSync(segmentPath(j.path, 2), segmentPath(j.path, 4));
  const r = await verifyJournal(j.path);
  t.match(r, { ok: false, problem: { kind: 'missing_segment', seq: 301 } }, 'the verifier: segment 3 is missing');
  const before = fs.readFileSync(segmentPath(j.path, 2));
  const opened = await Journal.open({ path: j.path, segmentSize: SEGMENT }).catch((e: unknown) => e);
  if (opened instanceof Journal) await opened.close();
  t.match(opened, { code: 'audit_unavailable' }, 'the daemon refuses the journal');
  t.same(fs.readFileSync(segmentPath(j.path, 2)), before, 'segment 2 is left as it was');
});
