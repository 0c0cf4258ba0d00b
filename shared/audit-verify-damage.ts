// Naming the damage where the chain breaks. Each table lists, in order, the
// kinds of damage a break can be and, for the first one whose test holds,
// the verdict: its problem kind, the entry it is about, where it points and
// what it says.
import { basename } from 'node:path';
import { Entry, GENESIS_PREV, MAX_LINE_BYTES } from './audit-format';
import { LineRec, MarkRec, Parsed, Rec, parse } from './audit-verify-read';
import { Point, ProblemKind, Tally, Verdict, Where } from './audit-verify-types';

interface Damage<F> {
  when: (f: F) => boolean;
  kind: ProblemKind;
  seq: (f: F) => number | null;
  message: (f: F) => string;
  // The verdict is about X (the entry before the break) and points at it.
  aboutX?: true;
}

// The verdict of the first kind of damage that fits; the last row of every
// table fits anything.
function name<F extends { at: Where; x?: Point | null }>(table: Damage<F>[], f: F): Verdict {
  const d = table.find((row) => row.when(f)) as Damage<F>;
  const v: Verdict = { kind: d.kind, seq: d.seq(f), at: f.at, message: d.message(f) };
  if (d.aboutX) Object.assign(v, { at: (f.x as Point).rec, aboutX: true });
  return v;
}

const always = (): boolean => true;

export function where(r: { file: string; line: number }): string {
  return `${basename(r.file)} line ${r.line}`;
}

// Does q chain from the entry (seq, hash)?
export function linksFrom(seq: number, hash: string | null, q: Parsed | null): boolean {
  return q !== null && q.entry !== null && hash !== null && q.entry.seq === seq + 1 && q.entry.prev === hash;
}

export function complete(r: Rec | undefined): Parsed | null {
  return r && r.kind === 'line' && r.terminated ? parse(r) : null;
}

// How many hex digits differ: a prev that differs from the expected hash in
// a digit or two was edited itself; a changed predecessor hashes to
// something unrelated.
function hexDistance(a: string, b: string): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) d += 1;
  return d;
}

// ---------------------------------------------------------------------------
// The link from X to A is broken; B is the line after A.

interface Break {
  x: Point;
  a: LineRec;
  b: Rec | undefined;
  at: Where;
  e: number; // the seq A should have
  pa: Parsed;
  pb: Parsed | null;
  bFromX: boolean; // B chains from X
}
type EntryBreak = Break & { ae: Entry };

// A is not an entry at all.
const NOT_AN_ENTRY: Damage<Break>[] = [
  {
    when: (f) => f.bFromX,
    kind: 'inserted',
    seq: () => null,
    message: (f) => `${where(f.a)} is an extra line that is not an entry (${f.pa.why}); entry ${f.e} follows it`,
  },
  // One last line that is not an entry, within an entry's length, is what
  // a crash can leave (a write cut short, blocks never written): the
  // daemon cuts it at its next start, as it does part of a line.
  {
    when: (f) => f.b === undefined && f.a.bytes !== null,
    kind: 'torn_last_write',
    seq: (f) => f.e,
    message: (f) => `the last line (${where(f.a)}) is not an entry (${f.pa.why})`,
  },
  {
    when: always,
    kind: 'modified',
    seq: (f) => f.e,
    message: (f) => `entry ${f.e} (${where(f.a)}) no longer decodes: ${f.pa.why}`,
  },
];

// A second line chaining from X's predecessor: one of the two was added.
const twin = (f: EntryBreak): boolean => f.ae.seq === f.x.entry.seq && f.ae.prev === f.x.entry.prev;
// A's prev is wrong. If B chains from A, A is intact and X changed.
const xChanged = (f: EntryBreak): boolean =>
  f.pb ? linksFrom(f.e, f.pa.hash, f.pb) : hexDistance(f.ae.prev, f.x.hash) > 8;

