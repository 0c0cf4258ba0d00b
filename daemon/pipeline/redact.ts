// Response redaction (SPEC §6.4): every occurrence postern can find of the
// secret and of the whole injected value is replaced by
// `[REDACTED:<credential>]`. Defence in depth, not a guarantee: an upstream
// that transforms the secret in a way not listed here (encrypts it, reverses
// it, spells it out) defeats it.
//
// Two layers:
// 1. Forms: each needle is turned into the byte strings an upstream may
//    print:
//    - raw;
//    - base64 and base64url at each of the three alignments, and base32
//      (RFC 4648, any case) at each of the five. A form covers every
//      character that carries a bit of the needle, so no needle byte stays
//      decodable beside the mark: the characters at its two edges also
//      carry bits of what surrounds the needle, so there any character
//      whose other bits agree with the needle's is accepted. Only the part
//      made of whole groups of needle bytes (the same whatever surrounds
//      it) must be present; the edges and the padding are taken when they
//      are. base64 may be broken into lines (PEM, MIME);
//    - hex, any case;
//    - UTF-16LE and UTF-16BE of the needle's text.
// 2. Escapes: each byte of a form may appear raw; percent-encoded (%XX,
//    either case, or double-encoded %25XX); as \xXX; as a JSON escape
//    (\u00XX in either case, or \" \\ \/); as an HTML character reference
//    (&#NN; or &#xNN;, at most MAX_REF_DIGITS digits, or &amp; &lt; &gt;
//    &quot; &apos;); or, for a space, as "+" (form encoding). A character
//    above ASCII may also be written as its code point: \uXXXX (a surrogate
//    pair above the BMP) or &#NNNN;. Each byte is written its own way, so
//    fully, partly and mixed escaped text matches.
// The forms are matched byte by byte (no regular expression, and no string
// built from the secret: everything derived from it lives in typed arrays
// that wipe() clears); at each position the longest match wins, so the whole
// injected value wins over the secret inside it. The whole body is searched at once, after it has
// been read and decompressed, so chunk boundaries do not matter.

export interface Redacted {
  data: Buffer;
  count: number;
  cut: boolean; // something was left out to respect the cut
}

// Needles shorter than this are not searched: they would match by chance.
export const MIN_NEEDLE = 4;
// Elements a form must match at least (characters of the stable part).
const MIN_FORM = 4;
// HTML references with more digits than this are not read. Enough for any
// code point (7 decimal, 6 hex digits) and a few leading zeros; the bound
// keeps maxMatchLength finite.
export const MAX_REF_DIGITS = 8;
// The longest escape of one byte: &#x + MAX_REF_DIGITS digits + ";". Every
// other escape is shorter per byte it stands for.
const MAX_ESCAPE = 3 + MAX_REF_DIGITS + 1;
// The longest line break inside a wrapped form: JSON's \r\n.
const MAX_LINE_BREAK = 4;

const PERCENT = 0x25;
const BACKSLASH = 0x5c;
const AMPERSAND = 0x26;
const PLUS = 0x2b;
const SPACE = 0x20;
const EQUALS = 0x3d;

// ---- Forms, built from a needle. Typed arrays only, wiped after use.

// Per element a byte, or, at a base64/base32 edge, a set of characters:
// those whose value has the bits under `known[j]` equal to `bytes[j]`'s
// (the other bits belong to what surrounds the needle). Elements from
// `required` on are taken as long as they match.
interface Form {
  bytes: Uint8Array;
  known: Uint8Array | null; // per element: 0 for a byte, else the needle's bits of a character
  radix: Radix | null; // the encoding of a form with edges
  required: number;
  anyCase: boolean;
  wrap: boolean; // may be broken into lines
  text: boolean; // UTF-8 text: a character above ASCII may be written as its code point
}

function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

function plain(bytes: Uint8Array, anyCase: boolean, text: boolean): Form {
  return { bytes, known: null, radix: null, required: bytes.length, anyCase, wrap: false, text };
}

const HEX_DIGITS = ascii('0123456789abcdef');

function hexForm(n: Uint8Array): Form {
  const out = new Uint8Array(n.length * 2);
  for (let i = 0; i < n.length; i++) {
    out[2 * i] = HEX_DIGITS[(n[i] as number) >> 4] as number;
    out[2 * i + 1] = HEX_DIGITS[(n[i] as number) & 15] as number;
  }
  return plain(out, true, false);
}

