// Response redaction (SPEC §6.4): every occurrence postern can find of the
// secret and of the whole injected value is replaced by
// `[REDACTED:<credential>]`. Defence in depth, not a guarantee: an upstream
// that transforms the secret in a way not listed here (encrypts it, reverses
// it, spells it out) defeats it.
//
// Two layers:
// 1. Forms: each needle is turned into the byte strings an upstream may
//    print — raw; base64 and base64url at each of the three alignments
//    (padding never matters: only the part that encodes the same whatever
//    surrounds it is searched); hex (any case).
// 2. Escapes: each character of a form may appear raw, percent-encoded
//    (%XX, either case — so fully or partly encoded text matches), as a
//    JSON escape (\uXXXX in either case, or \" \\ \/), or, for a space, as
//    "+" (form encoding).
// The forms are matched byte by byte (no regular expression, so nothing
// derived from the secret lives in an unwipeable string), longest first, so
// the whole injected value wins over the secret inside it. The whole body is
// searched at once, after it has been read and decompressed, so chunk
// boundaries do not matter.

export interface Redacted {
  data: Buffer;
  count: number;
  cut: boolean; // something was left out to respect the cut
}

// `wrap`: the form may be broken into lines (base64 in PEM and MIME is).
type FormText = { text: Buffer; anyCase: boolean; wrap?: boolean };
type Form = { name: string; encode: (needle: Buffer) => FormText[] };