// A is an entry that does not chain from X.
const MISLINKED: Damage<EntryBreak>[] = [
  // The file of segment n holds the start of another segment: a whole
  // segment removed and the later ones renumbered, or an earlier segment
  // copied over this one. Either way segment n's own entries are not there.
  {
    when: (f) =>
      f.a.first && f.a.seg > 0 && (f.ae.type === 'genesis' || (f.ae.type === 'segment' && f.ae.segment !== f.a.seg)),
    kind: 'missing_segment',
    seq: (f) => f.e,
    message: (f) =>
      `${basename(f.a.file)} begins segment ${f.ae.type === 'segment' ? f.ae.segment : 0} (entry ${f.ae.seq}), not segment ${f.a.seg}: the entries of segment ${f.a.seg}, from ${f.e}, are missing`,
  },
  {
    when: (f) => twin(f) && (f.a.bytes as Buffer).equals(f.x.rec.bytes as Buffer),
    kind: 'inserted',
    seq: (f) => f.ae.seq,
    message: (f) => `${where(f.a)} is a second copy of entry ${f.ae.seq}`,
  },
  {
    when: (f) => twin(f) && linksFrom(f.ae.seq, f.pa.hash, f.pb),
    kind: 'inserted',
    seq: (f) => f.ae.seq,
    aboutX: true,
    message: (f) =>
      `${where(f.x.rec)} is an extra entry claiming seq ${f.ae.seq}: the chain continues from ${where(f.a)}`,
  },
  {
    when: twin,
    kind: 'inserted',
    seq: (f) => f.ae.seq,
    message: (f) => `${where(f.a)} is an extra entry claiming seq ${f.ae.seq}`,
  },
  {
    when: (f) => f.bFromX && f.ae.seq > f.e,
    kind: 'reordered',
    seq: (f) => f.e,
    message: (f) => `entry ${f.ae.seq} (${where(f.a)}) comes before entry ${(f.pb?.entry as Entry).seq}`,
  },
  {
    when: (f) => f.bFromX,
    kind: 'inserted',
    seq: (f) => f.ae.seq,
    message: (f) => `${where(f.a)} is an extra entry claiming seq ${f.ae.seq}: entry ${f.e} follows it`,
  },
  {
    when: (f) => f.ae.seq === f.e && xChanged(f),
    kind: 'modified',
    seq: (f) => f.x.entry.seq,
    aboutX: true,
    message: (f) => `entry ${f.x.entry.seq} (${where(f.x.rec)}) was changed: entry ${f.e} names another hash for it`,
  },
  {
    when: (f) => f.ae.seq === f.e,
    kind: 'modified',
    seq: (f) => f.e,
    message: (f) =>
      `entry ${f.e} (${where(f.a)}) was changed: it does not name the hash of entry ${f.x.entry.seq}, and nothing chains from it`,
  },
  {
    when: (f) => f.ae.prev === f.x.hash,
    kind: 'modified',
    seq: (f) => f.e,
    message: (f) =>
      `entry ${f.e} (${where(f.a)}) was changed: it follows entry ${f.x.entry.seq} but claims seq ${f.ae.seq}`,
  },
  {
    when: (f) => f.ae.seq > f.e,
    kind: 'deleted',
    seq: (f) => f.e,
    message: (f) =>
      `${f.ae.seq - 1 === f.e ? `entry ${f.e} is` : `entries ${f.e} to ${f.ae.seq - 1} are`} missing: entry ${f.ae.seq} (${where(f.a)}) follows entry ${f.x.entry.seq}`,
  },
  {
    when: always,
    kind: 'modified',
    seq: (f) => f.e,
    message: (f) => `entry ${f.e} (${where(f.a)}) was replaced by a line claiming seq ${f.ae.seq}`,
  },
];

