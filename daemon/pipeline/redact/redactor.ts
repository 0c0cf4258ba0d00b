// The redactor of one response (see ../redact.ts): the forms of its needles,
// indexed for the scan, and the scan that finds every occurrence in a body.
import {
  AMPERSAND,
  BACKSLASH,
  MIN_FORM,
  PERCENT,
  PLUS,
  SPACE,
  ascii,
  formsOf,
  otherCase,
  wipeForm,
  type Radix,
} from './forms';
import {
  ESCAPE_START,
  FIRST_TWO,
  MAX_INDENT,
  MAX_REF_DIGITS,
  NEXT,
  NONE,
  RAW_START,
  candidates,
  compile,
  inSet,
  matchAt,
  type Compiled,
} from './match';

// Needles shorter than this are not searched: they would match by chance.
export const MIN_NEEDLE = 4;
// The longest escape of one byte: &#x + MAX_REF_DIGITS digits + ";". Every
// other escape is shorter per byte it stands for.
const MAX_ESCAPE = 3 + MAX_REF_DIGITS + 1;
// The longest line break inside a wrapped form: JSON's \r\n, then the
// next line's indentation.
const MAX_LINE_BREAK = 4 + MAX_INDENT;

// The bytes that start an escape, and what may follow each in one.
const ESCAPE_STARTS: [number, Uint8Array][] = [
  [PERCENT, flags('0123456789abcdefABCDEF')],
  [BACKSLASH, flags('"\\/uUxX')],
  [AMPERSAND, flags('#algq')],
];

function flags(chars: string): Uint8Array {
  const out = new Uint8Array(256);
  for (const c of ascii(chars)) out[c] = 1;
  return out;
}

// Bytes that may stand for an element other than themselves: what starts
// an escape or a line break, and "+" for a space. Pairs holding them are
// let through whatever else they hold.
const OTHER_STARTS = [PERCENT, BACKSLASH, AMPERSAND, PLUS, 0x0a, 0x0d];

export interface Redactor {
  label: string;
  // Longest text one occurrence can take in the response: what must be read
  // beyond the cap so an occurrence that straddles it is still found.
  maxMatchLength: number;
  // Forms by the first byte they may start with (every member of a leading
  // set, both cases for any-case forms), longest first; and those starting
  // with a character above ASCII, which may be written as a code point.
  byFirst: Compiled[][];
  unicodeFirst: Compiled[];
  // 65536 entries of the flags above. One look-up at most positions keeps
  // the scan fast, and looking at three bytes keeps the forms that start
  // with an edge set (up to 32 first bytes each) from being tried at most
  // positions of ordinary text.
  pairs: Uint8Array;
  // A join of several credentials' redactors: the mark of the one whose
  // value the occurrence [start, end) of `data` is (absent: markOf).
  markFor?: (data: Uint8Array, start: number, end: number) => Buffer;
  wipe(): void;
}

// The raw bytes element j of a form may be written as.
function rawBytes(f: Compiled, j: number): number[] {
  if (f.known && f.known[j] !== 0) {
    return (f.radix as Radix).chars.filter((c) => inSet(f, j, c));
  }
  const b = f.bytes[j] as number;
  return f.anyCase && otherCase(b) !== b ? [b, otherCase(b)] : [b];
}

function flagPairs(pairs: Uint8Array, firsts: number[], seconds: number[], flag: number): void {
  for (const a of firsts) {
    for (const b of seconds) pairs[(a << 8) | b] = (pairs[(a << 8) | b] as number) | flag;
  }
}

const ALL_BYTES = Array.from({ length: 256 }, (_, b) => b);
// The pairs any occurrence may hold as its second and third bytes.
const ALWAYS_NEXT = new Uint8Array(65536);
flagPairs(ALWAYS_NEXT, OTHER_STARTS, ALL_BYTES, NEXT);
flagPairs(ALWAYS_NEXT, ALL_BYTES, OTHER_STARTS, NEXT);

function pairTable(forms: Compiled[], spaceForms: boolean): Uint8Array {
  const pairs = new Uint8Array(ALWAYS_NEXT);
  for (const f of forms) {
    const second = rawBytes(f, 1);
    flagPairs(pairs, rawBytes(f, 0), [...second, ...OTHER_STARTS], RAW_START);
    flagPairs(pairs, rawBytes(f, 0), second, FIRST_TWO);
    flagPairs(pairs, second, rawBytes(f, 2), NEXT);
  }
  for (const [b, next] of ESCAPE_STARTS) {
    const starting = [...next.keys()].filter((c) => next[c] === 1 || (pairs[(b << 8) | c] as number) & RAW_START);
    flagPairs(pairs, [b], starting, ESCAPE_START);
  }
  if (spaceForms) flagPairs(pairs, [PLUS], ALL_BYTES, ESCAPE_START);
  return pairs;
}

