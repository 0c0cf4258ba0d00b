// What `postern audit verify` reports, and the verdicts it reaches on the way.
import { Entry } from './audit-format';
import type { LineRec } from './audit-verify-read';

export interface VerifyOptions {
  pubkey?: string; // base64 Ed25519 public key, as `postern init` prints it
  expectHead?: { seq: number; hash: string };
  allowUnsignedTail?: boolean;
}

// Every verdict `audit verify` can give, in the order docs/audit-format.md lists them.
export const PROBLEM_KINDS = [
  'modified',
  'inserted',
  'deleted',
  'reordered',
  'bad_signature',
  'wrong_key',
  'unsigned_rotation',
  'unsigned_tail',
  'behind_expected_head',
  'torn_last_write',
  'not_a_journal',
  'missing_segment',
] as const;
export type ProblemKind = (typeof PROBLEM_KINDS)[number];

export interface VerifyProblem {
  seq: number | null;
  kind: ProblemKind;
  message: string;
  file: string;
  line: number;
}

export interface VerifyReport {
  ok: boolean;
  entries: number;
  checkpoints: number;
  segments: number;
  head: { seq: number; hash: string } | null;
  keyPinned: boolean;
  // The audit signing keys in the order they took over: the genesis key
  // from entry 1, then each key a `signer` entry named, from that entry.
  signingKeys: { key: string; since: number }[];
  signedThrough: number | null;
  unsignedTail: number;
  problem: VerifyProblem | null;
}

// A place in the journal: a file and a 1-based line (0: the file itself).
export interface Where {
  file: string;
  line: number;
}

// A line and the entry it decodes to, as the chain reached it.
export interface Point {
  rec: LineRec;
  entry: Entry;
  hash: string;
}

export interface Verdict {
  kind: ProblemKind;
  seq: number | null;
  message: string;
  at: Where;
  // The verdict is about the entry before the window (X) itself, so it
  // replaces a deferred problem of that entry.
  aboutX?: boolean;
  // What the report counts when the problem is about an entry already
  // counted: the tally as it stood before that entry.
  passed?: Tally;
}

// The report's counts: the entries that passed, up to the last of them (the head).
export interface Tally {
  entries: number;
  checkpoints: number;
  lastCheckpointSeq: number;
  signedThrough: number | null;
  keys: number; // how many signing keys had taken over
  x: Point | null;
}
