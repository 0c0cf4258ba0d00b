// Shared generators for the redaction fuzz suites (test/pipeline/redact-fuzz-*), not a test itself.
import { buildRedactor, type Redactor } from '../../daemon/pipeline/redact';
import { streamRedactor } from '../../daemon/pipeline/redact/stream';

export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x100000000;
  };
}

export type Rnd = () => number;
export const int = (r: Rnd, n: number): number => Math.floor(r() * n);
export const pick = <T>(r: Rnd, a: readonly T[]): T => a[int(r, a.length)] as T;

export function mustBuild(needles: Buffer[], label: string): Redactor {
  const r = buildRedactor(needles, label);
  if (!r) throw new Error('no redactor');
  return r;
}

// ---- needles -------------------------------------------------------------
const PRINTABLE = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/+= %&\\"\'<>.:;~!#$';
const UNI = ['é', 'ß', 'ж', '中', '€', '😀', '𝄞', 'ÿ', 'Ā', 'ｱ'];

export type NeedleKind = 'binary' | 'ascii' | 'utf8' | 'short' | 'long';
export const NEEDLE_KINDS: NeedleKind[] = ['binary', 'ascii', 'utf8', 'short', 'long'];

export function needle(r: Rnd, kind: NeedleKind): Buffer {
  switch (kind) {
    case 'binary':
      return Buffer.from(Array.from({ length: 4 + int(r, 40) }, () => int(r, 256)));
    case 'ascii': {
      let s = '';
      const n = 4 + int(r, 40);
      for (let i = 0; i < n; i++) s += pick(r, [...PRINTABLE]);
      return Buffer.from(s, 'latin1');
    }
    case 'utf8': {
      let s = '';
      const n = 4 + int(r, 24);
      for (let i = 0; i < n; i++) s += r() < 0.35 ? pick(r, UNI) : pick(r, [...PRINTABLE]);
      return Buffer.from(s, 'utf8');
    }
    case 'short': {
      let s = '';
      const n = 4 + int(r, 5);
      for (let i = 0; i < n; i++) s += pick(r, [...PRINTABLE]);
      return Buffer.from(s, 'latin1');
    }
    case 'long': {
      let s = '';
      const n = 200 + int(r, 200);
      for (let i = 0; i < n; i++) s += pick(r, [...PRINTABLE]);
      return Buffer.from(s, 'latin1');
    }
  }
}

// ---- escapes ---------------------------------------------------------------
const hx = (v: number, w: number, upper: boolean): string => {
  const h = v.toString(16).padStart(w, '0');
  return upper ? h.toUpperCase() : h;
};

// One byte written one of the promised ways.
export function escapeByte(r: Rnd, b: number, only?: string): string {
  const ways: string[] = ['raw', 'pct', 'pct2', 'x'];
  if (b < 0x80) ways.push('u', 'dec', 'hex');
  if (b === 0x22 || b === 0x5c || b === 0x2f) ways.push('short');
  if ([0x26, 0x3c, 0x3e, 0x22, 0x27].includes(b)) ways.push('named');
  if (b === 0x20) ways.push('plus');
  const w = only && ways.includes(only) ? only : pick(r, ways);
  const up = r() < 0.5;
  switch (w) {
    case 'raw':
      return String.fromCharCode(b);
    case 'pct':
      return `%${hx(b, 2, up)}`;
    case 'pct2':
      return `%25${hx(b, 2, up)}`;
    case 'x':
      return `\\x${hx(b, 2, up)}`;
    case 'u':
      return `\\u${hx(b, 4, up)}`;
    case 'short':
      return `\\${String.fromCharCode(b)}`;
    case 'dec': {
      const d = String(b);
      return `&#${d.padStart(d.length + int(r, 9 - d.length), '0')};`;
    }
    case 'hex': {
      const h = hx(b, 1, up);
      return `&#${r() < 0.5 ? 'x' : 'X'}${h.padStart(h.length + int(r, 9 - h.length), '0')};`;
    }
    case 'named':
      return { 0x26: '&amp;', 0x3c: '&lt;', 0x3e: '&gt;', 0x22: '&quot;', 0x27: '&apos;' }[b] as string;
    case 'plus':
      return '+';
  }
  throw new Error(w);
}

