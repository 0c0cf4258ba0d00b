// The checks on each entry that chains: the genesis entry, segment and key
// entries, checkpoint signatures and the signing keys they use, and, after
// the last entry, the pinned key, the expected head and the unsigned tail.
import { basename } from 'node:path';
import { CheckpointEntry, Entry, checkpointMessage } from './audit-format';
import { where } from './audit-verify-damage';
import { LineRec, parse } from './audit-verify-read';
import { Point, Tally, Verdict } from './audit-verify-types';
import { ed25519Verify } from './crypto';

export class Verifier {
  entries = 0;
  checkpoints = 0;
  lastCheckpointSeq = 0;
  signedThrough: number | null = null;
  x: Point | null = null;
  pending: Verdict | null = null; // a problem of X itself, reported once its successor confirms X's bytes
  journalId = '';
  // The signing key in force, and a change to another key waiting for the
  // checkpoint by this one that vouches for it.
  current = '';
  changing: { key: string; seq: number; at: { file: string; line: number }; before: Tally } | null = null;
  keys: { key: string; since: number }[] = [];
  // A checkpoint signed by the pinned key was seen (it vouches for every
  // entry before it, whichever keys signed them).
  pinnedSigned = false;
  expectSeen: string | null = null;
  firstUnsigned = { file: '', line: 0 }; // where the entries after the last checkpoint begin
  vault: { generation: number; seq: number } | null = null; // the highest vault generation recorded so far

  constructor(
    private readonly pinned: string | null,
    private readonly expect: { seq: number; hash: string } | null,
  ) {}

  beforeX: Tally = this.tally();

  tally(): Tally {
    return {
      entries: this.entries,
      checkpoints: this.checkpoints,
      lastCheckpointSeq: this.lastCheckpointSeq,
      signedThrough: this.signedThrough,
      keys: this.keys.length,
      x: this.x,
    };
  }

  // A record that chains (or the genesis): count it and note what is wrong with it, if anything.
  accept(rec: LineRec): void {
    this.beforeX = this.tally();
    const p = parse(rec);
    const entry = p.entry as Entry;
    this.x = { rec, entry, hash: p.hash as string };
    this.entries += 1;
    if (entry.seq === this.lastCheckpointSeq + 1) this.firstUnsigned = { file: rec.file, line: rec.line };
    if (this.expect && entry.seq === this.expect.seq) this.expectSeen = p.hash;
    const problem = this.problemOf(rec, entry);
    if (problem) problem.passed ??= this.beforeX;
    this.pending = problem;
  }

  private problemOf(rec: LineRec, entry: Entry): Verdict | null {
    const at = rec; // a LineRec names its file and line
    const seq = entry.seq;
    if (entry.type === 'genesis') {
      if (seq !== 1)
        return { kind: 'inserted', seq, at, message: `entry ${seq} (${where(rec)}) is a second genesis entry` };
      this.journalId = entry.journal_id;
      this.current = entry.sign_pub;
      this.keys = [{ key: entry.sign_pub, since: 1 }];
      this.genesisAt = at;
      return null;
    }
    const changing = this.changing;
    if (changing && entry.type !== 'checkpoint') {
      return {
        kind: 'unsigned_rotation',
        seq: changing.seq,
        at: changing.at,
        passed: changing.before,
        message: `entry ${changing.seq} changes the signing key to ${changing.key}, but entry ${seq} (${where(rec)}) after it is not a checkpoint signed by the key it replaces (${this.current})`,
      };
    }
    if (rec.first && rec.seg > 0) {
      if (entry.type !== 'segment' || entry.segment !== rec.seg) {
        return {
          kind: 'missing_segment',
          seq,
          at,
          message: `${basename(rec.file)} does not begin with the entry of segment ${rec.seg}`,
        };
      }
      return null;
    }
    if (entry.type === 'segment')
      return { kind: 'inserted', seq, at, message: `entry ${seq} (${where(rec)}) is a segment entry inside a segment` };
    // Events name their key entry by its seq; a key entry naming another seq was not written so.
    if (entry.type === 'key' && entry.key_id !== seq)
      return {
        kind: 'modified',
        seq,
        at,
        message: `key entry ${seq} (${where(rec)}) has key_id ${entry.key_id}: a key entry's key_id is its own seq`,
      };
    if (entry.type === 'vault') {
      const before = this.vault;
      if (before && entry.generation < before.generation)
        return {
          kind: 'modified',
          seq,
          at,
          message: `vault entry ${seq} (${where(rec)}) records generation ${entry.generation} after entry ${before.seq} recorded generation ${before.generation}: a vault's generation never goes down (an older vault let back in)`,
        };
      this.vault = { generation: entry.generation, seq };
    }
    if (entry.type === 'checkpoint') return this.checkpointProblem(entry, at);
    if (entry.type === 'signer')
      this.changing = { key: entry.sign_pub, seq, at: { file: rec.file, line: rec.line }, before: this.beforeX };
    return null;
  }

