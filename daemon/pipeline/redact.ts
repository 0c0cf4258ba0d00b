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
// All forms of all needles are compiled into one regular expression over the
// bytes (latin1), longest first, so the whole injected value wins over the
// secret inside it. The whole body is searched at once, after it has been
// read and decompressed, so chunk boundaries do not matter.

export interface Redactor {
  label: string;
  // Longest text one occurrence can take in the response: what must be read
  // beyond the cap so an occurrence that straddles it is still found.
  maxMatchLength: number;
  regex: RegExp;
}

export interface Redacted {
  data: Buffer;
  count: number;
  cut: boolean; // something was left out to respect the cut
}

type Form = { name: string; encode: (needle: Buffer) => { text: Buffer; anyCase: boolean }[] };

function b64Forms(needle: Buffer): { text: Buffer; anyCase: boolean }[] {
  const out: { text: Buffer; anyCase: boolean }[] = [];
  for (let o = 0; o < 3; o++) {
    const tail = needle.subarray(o);
    const full = Math.floor(tail.length / 3) * 3;
    if (full === 0) continue;
    const stable = tail.subarray(0, full).toString('base64');
    out.push({ text: Buffer.from(stable), anyCase: false });
    out.push({ text: Buffer.from(stable.replace(/\+/g, '-').replace(/\//g, '_')), anyCase: false });
  }
  return out;
}

export const REDACTION_FORMS: readonly Form[] = [
  { name: 'raw', encode: (n) => [{ text: n, anyCase: false }] },
  { name: 'base64 / base64url, 3 alignments', encode: b64Forms },
  { name: 'hex, any case', encode: (n) => [{ text: Buffer.from(n.toString('hex')), anyCase: true }] },
];

// Needles shorter than this are not searched: they would match by chance.
export const MIN_NEEDLE = 4;
const MIN_FORM = 4;
// The longest escape of one byte: \u00XX.
const MAX_ESCAPE = 6;

function hexDigitClass(nibble: number): string {
  const d = nibble.toString(16);
  return /[a-f]/.test(d) ? `[${d}${d.toUpperCase()}]` : d;
}

function hexByte(b: number): string {
  return hexDigitClass(b >> 4) + hexDigitClass(b & 15);
}

function literal(code: number): string {
  return `\\x${code.toString(16).padStart(2, '0')}`;
}

// One byte of a form: every way it may be written in the response.
function byteAlternatives(b: number, anyCase: boolean): string[] {
  const ch = String.fromCharCode(b);
  const alts: string[] = [];
  if (anyCase && /[a-zA-Z]/.test(ch)) alts.push(`[${literal(ch.toLowerCase().charCodeAt(0))}${literal(ch.toUpperCase().charCodeAt(0))}]`);
  else alts.push(literal(b));
  alts.push(`%${hexByte(b)}`);
  if (b < 0x80) alts.push(`\\\\[uU]00${hexByte(b)}`);
  if (ch === '"' || ch === '\\' || ch === '/') alts.push(`\\\\${literal(b)}`);
  if (ch === ' ') alts.push('\\+');
  return alts;
}

// A character above ASCII, as JSON writes it: \uXXXX (a surrogate pair
// above the BMP), either case.
function jsonUnicodeEscape(cp: number): string {
  const unit = (u: number): string => `\\\\[uU]${[12, 8, 4, 0].map((s) => hexDigitClass((u >> s) & 15)).join('')}`;
  if (cp < 0x10000) return unit(cp);
  const v = cp - 0x10000;
  return unit(0xd800 + (v >> 10)) + unit(0xdc00 + (v & 0x3ff));
}

// The regular expression source of one form: each UTF-8 character either as
// its bytes (each raw or escaped) or, when above ASCII, as a JSON \u escape.
function formSource(text: Buffer, anyCase: boolean): string {
  let src = '';
  let i = 0;
  const decoded = anyCase ? null : new TextDecoder('utf-8', { fatal: false }).decode(text);
  const chars = decoded !== null && Buffer.from(decoded, 'utf8').equals(text) ? [...decoded] : null;
  if (chars) {
    for (const c of chars) {
      const bytes = Buffer.from(c, 'utf8');
      const perByte = [...bytes].map((b) => `(?:${byteAlternatives(b, false).join('|')})`).join('');
      src += bytes.length === 1 ? perByte : `(?:${perByte}|${jsonUnicodeEscape(c.codePointAt(0) as number)})`;
    }
    return src;
  }
  for (; i < text.length; i++) src += `(?:${byteAlternatives(text[i] as number, anyCase).join('|')})`;
  return src;
}

// Null when there is nothing to search for (redaction off, or needles too
// short). The needles are read here and not kept; the caller wipes them.
export function buildRedactor(needles: Buffer[], label: string): Redactor | null {
  const forms = new Map<string, { text: Buffer; anyCase: boolean }>();
  for (const n of needles) {
    if (n.length < MIN_NEEDLE) continue;
    for (const f of REDACTION_FORMS) {
      for (const form of f.encode(n)) {
        if (form.text.length < MIN_FORM) continue;
        forms.set(`${form.anyCase ? 'i' : 's'}${form.text.toString('hex')}`, form);
      }
    }
  }
  if (forms.size === 0) return null;
  const sorted = [...forms.values()].sort((a, b) => b.text.length - a.text.length);
  const source = sorted.map((f) => formSource(f.text, f.anyCase)).join('|');
  return { label, maxMatchLength: sorted[0]!.text.length * MAX_ESCAPE, regex: new RegExp(source, 'g') };
}

// Occurrences as [start, end) byte ranges, in order, not overlapping.
function findAll(r: Redactor, data: Buffer): [number, number][] {
  const text = data.toString('latin1');
  const out: [number, number][] = [];
  r.regex.lastIndex = 0;
  for (let m = r.regex.exec(text); m !== null; m = r.regex.exec(text)) {
    out.push([m.index, m.index + m[0].length]);
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
