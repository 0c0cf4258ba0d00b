// The report of `postern audit verify`: the counts of what passed and the
// problem found, with the advice for its kind.
import { ProblemKind, Tally, Verdict, VerifyReport } from './audit-verify-types';

const ADVICE: Record<ProblemKind, string> = {
  modified: 'the journal was altered after it was written; keep this copy as evidence and compare it with a backup',
  inserted: 'a line was added that the daemon did not write; keep this copy as evidence and compare it with a backup',
  deleted: 'entries were removed; keep this copy as evidence and compare it with a backup',
  reordered: 'entries were moved; keep this copy as evidence and compare it with a backup',
  bad_signature: 'a checkpoint was forged or altered; keep this copy as evidence',
  wrong_key:
    'check --pubkey against the key `postern init` printed (or the one `postern audit rotate-key` printed); otherwise this journal belongs to another vault or was re-signed',
  unsigned_rotation: 'a change of signing key was not vouched for by the key it replaces; keep this copy as evidence',
  unsigned_tail:
    'a daemon unlocked since it started signs them within a second (or at its next checkpoint while unlocked); if it has not been, unlock it, then verify again; or pass --allow-unsigned-tail to accept the tail',
  behind_expected_head: 'the journal was cut back or replaced since that head was noted; compare it with a backup',
  torn_last_write:
    'a write was cut short (crash or full disk): start the daemon once, it cuts the torn line and records a repair entry',
  not_a_journal: 'give the journal file (segment 0, or its directory) with --log',
  missing_segment: 'a segment file of the journal is missing; restore it from a backup',
};

// `t`: the counts when the journal passed, or those the verdict names (an
// entry the problem is about did not pass, even if the chain went past it).
export function makeReport(
  verdict: Verdict | null,
  t: Tally,
  read: { segments: number; keyPinned: boolean; signingKeys: { key: string; since: number }[] },
): VerifyReport {
  const x = t.x;
  return {
    ok: verdict === null,
    entries: t.entries,
    checkpoints: t.checkpoints,
    segments: read.segments,
    head: x ? { seq: x.entry.seq, hash: x.hash } : null,
    keyPinned: read.keyPinned,
    signingKeys: read.signingKeys.slice(0, t.keys),
    signedThrough: t.signedThrough,
    unsignedTail: x ? x.entry.seq - t.lastCheckpointSeq : 0,
    problem: verdict && {
      seq: verdict.seq,
      kind: verdict.kind,
      message: `${verdict.message}; ${ADVICE[verdict.kind]}`,
      file: verdict.at.file,
      line: verdict.at.line,
    },
  };
}