// Null when there is nothing to search for (needles too short). The needles
// are copied; the caller wipes its own, and calls wipe() on this when the
// response is done.
export function buildRedactor(needles: Buffer[], label: string): Redactor | null {
  const forms: Compiled[] = [];
  const searched: Buffer[] = [];
  for (const n of needles) {
    // The injected value may be the secret itself (the query form).
    if (n.length < MIN_NEEDLE || searched.some((m) => m.equals(n))) continue;
    searched.push(n);
    for (const form of formsOf(n)) forms.push(compile(form));
  }
  if (forms.length === 0) return null;
  forms.sort((a, b) => b.bytes.length - a.bytes.length);
  const byFirst: Compiled[][] = new Array<Compiled[]>(256).fill(NONE);
  const unicodeFirst: Compiled[] = [];
  for (const f of forms) {
    for (const b of rawBytes(f, 0)) {
      if (byFirst[b] === NONE) byFirst[b] = [];
      (byFirst[b] as Compiled[]).push(f);
    }
    if (f.codePoints && (f.codePoints[0] as number) > 0x7f) unicodeFirst.push(f);
  }
  const pairs = pairTable(forms, (byFirst[SPACE] as Compiled[]).length > 0);
  return {
    label,
    // Each element at most one escape, and in a wrapped form a line break.
    maxMatchLength: Math.max(...forms.map((f) => f.bytes.length * (f.wrap ? MAX_ESCAPE + MAX_LINE_BREAK : MAX_ESCAPE))),
    byFirst,
    unicodeFirst,
    pairs,
    wipe() {
      for (const f of forms) {
        wipeForm(f);
        f.codePoints?.fill(0);
        f.charLengths?.fill(0);
      }
      byFirst.fill(NONE);
      unicodeFirst.length = 0;
      pairs.fill(0);
    },
  };
}

// One redactor that finds the needles of all `parts` (their forms shared,
// not built again: a credential's cached redactor with one made for a
// request alone, or the redactors of several credentials), marking what it
// finds `[REDACTED:<label>]`, or, `byPart`, with the label of the part
// whose value an occurrence is (the first that matches it whole). The pair
// table of a union of forms is the union of the tables. wipe() clears the
// join's own tables and `owned`, never the other parts, which their cache
// wipes.
export function joinRedactors(
  parts: Redactor[],
  label: string,
  owned: Redactor | null = null,
  byPart = false,
): Redactor {
  const longestFirst = (x: Compiled, y: Compiled): number => y.bytes.length - x.bytes.length;
  const byFirst = new Array<Compiled[]>(256).fill(NONE).map((_, b) => {
    const all = parts.flatMap((r) => r.byFirst[b] as Compiled[]);
    return all.length === 0 ? NONE : all.sort(longestFirst);
  });
  const unicodeFirst = parts.flatMap((r) => r.unicodeFirst).sort(longestFirst);
  const pairs = new Uint8Array(65536);
  const words = new Uint32Array(pairs.buffer);
  for (const r of parts) {
    const theirs = new Uint32Array(r.pairs.buffer, r.pairs.byteOffset, words.length);
    for (let i = 0; i < words.length; i++) words[i] = (words[i] as number) | (theirs[i] as number);
  }
  const markFor = (data: Uint8Array, start: number, end: number): Buffer =>
    markOf(parts.find((r) => longestAt(r, data, start) === end) ?? joined);
  const joined: Redactor = {
    label,
    maxMatchLength: Math.max(...parts.map((r) => r.maxMatchLength)),
    byFirst,
    unicodeFirst,
    pairs,
    ...(byPart ? { markFor } : {}),
    wipe() {
      owned?.wipe();
      byFirst.fill(NONE);
      unicodeFirst.length = 0;
      pairs.fill(0);
    },
  };
  return joined;
}

// The mark that replaces an occurrence, made only when one is found.
export function markOf(r: Redactor): Buffer {
  return Buffer.from(`[REDACTED:${r.label}]`);
}

// Occurrences as [start, end) byte ranges, in order, not overlapping; at
// each position the longest match wins (forms with edges match more or
// less of their optional part).
export function findAll(r: Redactor, data: Buffer): [number, number][] {
  // Every element takes at least a byte: no occurrence starts later (and
  // the next two bytes are always there).
  return scanFrom(r, data, 0, data.length - MIN_FORM + 1).found;
}

// Whether the scan stops at i to try the forms: the look-up of i's pair,
// and for a raw start the next pair (reads i, i + 1 and i + 2).
export function mayStartAt(pairs: Uint8Array, data: Uint8Array, i: number): boolean {
  const b = data[i + 1] as number;
  const here = pairs[((data[i] as number) << 8) | b] as number;
  return (
    (here & ESCAPE_START) !== 0 ||
    ((here & RAW_START) !== 0 && ((pairs[(b << 8) | (data[i + 2] as number)] as number) & NEXT) !== 0)
  );
}

// Where the longest occurrence that starts at i ends, or -1.
export function longestAt(r: Redactor, data: Uint8Array, i: number): number {
  let end = -1;
  for (const f of candidates(r, data, i)) end = Math.max(end, matchAt(f, data, i));
  return end;
}

// The scan of findAll over the start positions [from, until): what it
// found, and the first position it has not decided (past `until` when an
// occurrence that starts before it ends beyond). A match reads nothing
// before its start and at most maxMatchLength bytes from it, so a position
// with that many bytes after it in `data` is decided as the whole body
// would decide it: the streaming scanner relies on this.
export function scanFrom(
  r: Redactor,
  data: Uint8Array,
  from: number,
  until: number,
): { found: [number, number][]; next: number } {
  const found: [number, number][] = [];
  const { pairs } = r;
  const n = until;
  let i = from;
  while (i < n) {
    // mayStartAt, written out: this loop runs once per byte of the body.
    for (; i < n; i++) {
      const b = data[i + 1] as number;
      const here = pairs[((data[i] as number) << 8) | b] as number;
      if (here & ESCAPE_START || (here & RAW_START && (pairs[(b << 8) | (data[i + 2] as number)] as number) & NEXT))
        break;
    }
    if (i >= n) break;
    const end = longestAt(r, data, i);
    if (end > i) {
      found.push([i, end]);
      i = end;
    } else {
      i += 1;
    }
  }
  return { found, next: i };
}
