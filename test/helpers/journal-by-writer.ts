// A real journal made by the daemon's own writer (daemon/audit/journal.ts):
// genesis by createJournal, then daemon "runs" that open it (key entry),
// append events and vault entries concurrently, sign checkpoints and close;
// segments by size. The result is described like journal-fixture's
// BuiltJournal (read back from the files), so the same tamper toolkit works.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Journal, createJournal } from '../../daemon/audit/journal';
import { decodeEntry, entryHash, EntryType, segmentPath } from '../../shared/audit-format';
import { BuiltJournal, b64, makeKeys } from './journal-fixture';

export async function buildJournalWithWriter(
  dir: string,
  atLeast: number,
  segmentSize = 96 * 1024,
  runs = 3,
): Promise<BuiltJournal> {
  mkdirSync(dir, { recursive: true });
  const keys = await makeKeys();
  const path = join(dir, 'audit.log');
  const created = await createJournal(path, {
    signPublic: b64(keys.sign.publicKey),
    boxPublic: b64(keys.box.publicKey),
  });
  keys.journalId = created.journalId;
  const perRun = Math.ceil(atLeast / runs);
  let generation = 1;
  for (let run = 0; run < runs; run++) {
    const j = await Journal.open({ path, segmentSize });
    await j.setSigningKey(keys.sign.privateKey);
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < perRun; i++) {
      if (i % 97 === 96) pending.push(j.appendVault(++generation, entryHash(Buffer.from(`vault ${generation}`))));
      else pending.push(j.append({ kind: 'http_intent', credential: 'github', method: 'GET', n: i, run }));
      if (pending.length >= 64) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    await j.close();
  }
  const files: Buffer[][] = [];
  for (let k = 0; existsSync(segmentPath(path, k)); k++) {
    const text = readFileSync(segmentPath(path, k));
    const lines: Buffer[] = [];
    let from = 0;
    for (let at = text.indexOf(10); at >= 0; at = text.indexOf(10, from)) {
      lines.push(Buffer.from(text.subarray(from, at)));
      from = at + 1;
    }
    files.push(lines);
  }
  const all = files.flat();
  const hashes = all.map((l) => entryHash(l));
  const types: EntryType[] = all.map((l) => {
    const d = decodeEntry(l);
    if (!d.ok) throw new Error(`the writer produced an undecodable line: ${d.why}`);
    return d.entry.type;
  });
  const checkpoints = types.flatMap((ty, i) => (ty === 'checkpoint' ? [i + 1] : []));
  return {
    dir,
    path,
    keys,
    files,
    entries: all.length,
    head: { seq: all.length, hash: hashes[all.length - 1] as string },
    hashes,
    types,
    checkpoints,
  };
}
