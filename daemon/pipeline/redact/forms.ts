// The forms of a needle (see ../redact.ts): the byte strings an upstream
// may print for it. Typed arrays only, wiped after use.

// Elements a form must match at least (characters of the stable part).
export const MIN_FORM = 4;

export const PERCENT = 0x25;
export const BACKSLASH = 0x5c;
export const AMPERSAND = 0x26;
export const PLUS = 0x2b;
export const SPACE = 0x20;
const EQUALS = 0x3d;

// Per element a byte, or, at a base64/base32 edge, a set of characters:
// those whose value has the bits under `known[j]` equal to `bytes[j]`'s
// (the other bits belong to what surrounds the needle). Elements from
// `required` on are taken as long as they match.
export interface Form {
  bytes: Uint8Array;
  known: Uint8Array | null; // per element: 0 for a byte, else the needle's bits of a character
  radix: Radix | null; // the encoding of a form with edges
  required: number;
  anyCase: boolean;
  wrap: boolean; // may be broken into lines
  text: boolean; // UTF-8 text: a character above ASCII may be written as its code point
}

export function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

export function foldCase(c: number): number {
  return c >= 0x41 && c <= 0x5a ? c | 0x20 : c;
}

export function otherCase(c: number): number {
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x7a ? c ^ 0x20 : c;
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

// Hex with a colon between bytes, as `openssl pkey -text` and `openssl
// x509 -text` print key material ("9d:61:b1:…", fifteen bytes a line, each
// line indented): a wrapped form, so the line breaks and their indentation
// are read through (see skipLineBreak).
const COLON = 0x3a;

function colonHexForm(n: Uint8Array): Form {
  const out = new Uint8Array(Math.max(0, n.length * 3 - 1)).fill(COLON);
  for (let i = 0; i < n.length; i++) {
    out[3 * i] = HEX_DIGITS[(n[i] as number) >> 4] as number;
    out[3 * i + 1] = HEX_DIGITS[(n[i] as number) & 15] as number;
  }
  return { ...plain(out, true, false), wrap: true };
}

// The character whose UTF-8 encoding starts at b[i], as code point * 8 +
// length; -1 when the bytes there are not valid UTF-8.
export function utf8At(b: Uint8Array, i: number): number {
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

// How many bytes at b[i] (not valid UTF-8 there) a decoder replaces with
// one U+FFFD: the longest start of a well-formed sequence, at least one
// byte (the WHATWG decoder's and Python's "maximal subpart").
function illFormedLength(b: Uint8Array, i: number): number {
  const c = b[i] as number;
  const len = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  let k = 1;
  while (k < len && i + k < b.length) {
    const d = b[i + k] as number;
    // The second byte's range is narrower after E0, ED, F0 and F4.
    const lo = k === 1 && c === 0xe0 ? 0xa0 : k === 1 && c === 0xf0 ? 0x90 : 0x80;
    const hi = k === 1 && c === 0xed ? 0x9f : k === 1 && c === 0xf4 ? 0x8f : 0xbf;
    if (d < lo || d > hi) break;
    k += 1;
  }
  return k;
}

// The needle's text in UTF-16, both byte orders. Bytes that are not valid
// UTF-8 stand for U+FFFD, as a decoder would make it (one for each maximal
// ill-formed part).
function utf16Forms(n: Uint8Array): Form[] {
  const units = new Uint16Array(n.length); // never more units than bytes
  let count = 0;
  for (let i = 0; i < n.length;) {
    const ch = utf8At(n, i);
    const cp = ch < 0 ? 0xfffd : Math.floor(ch / 8);
    i += ch < 0 ? illFormedLength(n, i) : ch % 8;
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
export interface Radix {
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

export function formsOf(n: Uint8Array): Form[] {
  return [
    plain(new Uint8Array(n), false, true),
    ...radixForms(BASE64, n),
    ...radixForms(BASE32, n),
    hexForm(n),
    colonHexForm(n),
    ...utf16Forms(n),
  ];
}

export function wipeForm(f: Form): void {
  f.bytes.fill(0);
  f.known?.fill(0);
}