  genesisAt: { file: string; line: number } = { file: '', line: 0 };

  private checkpointProblem(c: CheckpointEntry, at: { file: string; line: number }): Verdict | null {
    const seq = c.seq;
    if (c.head_seq !== seq - 1 || c.head !== c.prev) {
      return {
        kind: 'bad_signature',
        seq,
        at,
        message: `checkpoint ${seq} signs head ${c.head_seq}:${c.head.slice(0, 16)}… but follows entry ${seq - 1}:${c.prev.slice(0, 16)}…`,
      };
    }
    const msg = checkpointMessage(this.journalId, c.head_seq, c.head);
    if (!ed25519Verify(Buffer.from(c.sig, 'base64'), msg, Buffer.from(c.sign_pub, 'base64'))) {
      return {
        kind: 'bad_signature',
        seq,
        at,
        message: `checkpoint ${seq}'s signature does not verify under the key it names`,
      };
    }
    if (this.changing && c.sign_pub !== this.current) {
      return {
        kind: 'unsigned_rotation',
        seq: this.changing.seq,
        at: this.changing.at,
        passed: this.changing.before,
        message: `entry ${this.changing.seq} changes the signing key to ${this.changing.key}, but checkpoint ${seq} after it is signed by ${c.sign_pub}, not by the key it replaces (${this.current})`,
      };
    }
    if (c.sign_pub !== this.current) {
      const retired = this.keys.some((k) => k.key === c.sign_pub);
      const inForce =
        this.keys.length > 1
          ? `the key in force since entry ${(this.keys[this.keys.length - 1] as { since: number }).since}`
          : "the genesis entry's key";
      return {
        kind: 'wrong_key',
        seq,
        at,
        message: `checkpoint ${seq} is signed by ${retired ? 'the retired key ' : ''}${c.sign_pub}, not by ${inForce} ${this.current}`,
      };
    }
    if (c.sign_pub === this.pinned) this.pinnedSigned = true;
    if (this.changing) {
      this.current = this.changing.key;
      this.keys.push({ key: this.changing.key, since: this.changing.seq });
      this.changing = null;
    }
    this.checkpoints += 1;
    this.lastCheckpointSeq = seq;
    this.signedThrough = c.head_seq;
    return null;
  }

  // After the last record.
  finish(allowUnsignedTail: boolean): Verdict | null {
    const x = this.x as Point;
    if (this.pending) return this.pending;
    const at = { file: x.rec.file, line: x.rec.line };
    const head = x.entry.seq;
    if (this.pinned && !this.pinnedSigned && this.keys[0]?.key !== this.pinned) {
      const named = this.keys.find((k) => k.key === this.pinned);
      const message = named
        ? `the journal changes to the pinned key ${this.pinned} at entry ${named.since}, but no checkpoint signed by it follows, and its genesis entry names another key (${this.keys[0]?.key})`
        : `the genesis entry names signing key ${this.keys[0]?.key}, not the pinned key ${this.pinned}, and the journal never changes to the pinned key`;
      return { kind: 'wrong_key', seq: 1, at: this.genesisAt, message };
    }
    if (this.expect) {
      if (head < this.expect.seq) {
        return {
          kind: 'behind_expected_head',
          seq: head + 1,
          at,
          message: `the journal ends at entry ${head}, before the expected head ${this.expect.seq}: entries ${head + 1} to ${this.expect.seq} are missing`,
        };
      }
      if (this.expectSeen !== this.expect.hash) {
        return {
          kind: 'behind_expected_head',
          seq: this.expect.seq,
          at,
          message: `entry ${this.expect.seq} hashes to ${this.expectSeen}, not to the expected ${this.expect.hash}`,
        };
      }
    }
    if (head > this.lastCheckpointSeq && !allowUnsignedTail) {
      const from = this.lastCheckpointSeq + 1;
      const after =
        this.lastCheckpointSeq === 0
          ? 'no checkpoint signs any entry'
          : `they follow the last checkpoint (entry ${this.lastCheckpointSeq})`;
      return {
        kind: 'unsigned_tail',
        seq: from,
        at: this.firstUnsigned,
        message: `entries ${from} to ${head} are not signed yet: ${after}`,
      };
    }
    return null;
  }
}