// The link from X to A is broken: say what happened, looking one line further (B).
export function classify(x: Point, a: LineRec, b: Rec | undefined): Verdict {
  const pa = parse(a);
  const pb = complete(b);
  const f: Break = {
    x,
    a,
    b,
    at: { file: a.file, line: a.line },
    e: x.entry.seq + 1,
    pa,
    pb,
    bFromX: linksFrom(x.entry.seq, x.hash, pb),
  };
  return pa.entry ? name(MISLINKED, { ...f, ae: pa.entry }) : name(NOT_AN_ENTRY, f);
}

// ---------------------------------------------------------------------------
// The journal's first line (A), which must be the genesis entry; B follows it.

interface Start {
  a: LineRec;
  at: Where;
  pa: Parsed;
  ae: Entry | null;
  pb: Parsed | null;
  be: Entry | null; // B's entry, when B is a complete line that decodes
}

function isValidGenesis(e: Entry | null): boolean {
  return e !== null && e.type === 'genesis' && e.seq === 1 && e.prev === GENESIS_PREV;
}

const BAD_START: Damage<Start>[] = [
  {
    when: (f) => isValidGenesis(f.be) && f.ae !== null && f.ae.seq === 2 && f.ae.prev === f.pb?.hash,
    kind: 'reordered',
    seq: () => 1,
    message: () => 'entry 2 comes before the genesis entry',
  },
  {
    when: (f) => isValidGenesis(f.be),
    kind: 'inserted',
    seq: (f) => (f.ae ? f.ae.seq : null),
    message: (f) => `${where(f.a)} is an extra line before the genesis entry`,
  },
  // Only the genesis entry is of type genesis: one with another seq or prev is that entry, changed.
  {
    when: (f) => f.ae?.type === 'genesis',
    kind: 'modified',
    seq: () => 1,
    message: (f) =>
      `the genesis entry was changed: it has seq ${(f.ae as Entry).seq} and prev ${(f.ae as Entry).prev.slice(0, 16)}…, not seq 1 and a prev of 64 zeros`,
  },
  {
    when: (f) => !f.ae && f.be?.seq === 2,
    kind: 'modified',
    seq: () => 1,
    message: (f) => `the genesis entry no longer decodes: ${f.pa.why}`,
  },
  // The journal starts later than entry 1: the first entries were removed.
  // A segment entry is rather a later segment given in place of segment 0.
  {
    when: (f) => f.ae !== null && f.ae.seq > 1 && f.ae.type !== 'segment',
    kind: 'deleted',
    seq: () => 1,
    message: (f) => {
      const seq = (f.ae as Entry).seq;
      const range = seq === 2 ? 'entry 1 (the genesis entry) is' : `entries 1 (the genesis entry) to ${seq - 1} are`;
      return `${range} missing: the first line (${where(f.a)}) is entry ${seq}`;
    },
  },
  {
    when: always,
    kind: 'not_a_journal',
    seq: () => null,
    message: (f) => {
      const what = !f.ae
        ? `not a journal entry (${f.pa.why})`
        : f.ae.type === 'segment'
          ? `the start of segment ${f.ae.segment} (entry ${f.ae.seq}), not the genesis entry of segment 0`
          : `a ${f.ae.type} entry with seq ${f.ae.seq}, not the genesis entry`;
      return `the first line of ${f.a.file} is ${what}`;
    },
  },
];

// The journal's first line: null when it is the genesis entry.
export function classifyFirst(a: LineRec, b: Rec | undefined): Verdict | null {
  const pa = parse(a);
  if (isValidGenesis(pa.entry)) return null;
  const pb = complete(b);
  return name(BAD_START, { a, at: { file: a.file, line: a.line }, pa, ae: pa.entry, pb, be: pb?.entry ?? null });
}

// ---------------------------------------------------------------------------
// A line without its "\n" (A), after X (null: no entry yet).

interface CutShort {
  a: LineRec;
  at: Where;
  x: Point | null;
  more: boolean; // later segments follow
}

