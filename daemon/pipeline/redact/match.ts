// Matching one form at one position of a body (see ../redact.ts): each
// byte raw or written as an escape, a line break inside a wrapped form, and
// the look-ups that say which forms are worth trying at a position.
import { AMPERSAND, BACKSLASH, PERCENT, PLUS, SPACE, ascii, foldCase, utf8At, type Form, type Radix } from './forms';
import type { Redactor } from './redactor';

// HTML references with more digits than this are not read. Enough for any
// code point (7 decimal, 6 hex digits) and a few leading zeros; the bound
// keeps maxMatchLength finite.
export const MAX_REF_DIGITS = 8;

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

function hexPair(data: Uint8Array, at: number): number {
  const hi = hexValue(data[at]);
  const lo = hexValue(data[at + 1]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

function hexQuad(data: Uint8Array, at: number): number {
  const a = hexPair(data, at);
  const b = hexPair(data, at + 2);
  return a < 0 || b < 0 ? -1 : a * 256 + b;
}

// Where the escape last read ends: a second result of readEscape and
// readHtmlRef, kept here so the hot path allocates nothing.
let escapeEnd = 0;

// An HTML numeric reference at p (&#NN; or &#xNN;): its code point, or -1.
function readHtmlRef(data: Uint8Array, p: number): number {
  if (data[p] !== AMPERSAND || data[p + 1] !== 0x23) return -1;
  let q = p + 2;
  const radix = ((data[q] as number) | 0x20) === 0x78 ? 16 : 10;
  if (radix === 16) q += 1;
  let v = 0;
  let digits = 0;
  for (;;) {
    const d = hexValue(data[q]);
    if (d < 0 || d >= radix) break;
    if (++digits > MAX_REF_DIGITS) return -1;
    v = v * radix + d;
    q += 1;
  }
  if (digits === 0 || data[q] !== 0x3b || v > 0x10ffff) return -1;
  escapeEnd = q + 1;
  return v;
}

// The named references for the characters HTML escapers rewrite.
const NAMED_REFS: [Uint8Array, number][] = [
  [ascii('&amp;'), AMPERSAND],
  [ascii('&lt;'), 0x3c],
  [ascii('&gt;'), 0x3e],
  [ascii('&quot;'), 0x22],
  [ascii('&apos;'), 0x27],
];

function bytesAt(data: Uint8Array, p: number, name: Uint8Array): boolean {
  for (let k = 0; k < name.length; k++) if (data[p + k] !== name[k]) return false;
  return true;
}

function readNamedRef(data: Uint8Array, p: number): number {
  for (const [name, value] of NAMED_REFS) {
    if (bytesAt(data, p, name)) {
      escapeEnd = p + name.length;
      return value;
    }
  }
  return -1;
}

// One byte written as an escape at p: its value (below 0x80 except for %XX
// and \xXX, which write bytes), or -1; escapeEnd tells where it ends.
// "%25XX" reads as the double-encoded byte XX; a form that wants "%" tries
// the single reading itself.
function readEscape(data: Uint8Array, p: number): number {
  const c = data[p];
  if (c === PERCENT) {
    const v = hexPair(data, p + 1);
    if (v < 0) return -1;
    const inner = v === PERCENT ? hexPair(data, p + 3) : -1;
    escapeEnd = inner >= 0 ? p + 5 : p + 3;
    return inner >= 0 ? inner : v;
  }
  if (c === BACKSLASH) {
    const n = data[p + 1];
    if (n === 0x22 || n === BACKSLASH || n === 0x2f) {
      escapeEnd = p + 2;
      return n;
    }
    const l = n === undefined ? 0 : n | 0x20;
    const v = l === 0x75 ? hexQuad(data, p + 2) : l === 0x78 ? hexPair(data, p + 2) : -1;
    if (v < 0 || (l === 0x75 && v >= 0x80)) return -1;
    escapeEnd = l === 0x75 ? p + 6 : p + 4;
    return v;
  }
  if (c === AMPERSAND) {
    const v = readHtmlRef(data, p);
    if (v >= 0) return v < 0x80 ? v : -1;
    return readNamedRef(data, p);
  }
  return -1;
}

// The code point written as JSON writes it (\uXXXX, a surrogate pair above
// the BMP, hex in any case) at `p`: where it ends, or -1.
function matchUnicodeEscape(data: Uint8Array, p: number, cp: number): number {
  const units = cp < 0x10000 ? [cp] : [0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff)];
  for (const u of units) {
    if (data[p] !== BACKSLASH || ((data[p + 1] as number) | 0x20) !== 0x75 || hexQuad(data, p + 2) !== u) return -1;
    p += 6;
  }
  return p;
}

// A character above ASCII written as its code point at p: where it ends, or -1.
function matchCodePoint(data: Uint8Array, p: number, cp: number): number {
  if (data[p] === BACKSLASH) return matchUnicodeEscape(data, p, cp);
  return readHtmlRef(data, p) === cp ? escapeEnd : -1;
}

// Byte u at p, raw or escaped (not for the bytes that start escapes).
function matchByte(f: Form, data: Uint8Array, p: number, u: number): number {
  const c = data[p];
  if (c === undefined) return -1;
  if (c === u || (f.anyCase && foldCase(c) === foldCase(u)) || (c === PLUS && u === SPACE)) return p + 1;
  const v = readEscape(data, p);
  return v === u || (f.anyCase && v >= 0 && foldCase(v) === foldCase(u)) ? escapeEnd : -1;
}

// Whether character c belongs to the set that element j is.
export function inSet(f: Form, j: number, c: number): boolean {
  const v = (f.radix as Radix).decode[c] as number;
  const known = (f.known as Uint8Array)[j] as number;
  return v >= 0 && (v & known) === f.bytes[j];
}

// A character of the set that element j is, at p, raw or escaped.
function matchSet(f: Form, data: Uint8Array, p: number, j: number): number {
  const c = data[p];
  if (c === undefined) return -1;
  if (inSet(f, j, c)) return p + 1;
  const v = readEscape(data, p);
  return v >= 0 && inSet(f, j, v) ? escapeEnd : -1;
}

// A line break inside a wrapped form: LF, CRLF, or JSON's \n / \r\n,
// with the indentation of the next line (spaces or tabs, at most
// MAX_INDENT: a key printed inside YAML, or by `openssl -text`).
export const MAX_INDENT = 16;

function skipLineBreak(data: Uint8Array, p: number): number {
  const c = data[p];
  let q = p;
  if (c === 0x0a) q = p + 1;
  else if (c === 0x0d && data[p + 1] === 0x0a) q = p + 2;
  else if (c === BACKSLASH && data[p + 1] === 0x6e) q = p + 2;
  else if (c === BACKSLASH && data[p + 1] === 0x72 && data[p + 2] === BACKSLASH && data[p + 3] === 0x6e) q = p + 4;
  else return p;
  for (let k = 0; k < MAX_INDENT && (data[q] === SPACE || data[q] === 0x09); k++) q += 1;
  return q;
}

// One form, ready to match: for each byte that starts a character above
// ASCII in a text form, that character's code point and length.
export interface Compiled extends Form {
  codePoints: Uint32Array | null;
  charLengths: Uint8Array | null;
}

export function compile(f: Form): Compiled {
  const { bytes } = f;
  const compiled: Compiled = {
    bytes,
    known: f.known,
    radix: f.radix,
    required: f.required,
    anyCase: f.anyCase,
    wrap: f.wrap,
    text: f.text,
    codePoints: null,
    charLengths: null,
  };
  if (!f.text || !bytes.some((b) => b >= 0x80)) return compiled;
  const codePoints = new Uint32Array(bytes.length);
  const charLengths = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length;) {
    const ch = utf8At(bytes, i);
    if (ch < 0) {
      i += 1;
      continue;
    }
    if (ch % 8 > 1) {
      codePoints[i] = Math.floor(ch / 8);
      charLengths[i] = ch % 8;
    }
    i += ch % 8;
  }
  return { ...compiled, codePoints, charLengths };
}

