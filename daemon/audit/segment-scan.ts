// Reading a segment at start-up: where its chain ends, its latest vault
// entry, how many entries follow its last checkpoint, and whether what
// follows the last good line is one torn write (repairable) or damage
// (left alone: the daemon refuses to extend a broken chain).
import { FileHandle } from 'node:fs/promises';
import { GENESIS_PREV, decodeEntry, entryHash } from '../../shared/audit-format';
import { walkLines } from '../../shared/journal-read';

export interface ChainPoint {
  seq: number;
  hash: string;
}

export interface VaultState {
  generation: number;
  vault_hash: string;
  seq: number;
}

export interface SegmentScan {
  // The last entry that decodes and chains; null when there is none.
  last: ChainPoint | null;
  // Offset just after that entry's line.
  goodEnd: number;
  size: number;
  vault: VaultState | null;
  // The signing key in force after this segment's last entry, when the
  // segment shows it (a genesis, checkpoint or signer entry); else null.
  signer: string | null;
  sinceCheckpoint: number;
  // The bytes after goodEnd are one write cut short: part of a line, or one
  // last line that is not an entry.
  torn: { cut: number } | null;
  // Anything else wrong; `offset` is where the good lines end.
  damage: { offset: number; why: string } | null;
}

// The scan's state just before a signer entry, and where its line starts.
interface SignerStart {
  last: ChainPoint | null;
  vault: VaultState | null;
  signer: string | null;
  sinceCheckpoint: number;
  offset: number;
}

// `from` is the last entry of segment n-1, which the first line of segment
// n must chain from; null skips that check (segment 0 starts at genesis).
export async function scanSegment(fh: FileHandle, n: number, from: ChainPoint | null): Promise<SegmentScan> {
  const size = (await fh.stat()).size;
  let last: ChainPoint | null = null;
  let vault: VaultState | null = null;
  let signer: string | null = null;
  let changed = false; // the entry before was a signer entry
  let sinceCheckpoint = 0;
  let bad: { why: string; bytes: number; decoded: boolean } | null = null;
  // The state before a signer entry that is (so far) the last good entry.
  let beforeSigner: SignerStart | null = null;

  const firstProblem = (type: string, seq: number, prev: string, segment: unknown): string | null => {
    if (n === 0)
      return type === 'genesis' && seq === 1 && prev === GENESIS_PREV
        ? null
        : 'segment 0 does not start with the genesis entry';
    if (type !== 'segment' || segment !== n) return `segment ${n} does not start with its segment entry`;
    if (from && (seq !== from.seq + 1 || prev !== from.hash))
      return `segment ${n} does not continue the chain of segment ${n - 1}`;
    return null;
  };

  const walk = await walkLines(fh, 0, size, (line, offset) => {
    const d = decodeEntry(line);
    let why: string | null = d.ok ? null : d.why;
    if (d.ok) {
      const e = d.entry;
      if (last === null) why = firstProblem(e.type, e.seq, e.prev, (e as { segment?: unknown }).segment);
      else if (e.type === 'genesis' || e.type === 'segment') why = `a ${e.type} entry after the start of the segment`;
      else if (e.seq !== last.seq + 1) why = `seq ${e.seq} after ${last.seq}`;
      else if (e.prev !== last.hash) why = `entry ${e.seq} does not name the hash of entry ${last.seq}`;
    }
    if (why !== null || !d.ok) {
      bad = { why: why ?? 'bad entry', bytes: line.length + 1, decoded: d.ok };
      return false;
    }
    const e = d.entry;
    beforeSigner = e.type === 'signer' ? { last, vault, signer, sinceCheckpoint, offset } : null;
    last = { seq: e.seq, hash: entryHash(line) };
    // The highest generation, not the last: a vault's generation never goes
    // down, so a lower one after it is an older vault being let back in (the
    // rollback check then refuses that vault; the verifier names the entry).
    if (e.type === 'vault' && (vault === null || e.generation >= vault.generation))
      vault = { generation: e.generation, vault_hash: e.vault_hash, seq: e.seq };
    // A checkpoint right after a signer entry is signed by the key it replaces.
    if (e.type === 'genesis' || e.type === 'signer' || (e.type === 'checkpoint' && !changed)) signer = e.sign_pub;
    changed = e.type === 'signer';
    sinceCheckpoint = e.type === 'checkpoint' ? 0 : sinceCheckpoint + 1;
    return true;
  });

  const result: SegmentScan = {
    last,
    goodEnd: walk.end,
    size,
    vault,
    signer,
    sinceCheckpoint,
    torn: null,
    damage: null,
  };
  const failed = bad as { why: string; bytes: number; decoded: boolean } | null; // assigned in the callback
  if (walk.overlong) {
    result.damage = { offset: walk.end, why: 'a line longer than any entry' };
  } else if (failed) {
    // A crash can leave one last line that is not an entry (cut short, or
    // blocks never written); an entry that decodes but does not chain was
    // put there, and is left for `postern audit verify` to name.
    if (walk.end + failed.bytes === size && !failed.decoded) result.torn = { cut: failed.bytes };
    else result.damage = { offset: walk.end, why: failed.why };
  } else if (walk.end < size) {
    result.torn = { cut: size - walk.end };
  }
  // A signer entry is written together with the checkpoint that vouches for
  // it. Without that checkpoint (the write was cut short), the change never
  // happened: the signer line goes with the torn tail.
  const cutSigner = beforeSigner as SignerStart | null; // assigned in the callback
  if (cutSigner && !result.damage) {
    Object.assign(result, {
      last: cutSigner.last,
      vault: cutSigner.vault,
      signer: cutSigner.signer,
      sinceCheckpoint: cutSigner.sinceCheckpoint,
      goodEnd: cutSigner.offset,
    });
    result.torn = { cut: size - cutSigner.offset };
  }
  return result;
}