const CUT_SHORT: Damage<CutShort>[] = [
  {
    when: (f) => f.x === null,
    kind: 'not_a_journal',
    seq: () => null,
    message: (f) => `${f.a.file} holds no complete line`,
  },
  {
    when: (f) => f.more,
    kind: 'modified',
    seq: (f) => (f.x as Point).entry.seq + 1,
    message: (f) =>
      `${basename(f.a.file)} ends in the middle of a line (line ${f.a.line}) although later segments follow`,
  },
  // A write cut short leaves part of one entry, never more than an entry's length.
  {
    when: (f) => f.a.bytes === null,
    kind: 'modified',
    seq: (f) => (f.x as Point).entry.seq + 1,
    message: (f) =>
      f.a.unreadPast !== undefined
        ? `the file goes on past ${f.a.unreadPast} bytes, longer than any segment postern writes, and was not read further (its last line read, ${where(f.a)}, may be cut there): not a write cut short`
        : `the last line (${where(f.a)}) is incomplete and longer than ${MAX_LINE_BYTES} bytes: not a write cut short`,
  },
  {
    when: always,
    kind: 'torn_last_write',
    seq: (f) => (f.x as Point).entry.seq + 1,
    message: (f) => `the last line (${where(f.a)}) is incomplete`,
  },
];

export function cutShort(a: LineRec, x: Point | null, more: boolean): Verdict {
  return name(CUT_SHORT, { a, at: a, x, more });
}

// ---------------------------------------------------------------------------
// A segment file that holds no line: empty, missing, or not a regular file.

interface Mark {
  m: MarkRec;
  at: Where;
  next: number | null; // the seq the segment should go on with
  more: boolean; // later segments follow
}

const NO_LINES: Damage<Mark>[] = [
  {
    when: (f) => f.m.kind === 'unreadable' && f.m.seg === 0,
    kind: 'not_a_journal',
    seq: () => null,
    message: (f) => `${f.m.file} ${f.m.detail}`,
  },
  {
    when: (f) => f.m.kind === 'unreadable',
    kind: 'missing_segment',
    seq: (f) => f.next,
    message: (f) => `segment ${f.m.seg} (${f.m.file}) ${f.m.detail}`,
  },
  {
    when: (f) => f.m.seg === 0,
    kind: 'not_a_journal',
    seq: () => null,
    message: (f) => `${f.m.file} is empty`,
  },
  {
    when: (f) => f.m.kind === 'gap',
    kind: 'missing_segment',
    seq: (f) => f.next,
    message: (f) => `segment ${f.m.seg} (${f.m.file}) ${f.m.detail}`,
  },
  {
    when: (f) => f.more,
    kind: 'missing_segment',
    seq: (f) => f.next,
    message: (f) => `segment ${f.m.seg} (${f.m.file}) is empty although later segments follow`,
  },
  {
    when: always,
    kind: 'torn_last_write',
    seq: (f) => f.next,
    message: (f) => `the last segment ${f.m.file} is empty: the daemon stopped while starting it`,
  },
];

export function markVerdict(m: MarkRec, x: Point | null, more: boolean): Verdict {
  return name(NO_LINES, { m, at: { file: m.file, line: 0 }, next: x ? x.entry.seq + 1 : null, more });
}

// X has a problem of its own and A does not chain from it. X's bytes are
// the ones that were chained when the line after A chains from X (A was put
// in between); with no entry after X (a torn last write, a missing segment)
// X's own problem stands; otherwise nothing vouches for X's bytes, and the
// first thing wrong is that X was changed.
export function unconfirmed(
  own: Verdict,
  c: Verdict,
  x: Point,
  a: LineRec,
  b: Rec | undefined,
  passed: Tally,
): Verdict {
  if (c.kind === 'torn_last_write' || c.kind === 'missing_segment' || linksFrom(x.entry.seq, x.hash, complete(b)))
    return own;
  return {
    kind: 'modified',
    seq: x.entry.seq,
    at: x.rec,
    passed,
    message: `entry ${x.entry.seq} (${where(x.rec)}) was changed: ${own.message}, and ${where(a)} after it does not chain from it`,
  };
}