// Element `j` of the form onward, matched at `p`: where the match ends, or
// -1. An element that does not match ends a match that has all its
// required elements. The ways to write a byte start with different
// characters except when the byte itself starts escapes ("%", "\\", "&"),
// so only those branch.
function matchFrom(f: Compiled, data: Uint8Array, j: number, p: number): number {
  const { bytes } = f;
  for (; j < bytes.length; j++) {
    const before = p;
    if (f.wrap && j > 0) p = skipLineBreak(data, p);
    let q: number;
    if (f.known && f.known[j] !== 0) {
      q = matchSet(f, data, p, j);
    } else {
      const cp = f.codePoints ? (f.codePoints[j] as number) : 0;
      if (cp > 0x7f) {
        q = matchCodePoint(data, p, cp);
        if (q >= 0) {
          p = q;
          j += (f.charLengths![j] as number) - 1;
          continue;
        }
      }
      const u = bytes[j] as number;
      if (u === PERCENT || u === BACKSLASH || u === AMPERSAND) return matchBranching(f, data, j, p, before);
      q = matchByte(f, data, p, u);
    }
    if (q < 0) return j >= f.required ? before : -1;
    p = q;
  }
  return p;
}

// Element j is a byte that starts escapes: raw, or one of its escapes
// ("%" also as "%25" when "%25XX" reads otherwise), each tried to the end,
// the longest kept (a needle's last byte written "%25" must be replaced
// whole, not up to its "%"). The ways overlap ("%" raw and "%25" read
// alike at a "%" not followed by two hex digits), so the same element at
// the same position is reached again and again: each result is kept for
// the rest of the match (matchAt), which bounds the work by the form's
// length times the positions, not by the number of ways to read the text.
let memo: Map<number, number> | null = null;