function b64Forms(needle: Buffer): FormText[] {
  const out: FormText[] = [];
  for (let o = 0; o < 3; o++) {
    const tail = needle.subarray(o);
    const full = Math.floor(tail.length / 3) * 3;
    if (full === 0) continue;
    const stable = tail.subarray(0, full).toString('base64');
    out.push({ text: Buffer.from(stable), anyCase: false, wrap: true });
    out.push({ text: Buffer.from(stable.replace(/\+/g, '-').replace(/\//g, '_')), anyCase: false, wrap: true });
  }
  return out;
}

export const REDACTION_FORMS: readonly Form[] = [
  { name: 'raw', encode: (n) => [{ text: n, anyCase: false }] },
  { name: 'base64 / base64url, 3 alignments, broken into lines or not', encode: b64Forms },
  { name: 'hex, any case', encode: (n) => [{ text: Buffer.from(n.toString('hex')), anyCase: true }] },
];

// Needles shorter than this are not searched: they would match by chance.
export const MIN_NEEDLE = 4;
const MIN_FORM = 4;
// The longest escape of one byte: \u00XX.
const MAX_ESCAPE = 6;

const PERCENT = 0x25;
const BACKSLASH = 0x5c;
const PLUS = 0x2b;
const SPACE = 0x20;

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

function foldCase(c: number): number {
  return c >= 0x41 && c <= 0x5a ? c | 0x20 : c;
}

// One form, ready to match: its bytes, whether letters match in any case,
// and for each byte that starts a character above ASCII, that character's
// code point and length (for JSON's \uXXXX). Held in typed arrays so the
// request can wipe them.
interface Compiled {
  bytes: Uint8Array;
  anyCase: boolean;
  wrap: boolean;
  codePoints: Uint32Array | null;
  charLengths: Uint8Array | null;
}

function compile(text: Buffer, anyCase: boolean, wrap: boolean): Compiled {
  const bytes = new Uint8Array(text);
  if (anyCase || bytes.every((b) => b < 0x80)) return { bytes, anyCase, wrap, codePoints: null, charLengths: null };
  const codePoints = new Uint32Array(bytes.length);
  const charLengths = new Uint8Array(bytes.length);
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    const len = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (len > 1 && i + len <= bytes.length) {
      const cp = Buffer.from(bytes.subarray(i, i + len)).toString('utf8').codePointAt(0) as number;
      if (cp !== 0xfffd) {
        codePoints[i] = cp;
        charLengths[i] = len;
      }
    }
    i += len;
  }
  return { bytes, anyCase, wrap, codePoints, charLengths };
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

// Byte `j` of the form onward, matched at `p`: where the match ends, or -1.
// Each byte may be raw, %XX, \u00XX, a JSON short escape, or "+" for a
// space. The ways to write a byte start with different characters except
// when the byte is itself "%" or "\\", so only those branch.
function matchFrom(f: Compiled, data: Uint8Array, j: number, p: number): number {
  const { bytes } = f;
  for (; j < bytes.length; j++) {
    if (f.wrap && j > 0) p = skipLineBreak(data, p);
    const cp = f.codePoints ? (f.codePoints[j] as number) : 0;
    if (cp > 0x7f && data[p] === BACKSLASH) {
      const q = matchUnicodeEscape(data, p, cp);
      if (q < 0) return -1;
      p = q;
      j += (f.charLengths![j] as number) - 1;
      continue;
    }
    const u = bytes[j] as number;
    const c = data[p];
    if (c === undefined) return -1;
    if (u === PERCENT || u === BACKSLASH) {
      // Raw first, then the escapes, each tried to the end.
      if (c === u) {
        const q = matchFrom(f, data, j + 1, p + 1);
        if (q >= 0) return q;
      }
      const q = matchEscape(data, p, u);
      return q < 0 ? -1 : matchFrom(f, data, j + 1, q);
    }
    if (c === u || (f.anyCase && foldCase(c) === foldCase(u))) {
      p += 1;
      continue;
    }
    if (c === PLUS && u === SPACE) {
      p += 1;
      continue;
    }
    const q = matchEscape(data, p, u);
    if (q < 0) return -1;
    p = q;
  }
  return p;
}

// A line break inside a wrapped form: LF, CRLF, or JSON's \n / \r\n.
function skipLineBreak(data: Uint8Array, p: number): number {
  const c = data[p];
  if (c === 0x0a) return p + 1;
  if (c === 0x0d && data[p + 1] === 0x0a) return p + 2;
  if (c === BACKSLASH) {
    if (data[p + 1] === 0x6e) return p + 2;
    if (data[p + 1] === 0x72 && data[p + 2] === BACKSLASH && data[p + 3] === 0x6e) return p + 4;
  }
  return p;
}

function matchEscape(data: Uint8Array, p: number, u: number): number {
  const c = data[p];
  if (c === PERCENT) return hexPair(data, p + 1) === u ? p + 3 : -1;
  if (c !== BACKSLASH) return -1;
  const n = data[p + 1];
  if (n === u && (u === 0x22 || u === BACKSLASH || u === 0x2f)) return p + 2;
  if (u < 0x80 && n !== undefined && (n | 0x20) === 0x75 && hexQuad(data, p + 2) === u) return p + 6;
  return -1;
}

const NONE: Compiled[] = [];

export interface Redactor {
  label: string;
  // Longest text one occurrence can take in the response: what must be read
  // beyond the cap so an occurrence that straddles it is still found.
  maxMatchLength: number;
  // Forms by their first byte (both cases for any-case forms), longest
  // first; and those starting with a character above ASCII, which JSON may
  // write as \uXXXX.
  byFirst: Compiled[][];
  unicodeFirst: Compiled[];
  starts: Uint8Array; // 256 flags: bytes that may begin an occurrence
  wipe(): void;
}

// Null when there is nothing to search for (needles too short). The needles
// are copied; the caller wipes its own, and calls wipe() on this when the
// response is done.
export function buildRedactor(needles: Buffer[], label: string): Redactor | null {
  const unique = new Map<string, Compiled>();
  for (const n of needles) {
    if (n.length < MIN_NEEDLE) continue;
    for (const f of REDACTION_FORMS) {
      for (const form of f.encode(n)) {
        if (form.text.length < MIN_FORM) continue;
        const c = compile(form.text, form.anyCase, form.wrap === true);
        const id = `${form.anyCase ? 'i' : 's'}${form.wrap ? 'w' : ''}${form.text.toString('hex')}`;
        if (!unique.has(id)) unique.set(id, c);
        else c.bytes.fill(0);
        if (form.text !== n) form.text.fill(0);
      }
    }
  }
  if (unique.size === 0) return null;
  const forms = [...unique.values()].sort((a, b) => b.bytes.length - a.bytes.length);
  unique.clear();
  const byFirst: Compiled[][] = new Array<Compiled[]>(256).fill(NONE);
  const add = (b: number, f: Compiled): void => {
    if (byFirst[b] === NONE) byFirst[b] = [];
    (byFirst[b] as Compiled[]).push(f);
  };
  const unicodeFirst: Compiled[] = [];
  for (const f of forms) {
    const b = f.bytes[0] as number;
    add(b, f);
    if (f.anyCase && foldCase(b) !== b) add(foldCase(b), f);
    if (f.anyCase && b >= 0x61 && b <= 0x7a) add(b - 0x20, f);
    if (f.codePoints && (f.codePoints[0] as number) > 0x7f) unicodeFirst.push(f);
  }
  const starts = new Uint8Array(256);
  for (let b = 0; b < 256; b++) starts[b] = (byFirst[b] as Compiled[]).length > 0 ? 1 : 0;
  starts[PERCENT] = 1;
  starts[BACKSLASH] = 1;
  if ((byFirst[SPACE] as Compiled[]).length > 0) starts[PLUS] = 1;
  return {
    label,
    // A wrapped form may also carry a line break (up to 4 bytes) between
    // any two characters.
    maxMatchLength: Math.max(...forms.map((f) => f.bytes.length * (f.wrap ? MAX_ESCAPE + 4 : MAX_ESCAPE))),
    byFirst,
    unicodeFirst,
    starts,
    wipe() {
      for (const f of forms) {
        f.bytes.fill(0);
        f.codePoints?.fill(0);
      }
      byFirst.fill(NONE);
      unicodeFirst.length = 0;
      starts.fill(0);
    },
  };
}

// The forms worth trying at `i`: those whose first byte is written there
// raw or escaped. Most positions have none.
function candidates(r: Redactor, data: Uint8Array, i: number): Compiled[] {
  const c = data[i] as number;
  const raw = r.byFirst[c] as Compiled[];
  let escaped = NONE;
  if (c === PERCENT) {
    const v = hexPair(data, i + 1);
    if (v >= 0) escaped = r.byFirst[v] as Compiled[];
  } else if (c === BACKSLASH) {
    const n = data[i + 1];
    if (n !== undefined && (n | 0x20) === 0x75) {
      const v = hexQuad(data, i + 2);
      escaped = v >= 0 && v < 0x80 ? (r.byFirst[v] as Compiled[]) : r.unicodeFirst;
    } else if (n === 0x22 || n === BACKSLASH || n === 0x2f) {
      escaped = r.byFirst[n] as Compiled[];
    }
  } else if (c === PLUS) {
    escaped = r.byFirst[SPACE] as Compiled[];
  }
  if (escaped.length === 0) return raw;
  if (raw.length === 0) return escaped;
  return [...raw, ...escaped].sort((a, b) => b.bytes.length - a.bytes.length);
}

// Occurrences as [start, end) byte ranges, in order, not overlapping; at
// each position the longest form that matches wins.
function findAll(r: Redactor, data: Buffer): [number, number][] {
  const out: [number, number][] = [];
  const { starts } = r;
  const n = data.length;
  for (let i = 0; i < n; ) {
    while (i < n && starts[data[i] as number] === 0) i++;
    if (i >= n) break;
    const list = candidates(r, data, i);
    let end = -1;
    for (const f of list) {
      end = matchFrom(f, data, 0, i);
      if (end > i) break;
    }
    if (end > i) {
      out.push([i, end]);
      i = end;
    } else {
      i += 1;
    }
  }
  return out;
}

// Replaces every occurrence, then keeps what stands before byte `cut` of the
// input (an occurrence that starts before the cut is replaced whole), and at
// most `cut` bytes of output. Truncating in input positions means no part of
// an occurrence that began beyond the cut can be pulled forward into what is
// returned by replacements shorter than what they replace.
export function redact(r: Redactor | null, data: Buffer, cut = Infinity): Redacted {
  const keepInput = Math.min(cut, data.length);
  if (!r) return { data: data.subarray(0, keepInput), count: 0, cut: keepInput < data.length };
  const mark = Buffer.from(`[REDACTED:${r.label}]`);
  const parts: Buffer[] = [];
  let from = 0;
  let count = 0;
  for (const [start, end] of findAll(r, data)) {
    if (start >= keepInput) break;
    parts.push(data.subarray(from, start), mark);
    count += 1;
    from = end;
  }
  if (from < keepInput) parts.push(data.subarray(from, keepInput));
  const out = Buffer.concat(parts);
  const over = out.length > cut;
  return { data: over ? out.subarray(0, cut) : out, count, cut: over || keepInput < data.length };
}

// Header values are latin1 strings as undici hands them over.
export function redactText(r: Redactor | null, text: string): { text: string; count: number } {
  if (!r) return { text, count: 0 };
  const res = redact(r, Buffer.from(text, 'latin1'));
  return { text: res.data.toString('latin1'), count: res.count };
}
