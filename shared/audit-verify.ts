// Offline verification of the audit journal (SPEC §9, docs/audit-format.md):
// the hash chain across every segment, the checkpoint signatures, the key
// that made them, and the expected head. Streams the files with bounded
// memory (audit-verify-read.ts) and stops at the first problem, which it
// names with the entry number and the kind of damage
// (audit-verify-damage.ts, audit-verify-check.ts).
import { sodiumReady } from './audit-format';
import { Verifier } from './audit-verify-check';
import { classify, classifyFirst, cutShort, linksFrom, markVerdict, unconfirmed } from './audit-verify-damage';
import { JournalLines, parse, resolveJournalPath, setUpLineHash } from './audit-verify-read';
import { makeReport } from './audit-verify-report';
import { Verdict, VerifyOptions, VerifyReport } from './audit-verify-types';
import { Refusal } from './errors';

export { PROBLEM_KINDS } from './audit-verify-types';
export type { ProblemKind, VerifyOptions, VerifyProblem, VerifyReport } from './audit-verify-types';
export { DEFAULT_JOURNAL_NAME, journalLines, resolveJournalPath } from './audit-verify-read';
export type { JournalLine } from './audit-verify-read';
export { journalHead } from './audit-verify-head';
export type { JournalHead } from './audit-verify-head';

// The pinned key as `postern init` prints it: canonical base64 of 32 bytes.
export function parsePubkey(text: string): Buffer | null {
  const raw = Buffer.from(text, 'base64');
  return raw.length === 32 && raw.toString('base64') === text ? raw : null;
}

export async function verifyJournal(path: string, opts: VerifyOptions = {}): Promise<VerifyReport> {
  let pinned: string | null = null;
  if (opts.pubkey !== undefined) {
    const raw = parsePubkey(opts.pubkey);
    if (!raw)
      throw new Refusal(
        'bad_request',
        'the pinned key must be the 32-byte Ed25519 public key in base64 that `postern init` printed',
      );
    pinned = raw.toString('base64');
  }
  const expect = opts.expectHead ?? null;
  if (expect && (!Number.isSafeInteger(expect.seq) || expect.seq < 1 || !/^[0-9a-f]{64}$/.test(expect.hash))) {
    throw new Refusal(
      'bad_request',
      'the expected head must be SEQ:HASH with SEQ ≥ 1 and HASH 64 lower-case hex digits, as `postern audit head` prints it',
    );
  }
  setUpLineHash(await sodiumReady());
  const base = resolveJournalPath(path);
  const src = new JournalLines(base);
  const v = new Verifier(pinned, expect);
  let verdict: Verdict | null = null;
  try {
    verdict = await run(src, v, base, Boolean(opts.allowUnsignedTail));
  } finally {
    await src.close();
  }
  // An entry the problem is about did not pass, even if the chain went past it.
  return makeReport(verdict, verdict?.passed ?? v.tally(), {
    segments: src.segments,
    keyPinned: pinned !== null,
    signingKeys: v.keys,
  });
}

// Walks the records with a window: X, the last entry that chained, and A,
// the record after it, with one more (B) to look ahead.
async function run(src: JournalLines, v: Verifier, base: string, allowUnsignedTail: boolean): Promise<Verdict | null> {
  for (;;) {
    // A and one line of lookahead; mostly already queued.
    if (src.length < 2) await src.ensure(2);
    const a = src.peek(0);
    const x = v.x;
    if (!a) {
      if (!x)
        return { kind: 'not_a_journal', seq: null, at: { file: base, line: 0 }, message: `${base} holds no entry` };
      return v.finish(allowUnsignedTail);
    }
    if (a.kind !== 'line') return v.pending ?? markVerdict(a, x, src.peek(1) !== undefined);
    if (!a.terminated) return v.pending ?? cutShort(a, x, src.peek(1) !== undefined);
    if (!x) {
      const first = classifyFirst(a, src.peek(1));
      if (first) return first;
      v.accept(a);
    } else if (linksFrom(x.entry.seq, x.hash, parse(a))) {
      if (v.pending) return v.pending;
      v.accept(a);
    } else {
      const c = classify(x, a, src.peek(1));
      if (c.aboutX) return { ...c, passed: v.beforeX };
      return v.pending ? unconfirmed(v.pending, c, x, a, src.peek(1), v.beforeX) : c;
    }
    src.shift();
  }
}