// The end of the longest match of form `f` at `i`, or -1.
export function matchAt(f: Compiled, data: Uint8Array, i: number): number {
  memo = null;
  try {
    return matchFrom(f, data, 0, i);
  } finally {
    memo = null;
  }
}

function matchBranching(f: Compiled, data: Uint8Array, j: number, p: number, before: number): number {
  // p follows from before (a line break skipped), so (j, before) is the state.
  const key = j * 0x100000000 + before;
  const known = memo?.get(key);
  if (known !== undefined) return known;
  const u = f.bytes[j] as number;
  let end = -1;
  if (data[p] === u) end = Math.max(end, matchFrom(f, data, j + 1, p + 1));
  if (u === PERCENT && hexPair(data, p + 1) === PERCENT) end = Math.max(end, matchFrom(f, data, j + 1, p + 3));
  if (readEscape(data, p) === u) end = Math.max(end, matchFrom(f, data, j + 1, escapeEnd));
  if (end < 0 && j >= f.required) end = before;
  (memo ??= new Map()).set(key, end);
  return end;
}

export const NONE: Compiled[] = [];

// Flags in Redactor.pairs, by (byte << 8 | next byte).
export const RAW_START = 1; // some form may start with these two bytes, its first written raw
export const ESCAPE_START = 2; // an escape may start here: look at what it stands for
export const NEXT = 4; // as the second and third bytes of an occurrence that starts raw
export const FIRST_TWO = 8; // the values of some form's first two elements

// A character above ASCII written as a code point starts at i.
function codePointEscapeAt(data: Uint8Array, i: number): boolean {
  if (data[i] === BACKSLASH) return ((data[i + 1] as number) | 0x20) === 0x75 && hexQuad(data, i + 2) >= 0x80;
  return readHtmlRef(data, i) >= 0x80;
}

function merged(a: Compiled[], b: Compiled[]): Compiled[] {
  if (b.length === 0) return a;
  if (a.length === 0) return b;
  return [...new Set([...a, ...b])].sort((x, y) => y.bytes.length - x.bytes.length);
}

// The forms worth trying at `i`: those whose first byte is written there
// raw or escaped.
export function candidates(r: Redactor, data: Uint8Array, i: number): Compiled[] {
  const c = data[i] as number;
  const raw = r.byFirst[c] as Compiled[];
  if (((r.pairs[(c << 8) | (data[i + 1] as number)] as number) & ESCAPE_START) === 0)
    return mayFollow(r, data, c, i + 1) ? raw : NONE;
  if (c === PLUS) return merged(raw, r.byFirst[SPACE] as Compiled[]);
  const v = readEscape(data, i);
  const escaped = v >= 0 && mayFollow(r, data, v, escapeEnd) ? (r.byFirst[v] as Compiled[]) : NONE;
  // readEscape reads no code point above ASCII; that is the one case left.
  const unicode = v < 0 && c !== PERCENT && codePointEscapeAt(data, i) ? r.unicodeFirst : NONE;
  return merged(merged(raw, escaped), unicode);
}

// Whether what is written at p may be a form's second element after a first
// of value v: the pair check of findAll, on what an escape stands for (text
// that escapes every byte would otherwise try forms at each escape). Other
// spellings of the second element (a code point, a JSON line break) are let
// through.
function mayFollow(r: Redactor, data: Uint8Array, v: number, p: number): boolean {
  const c = data[p];
  if (c === undefined) return false;
  if (c !== PERCENT && c !== BACKSLASH && c !== AMPERSAND) return ((r.pairs[(v << 8) | c] as number) & RAW_START) !== 0;
  if (((r.pairs[(v << 8) | c] as number) & FIRST_TWO) !== 0) return true; // "%", "\\" or "&" itself
  const w = readEscape(data, p);
  return w < 0 || ((r.pairs[(v << 8) | w] as number) & FIRST_TWO) !== 0;
}