function codePointEscape(r: Rnd, cp: number): string {
  const up = r() < 0.5;
  const k = int(r, 3);
  if (k === 0) {
    const units = cp < 0x10000 ? [cp] : [0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff)];
    return units.map((u) => `\\u${hx(u, 4, up)}`).join('');
  }
  if (k === 1) {
    const d = String(cp);
    return `&#${d.padStart(d.length + int(r, 9 - d.length), '0')};`;
  }
  const h = hx(cp, 1, up);
  return `&#${r() < 0.5 ? 'x' : 'X'}${h.padStart(h.length + int(r, 9 - h.length), '0')};`;
}

// A form's bytes, each written its own way; `text`: characters above ASCII
// may be written as code points. `rawShare`: chance a unit is left raw.
// Returns the pieces (one per element or character), so line breaks can go
// between them.
export function escapePieces(r: Rnd, f: Buffer, text: boolean, rawShare = 0.4, only?: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < f.length;) {
    const b = f[i] as number;
    if (text && b >= 0xc2) {
      const s = f.subarray(i).toString('utf8');
      const cp = s.codePointAt(0) as number;
      const len = Buffer.byteLength(String.fromCodePoint(cp));
      if (cp !== 0xfffd && cp >= 0x80 && r() < 0.4 && !only) {
        out.push(codePointEscape(r, cp));
        i += len;
        continue;
      }
    }
    out.push(r() < rawShare && !only ? String.fromCharCode(b) : escapeByte(r, b, only));
    i += 1;
  }
  return out;
}

// ---- radix encodings ----------------------------------------------------------
export function base32(b: Buffer, pad = true): string {
  const A = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let v = 0;
  let out = '';
  for (const c of b) {
    v = (v << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out += A[(v >> (bits - 5)) & 31];
      bits -= 5;
    }
    v &= (1 << bits) - 1;
  }
  if (bits > 0) out += A[(v << (5 - bits)) & 31];
  if (pad) while (out.length % 8) out += '=';
  return out;
}

export interface RadixCase {
  name: string;
  chars: string; // the whole encoded text
  first: number; // first character that carries a needle bit
  last: number; // one past the last (plus the padding that follows it)
}

// The needle between `pre` and `post` bytes, encoded; where its characters are.
export function radixCase(
  kind: 'base64' | 'base64url' | 'base32' | 'base32lower' | 'base32mixed',
  pre: Buffer,
  n: Buffer,
  post: Buffer,
  padded: boolean,
  r: Rnd,
): RadixCase {
  const all = Buffer.concat([pre, n, post]);
  const bits = kind.startsWith('base64') ? 6 : 5;
  let chars: string;
  if (kind === 'base64') chars = all.toString('base64');
  else if (kind === 'base64url')
    chars = all.toString('base64url') + (padded ? '='.repeat((4 - (Math.ceil((all.length * 8) / 6) % 4)) % 4) : '');
  else chars = base32(all, true);
  if (!padded) chars = chars.replace(/=+$/, '');
  if (kind === 'base32lower') chars = chars.toLowerCase();
  if (kind === 'base32mixed') chars = [...chars].map((c) => (r() < 0.5 ? c.toLowerCase() : c)).join('');
  const first = Math.floor((pre.length * 8) / bits);
  let last = Math.ceil(((pre.length + n.length) * 8) / bits);
  while (chars[last] === '=') last += 1;
  return { name: kind, chars, first, last };
}

// A line break as the docs allow inside wrapped forms.
export function lineBreak(r: Rnd): string {
  const nl = pick(r, ['\n', '\r\n', '\\n', '\\r\\n']);
  let ind = '';
  const k = int(r, 17);
  for (let i = 0; i < k; i++) ind += r() < 0.7 ? ' ' : '\t';
  return nl + ind;
}

// ---- streaming ---------------------------------------------------------------
export function chunked(r: Rnd, data: Buffer, maxChunk: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length;) {
    const n = 1 + int(r, maxChunk);
    out.push(data.subarray(i, i + n));
    i += n;
  }
  return out;
}

export function streamed(red: Redactor | null, chunks: Buffer[], cut: number, flagLast: boolean) {
  const s = streamRedactor(red, cut);
  const parts = chunks.map((c, i) => s.push(c, flagLast && i === chunks.length - 1));
  parts.push(s.end());
  return { data: Buffer.concat(parts), count: s.count, cut: s.truncated };
}

export const lat = (s: string): Buffer => Buffer.from(s, 'latin1');
export const show = (b: Buffer | string): string => JSON.stringify(typeof b === 'string' ? b : b.toString('latin1'));