// The character whose UTF-8 encoding starts at b[i], as code point * 8 +
// length; -1 when the bytes there are not valid UTF-8.
function utf8At(b: Uint8Array, i: number): number {
  const c = b[i] as number;
  if (c < 0x80) return c * 8 + 1;
  const len = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (len === 0 || i + len > b.length) return -1;
  let cp = c & (0x7f >> len);
  for (let k = 1; k < len; k++) {
    const d = b[i + k] as number;
    if ((d & 0xc0) !== 0x80) return -1;
    cp = (cp << 6) | (d & 0x3f);
  }
  const least = len === 2 ? 0x80 : len === 3 ? 0x800 : 0x10000;
  if (cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return -1;
  return cp * 8 + len;
}

// The needle's text in UTF-16, both byte orders. A byte that is not valid
// UTF-8 stands for U+FFFD, as a decoder would make it.
function utf16Forms(n: Uint8Array): Form[] {
  const units = new Uint16Array(n.length); // never more units than bytes
  let count = 0;
  for (let i = 0; i < n.length;) {
    const ch = utf8At(n, i);
    const cp = ch < 0 ? 0xfffd : Math.floor(ch / 8);
    i += ch < 0 ? 1 : ch % 8;
    if (cp < 0x10000) {
      units[count++] = cp;
    } else {
      units[count++] = 0xd800 + ((cp - 0x10000) >> 10);
      units[count++] = 0xdc00 + ((cp - 0x10000) & 0x3ff);
    }
  }
  const le = new Uint8Array(count * 2);
  const be = new Uint8Array(count * 2);
  for (let k = 0; k < count; k++) {
    const u = units[k] as number;
    le[2 * k] = be[2 * k + 1] = u & 0xff;
    le[2 * k + 1] = be[2 * k] = u >> 8;
  }
  units.fill(0);
  return [plain(le, false, false), plain(be, false, false)];
}

// A base-2^bits encoding: `group` bytes make one group of characters.
interface Radix {
  alphabet: Uint8Array;
  decode: Int8Array; // the value of each character, -1 for bytes that are none
  bits: number;
  group: number;
  anyCase: boolean;
  wrap: boolean;
  shared: number; // values from this one on have two characters
  chars: number[]; // every byte that is a character
}

// `also`: more characters for the last values (base64url's "-" and "_").
function radix(spelling: string, also: string, bits: number, group: number, anyCase: boolean, wrap: boolean): Radix {
  const alphabet = ascii(spelling);
  const decode = new Int8Array(256).fill(-1);
  alphabet.forEach((c, v) => {
    decode[c] = v;
    if (anyCase) decode[otherCase(c)] = v;
  });
  ascii(also).forEach((c, k) => (decode[c] = alphabet.length - also.length + k));
  const chars = [...decode.keys()].filter((c) => (decode[c] as number) >= 0);
  return { alphabet, decode, bits, group, anyCase, wrap, shared: alphabet.length - also.length, chars };
}

// base64 and base64url as one form: a character whose value has two
// spellings is a set of both (see radixForms).
const BASE64 = radix('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/', '-_', 6, 3, false, true);
const BASE32 = radix('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', '', 5, 5, true, false);

// The `w` bits from bit `from` of a stream made of `before` zero bytes, the
// needle, then zeros (w <= 8, so two bytes hold them).
function streamBits(n: Uint8Array, before: number, from: number, w: number): number {
  const at = (from >> 3) - before;
  const hi = at >= 0 && at < n.length ? (n[at] as number) : 0;
  const lo = at + 1 >= 0 && at + 1 < n.length ? (n[at + 1] as number) : 0;
  return (((hi << 8) | lo) >> (16 - (from & 7) - w)) & ((1 << w) - 1);
}

// The needle encoded after `before` bytes of its first group, at each
// alignment: the characters that carry its bits (a set at an edge that
// shares bits with the surroundings), then the padding that follows when
// the data ends with the needle. Variants start at the leading edge, after
// it, and at the stable part, so an encoding that begins there is found too.
function radixForms(rx: Radix, n: Uint8Array): Form[] {
  const out: Form[] = [];
  const w = rx.bits;
  const perGroup = (rx.group * 8) / w;
  for (let before = 0; before < rx.group; before++) {
    const from = before * 8;
    const to = (before + n.length) * 8;
    const first = Math.floor(from / w);
    const last = Math.ceil(to / w);
    const pad = (perGroup - (last % perGroup)) % perGroup;
    const bytes = new Uint8Array(last - first + pad).fill(EQUALS);
    const known = new Uint8Array(bytes.length);
    const all = (1 << w) - 1;
    for (let k = first; k < last; k++) {
      const lo = k * w;
      const hi = lo + w;
      const v = streamBits(n, before, lo, w);
      // At an edge the needle's bits are the low ones at the start, the
      // high ones at the end.
      const mask = lo < from ? (1 << (hi - from)) - 1 : hi > to ? all ^ ((1 << (hi - to)) - 1) : all;
      if (mask === all && v < rx.shared) {
        bytes[k - first] = rx.alphabet[v] as number;
      } else {
        // A set: an edge, or a value with two spellings.
        known[k - first] = mask;
        bytes[k - first] = v & mask;
      }
    }
    const skip = (rx.group - before) % rx.group;
    const whole = Math.max(0, Math.floor((n.length - skip) / rx.group) * rx.group);
    const coreStart = ((before + skip) * 8) / w - first;
    const coreEnd = coreStart + (whole * 8) / w;
    const litStart = Math.ceil(from / w) - first;
    const stable = coreEnd - coreStart >= MIN_FORM;
    const required = stable ? coreEnd : Math.floor(to / w) - first;
    if (required - litStart >= MIN_FORM) {
      // The variants share their arrays: wiping one wipes them all.
      for (const s of new Set([0, litStart, stable ? coreStart : litStart])) {
        out.push({
          bytes: bytes.subarray(s),
          known: known.subarray(s),
          radix: rx,
          required: required - s,
          anyCase: rx.anyCase,
          wrap: rx.wrap,
          text: false,
        });
      }
    } else {
      bytes.fill(0);
    }
  }
  return out;
}

function formsOf(n: Uint8Array): Form[] {
  return [
    plain(new Uint8Array(n), false, true),
    ...radixForms(BASE64, n),
    ...radixForms(BASE32, n),
    hexForm(n),
    ...utf16Forms(n),
  ];
}

function wipeForm(f: Form): void {
  f.bytes.fill(0);
  f.known?.fill(0);
}

// ---- Matching.

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

function otherCase(c: number): number {
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x7a ? c ^ 0x20 : c;
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
function inSet(f: Form, j: number, c: number): boolean {
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

// One form, ready to match: for each byte that starts a character above
// ASCII in a text form, that character's code point and length.
interface Compiled extends Form {
  codePoints: Uint32Array | null;
  charLengths: Uint8Array | null;
}

function compile(f: Form): Compiled {
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
// ("%" also as "%25" when "%25XX" reads otherwise), each tried to the end.
function matchBranching(f: Compiled, data: Uint8Array, j: number, p: number, before: number): number {
  const u = f.bytes[j] as number;
  if (data[p] === u) {
    const q = matchFrom(f, data, j + 1, p + 1);
    if (q >= 0) return q;
  }
  if (u === PERCENT && hexPair(data, p + 1) === PERCENT) {
    const q = matchFrom(f, data, j + 1, p + 3);
    if (q >= 0) return q;
  }
  if (readEscape(data, p) === u) {
    const q = matchFrom(f, data, j + 1, escapeEnd);
    if (q >= 0) return q;
  }
  return j >= f.required ? before : -1;
}

const NONE: Compiled[] = [];

// Flags in Redactor.pairs, by (byte << 8 | next byte).
const RAW_START = 1; // some form may start with these two bytes, its first written raw
const ESCAPE_START = 2; // an escape may start here: look at what it stands for
const NEXT = 4; // as the second and third bytes of an occurrence that starts raw
const FIRST_TWO = 8; // the values of some form's first two elements

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
function candidates(r: Redactor, data: Uint8Array, i: number): Compiled[] {
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

// Occurrences as [start, end) byte ranges, in order, not overlapping; at
// each position the longest match wins (forms with edges match more or
// less of their optional part).
function findAll(r: Redactor, data: Buffer): [number, number][] {
  const out: [number, number][] = [];
  const { pairs } = r;
  // Every element takes at least a byte: no occurrence starts later (and
  // the next two bytes are always there).
  const n = data.length - MIN_FORM + 1;
  for (let i = 0; i < n;) {
    for (; i < n; i++) {
      const b = data[i + 1] as number;
      const here = pairs[((data[i] as number) << 8) | b] as number;
      if (here & ESCAPE_START || (here & RAW_START && (pairs[(b << 8) | (data[i + 2] as number)] as number) & NEXT))
        break;
    }
    if (i >= n) break;
    let end = -1;
    for (const f of candidates(r, data, i)) end = Math.max(end, matchFrom(f, data, 0, i));
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
