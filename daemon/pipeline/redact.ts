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
//
// The forms are built in redact/forms.ts, matched in redact/match.ts, and
// indexed and scanned for in redact/redactor.ts.
import { findAll, markOf, type Redactor } from './redact/redactor';

export { buildRedactor, joinRedactors, MIN_NEEDLE, type Redactor } from './redact/redactor';
export { MAX_REF_DIGITS } from './redact/match';

export interface Redacted {
  data: Buffer;
  count: number;
  cut: boolean; // something was left out to respect the cut
}

// Replaces every occurrence, then keeps what stands before byte `cut` of the
// input (an occurrence that starts before the cut is replaced whole), and at
// most `cut` bytes of output. Truncating in input positions means no part of
// an occurrence that began beyond the cut can be pulled forward into what is
// returned by replacements shorter than what they replace.
// Nothing is copied when nothing is found: most bodies and header values
// hold no occurrence, and are returned as they came (up to the cut).
export function redact(r: Redactor | null, data: Buffer, cut = Infinity): Redacted {
  const keepInput = Math.min(cut, data.length);
  const found = r ? findAll(r, data) : [];
  const first = found[0];
  if (!r || !first || first[0] >= keepInput)
    return { data: data.subarray(0, keepInput), count: 0, cut: keepInput < data.length };
  const mark = markOf(r);
  const parts: Buffer[] = [];
  let from = 0;
  let count = 0;
  for (const [start, end] of found) {
    if (start >= keepInput) break;
    parts.push(data.subarray(from, start), r.markFor ? r.markFor(data, start, end) : mark);
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
  return res.count === 0 ? { text, count: 0 } : { text: res.data.toString('latin1'), count: res.count };
}
