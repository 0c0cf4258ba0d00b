// Creating a journal (`postern init`) and finding where an existing one
// stands at start-up: its last segment, where the chain ends there, what a
// torn last write left, and the state the writer resumes from.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FileHandle } from 'node:fs/promises';
import { GENESIS_PREV, decodeEntry, encodeEntry, entryHash, segmentPath } from '../../shared/audit-format';
import { randomBytes, sodiumReady } from '../../shared/crypto';
import { Refusal } from '../../shared/errors';
import { openSegment, readFirstLine, readLastLine } from '../../shared/journal-read';
import { Cursor, Head } from './journal-entries';
import * as refuse from './refusals';
import { fsyncDirectory, writeAllAt } from './segment-io';
import { ChainPoint, scanSegment } from './segment-scan';
import { segmentAfter } from '../../shared/audit-verify-read';

const PUBLIC_KEY_BYTES = 32;

export interface Genesis {
  journalId: string;
  signPublic: string;
  boxPublic: string;
}

function isPublicKey(b64: unknown): b64 is string {
  return (
    typeof b64 === 'string' &&
    Buffer.from(b64, 'base64').length === PUBLIC_KEY_BYTES &&
    Buffer.from(b64, 'base64').toString('base64') === b64
  );
}

export function errno(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

// `postern init`: segment 0 with its genesis entry, durably, never over an existing journal.
export async function createJournal(
  file: string,
  keys: { signPublic: string; boxPublic: string },
): Promise<{ journalId: string; head: Head }> {
  if (!isPublicKey(keys.signPublic) || !isPublicKey(keys.boxPublic))
    throw new TypeError('createJournal: keys must be 32-byte public keys in base64');
  await sodiumReady();
  const next = segmentPath(file, 1);
  if (
    await fs.promises.lstat(next).then(
      () => true,
      () => false,
    )
  )
    throw refuse.alreadyExists(next);
  let fh: FileHandle;
  try {
    fh = await openSegment(file, 'create');
  } catch (e) {
    throw errno(e) === 'EEXIST' ? refuse.alreadyExists(file) : refuse.cannotCreate(file, e);
  }
  const journalId = randomBytes(16).toString('hex');
  const line = encodeEntry(1, GENESIS_PREV, new Date().toISOString(), {
    type: 'genesis',
    journal_id: journalId,
    sign_pub: keys.signPublic,
    box_pub: keys.boxPublic,
  });
  try {
    await writeAllAt(fh, Buffer.concat([line, Buffer.from('\n')]), 0);
    await fh.sync();
    await fh.close();
    await fsyncDirectory(path.dirname(file));
  } catch (e) {
    await fh.close().catch(() => undefined);
    await fs.promises.unlink(file).catch(() => undefined);
    throw refuse.cannotCreate(file, e);
  }
  return { journalId, head: { seq: 1, hash: entryHash(line) } };
}

// The highest n for which segment n exists (lstat: links count as present,
// and are refused when opened).
async function lastSegment(file: string): Promise<number> {
  let n = 0;
  for (;;) {
    try {
      await fs.promises.lstat(segmentPath(file, n + 1));
    } catch (e) {
      if (errno(e) === 'ENOENT') return n;
      throw refuse.cannotOpen(segmentPath(file, n + 1), e);
    }
    n += 1;
  }
}

export async function withSegment<T>(file: string, fn: (fh: FileHandle) => Promise<T>): Promise<T> {
  let fh: FileHandle;
  try {
    fh = await openSegment(file, 'read');
  } catch (e) {
    throw refuse.cannotOpen(file, e);
  }
  try {
    return await fn(fh);
  } finally {
    await fh.close();
  }
}

async function readGenesis(file: string): Promise<Genesis> {
  const line = await withSegment(file, readFirstLine);
  const d = line ? decodeEntry(line) : null;
  if (!d?.ok || d.entry.type !== 'genesis' || d.entry.seq !== 1 || d.entry.prev !== GENESIS_PREV) {
    throw refuse.damaged(file, 0, 'no valid genesis entry on the first line');
  }
  return { journalId: d.entry.journal_id, signPublic: d.entry.sign_pub, boxPublic: d.entry.box_pub };
}

// The last entry of a complete earlier segment.
async function lastEntryOf(file: string): Promise<ChainPoint> {
  return withSegment(file, async (fh) => {
    const size = (await fh.stat()).size;
    const line = await readLastLine(fh, size);
    const d = line ? decodeEntry(line) : null;
    if (!line || !d?.ok) throw refuse.damaged(file, size, 'an earlier segment does not end with a complete entry');
    return { seq: d.entry.seq, hash: entryHash(line) };
  });
}

// A whole earlier segment, which must be intact.
export async function scanEarlier(file: string, n: number): ReturnType<typeof scanSegment> {
  return withSegment(file, async (fh) => {
    const scan = await scanSegment(fh, n, null);
    if (scan.damage || scan.torn || !scan.last) {
      throw refuse.damaged(
        file,
        scan.damage?.offset ?? scan.goodEnd,
        scan.damage?.why ?? 'an earlier segment does not end with a complete entry',
      );
    }
    return scan;
  });
}

// Where the writer resumes, and the opening entries it writes first.
export interface Recovered {
  genesis: Genesis;
  fh: FileHandle; // the last segment, cut back to its last good line
  cursor: Cursor; // without an event key yet
  signer: string | null; // the key in force, when the scanned segments show it
  unstarted: boolean; // the last segment has no entry: it gets its segment entry
  repair: { cut_bytes: number; at_offset: number } | null; // a torn write was cut
  restate: boolean; // the latest vault state is restated in the last segment
}

// Opens the last segment and cuts a torn last write; a chain broken in any
// other way is refused and left untouched.
export async function recoverJournal(file0: string): Promise<Recovered> {
  const last = await lastSegment(file0);
  // A later segment beyond a missing one: the journal lost a segment (the
  // verifier says missing_segment); writing on would bury that.
  const later = segmentAfter(file0, last);
  if (later !== null) throw refuse.segmentGap(segmentPath(file0, last + 1), segmentPath(file0, later));
  const genesis = await readGenesis(file0);
  const file = segmentPath(file0, last);
  let fh: FileHandle;
  try {
    fh = await openSegment(file, 'append');
  } catch (e) {
    throw refuse.cannotOpen(file, e);
  }
  try {
    const from = last === 0 ? null : await lastEntryOf(segmentPath(file0, last - 1));
    const scan = await scanSegment(fh, last, from);
    if (scan.damage) throw refuse.damaged(file, scan.damage.offset, scan.damage.why);
    // No good line at all in segment n ≥ 1: the daemon died while starting
    // it. Its state is that of segment n-1, and it gets its opening entries now.
    const unstarted = scan.last === null;
    if (unstarted && last === 0) throw refuse.damaged(file, 0, 'no valid genesis entry on the first line');
    const base = unstarted ? await scanEarlier(segmentPath(file0, last - 1), last - 1) : scan;
    const head = base.last as ChainPoint;
    // The last segment always holds the latest vault state; when its
    // opening entries were cut short it is found further back and restated
    // (a journal without any vault entry looks back through every segment).
    let vault = base.vault;
    for (let k = base === scan ? last - 1 : last - 2; vault === null && k >= 0; k--) {
      vault = (await scanEarlier(segmentPath(file0, k), k)).vault;
    }
    const restate = vault !== null && (unstarted || scan.vault === null);

    const cut = scan.size - scan.goodEnd;
    if (cut > 0) {
      await fh.truncate(scan.goodEnd);
      await fh.datasync();
    }
    const cursor: Cursor = {
      segment: last,
      offset: scan.goodEnd,
      seq: head.seq,
      hash: head.hash,
      sinceCheckpoint: base.sinceCheckpoint,
      vault,
      keyId: 0,
      key: Buffer.alloc(0),
      headerEnd: 0,
    };
    const repair = cut > 0 ? { cut_bytes: cut, at_offset: scan.goodEnd } : null;
    return { genesis, fh, cursor, signer: base.signer, unstarted, repair, restate };
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e instanceof Refusal ? e : refuse.cannotOpen(file, e);
  }
}
