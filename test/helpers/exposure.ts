// An independent detector of a secret in bytes postern emits (replies, logs,
// the journal). It shares nothing with the product's redactor: instead of
// compiling the escapes into one pattern, it decodes the text into several
// "views" and searches each view for the plain forms of the secret.
//
// Views: the text as is; percent-decoded (%XX, either case, leniently:
// anything else stays); JSON-unescaped (\uXXXX in either case, surrogate
// pairs joined, \" \\ \/ and the short escapes); both orders of those two;
// and each of these with "+" read as a space. Then, as is and JSON-unescaped:
// percent-decoded twice (%25XX); HTML references decoded (&#NN; &#xNN; and
// &amp; &lt; &gt; &quot; &apos;); \xXX decoded; and every one of these
// escapes decoded in one pass (text that mixes them). Last, the text read as
// UTF-16LE and UTF-16BE from its first and its second byte. All views are
// byte strings (one char per byte), so an escape of a non-ASCII code point
// becomes its UTF-8 bytes.
// Forms searched in every view: the secret's bytes; its hex (in the view
// lower-cased); at each of the three alignments, the part of its base64 and
// base64url that does not depend on the bytes around it (every complete
// group of three bytes); and at each of the five, that part of its base32
// (RFC 4648, in the view lower-cased).
// A reply of postern (JSON) is also taken apart: every string in it is
// searched as UTF-8 bytes and, when it can be, as latin1 bytes (header
// values are latin1), and a body with body_encoding "base64" is decoded.

type View = { name: string; text: string };

function percentDecode(s: string): string {
  return s.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

function utf8Bytes(codePoint: number): string {
  return Buffer.from(String.fromCodePoint(codePoint), 'utf8').toString('latin1');
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

function jsonUnescape(s: string): string {
  return s.replace(
    /\\[uU]([0-9a-fA-F]{4})(?:\\[uU]([0-9a-fA-F]{4}))?|\\(["\\/bfnrt])/g,
    (_m, hi?: string, lo?: string, short?: string) => {
      if (short !== undefined) return SHORT_ESCAPES[short] as string;
      const a = parseInt(hi as string, 16);
      if (lo !== undefined) {
        const b = parseInt(lo, 16);
        if (a >= 0xd800 && a < 0xdc00 && b >= 0xdc00 && b < 0xe000)
          return utf8Bytes(0x10000 + ((a - 0xd800) << 10) + (b - 0xdc00));
        return utf8Bytes(a) + utf8Bytes(b);
      }
      return utf8Bytes(a);
    },
  );
}

function percentDecodeTwice(s: string): string {
  return percentDecode(percentDecode(s));
}

const NAMED_REFS: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function codePointBytes(m: string, cp: number): string {
  return cp <= 0x10ffff ? utf8Bytes(cp) : m;
}

function htmlUnescape(s: string): string {
  return s.replace(
    /&#[xX]([0-9a-fA-F]+);|&#([0-9]+);|&(amp|lt|gt|quot|apos);/g,
    (m, hex?: string, dec?: string, name?: string) => {
      if (name !== undefined) return NAMED_REFS[name] as string;
      return codePointBytes(m, hex !== undefined ? parseInt(hex, 16) : parseInt(dec as string, 10));
    },
  );
}

function xUnescape(s: string): string {
  return s.replace(/\\[xX]([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

// Every escape above in one pass, so an occurrence that writes each byte
// its own way is whole in this view.
function anyUnescape(s: string): string {
  return s.replace(
    /%25([0-9a-fA-F]{2})|%([0-9a-fA-F]{2})|\\[xX]([0-9a-fA-F]{2})|(\\[uU][0-9a-fA-F]{4}(?:\\[uU][0-9a-fA-F]{4})?)|\\(["\\/])|&#[xX]([0-9a-fA-F]+);|&#([0-9]+);|&(amp|lt|gt|quot|apos);/g,
    (
      m,
      p2?: string,
      p1?: string,
      x?: string,
      u?: string,
      short?: string,
      hex?: string,
      dec?: string,
      name?: string,
    ) => {
      const byte = p2 ?? p1 ?? x;
      if (byte !== undefined) return String.fromCharCode(parseInt(byte, 16));
      if (short !== undefined) return short;
      if (name !== undefined) return NAMED_REFS[name] as string;
      if (u !== undefined) return jsonUnescape(u);
      return codePointBytes(m, hex !== undefined ? parseInt(hex, 16) : parseInt(dec as string, 10));
    },
  );
}

// The bytes read as UTF-16 (from byte `from`), as UTF-8 bytes.
function utf16View(bytes: string, from: number, bigEndian: boolean): string {
  const b = Buffer.from(bytes.slice(from, from + ((bytes.length - from) & ~1)), 'latin1');
  if (bigEndian) b.swap16();
  return Buffer.from(b.toString('utf16le'), 'utf8').toString('latin1');
}

export function views(bytes: string): View[] {
  const base: View[] = [
    { name: 'as-is', text: bytes },
    { name: 'percent', text: percentDecode(bytes) },
    { name: 'json', text: jsonUnescape(bytes) },
    { name: 'percent+json', text: jsonUnescape(percentDecode(bytes)) },
    { name: 'json+percent', text: percentDecode(jsonUnescape(bytes)) },
  ];
  const plus = base.map((v) => ({ name: `${v.name}/plus-as-space`, text: v.text.replace(/\+/g, ' ') }));
  // Form decoding: "+" is a space before the percent escapes are undone.
  const form: View[] = [
    { name: 'form', text: percentDecode(bytes.replace(/\+/g, ' ')) },
    { name: 'json+form', text: percentDecode(jsonUnescape(bytes).replace(/\+/g, ' ')) },
  ];
  const escapes: View[] = [base[0] as View, base[2] as View].flatMap((v) => [
    { name: `${v.name}+percent-twice`, text: percentDecodeTwice(v.text) },
    { name: `${v.name}+html`, text: htmlUnescape(v.text) },
    { name: `${v.name}+x`, text: xUnescape(v.text) },
    { name: `${v.name}+any-escape`, text: anyUnescape(v.text) },
  ]);
  const utf16: View[] = [0, 1].flatMap((from) => [
    { name: `utf16le@${from}`, text: utf16View(bytes, from, false) },
    { name: `utf16be@${from}`, text: utf16View(bytes, from, true) },
  ]);
  return [...base, ...plus, ...form, ...escapes, ...utf16];
}

// RFC 4648 base32, padded.
export function base32(b: Buffer): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let out = '';
  for (let bit = 0; bit < b.length * 8; bit += 5) {
    const at = bit >> 3;
    const pair = ((b[at] as number) << 8) | (b[at + 1] ?? 0);
    out += alphabet[(pair >> (11 - (bit & 7))) & 31];
  }
  return out.padEnd(Math.ceil(out.length / 8) * 8, '=');
}

export interface Form {
  name: string;
  text: string; // byte string
  lowerCaseView: boolean; // searched in the lower-cased view
}

// The forms of a secret worth searching for, whatever surrounds it.
export function secretForms(secret: string | Buffer): Form[] {
  const b = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret;
  const forms: Form[] = [
    { name: 'raw', text: b.toString('latin1'), lowerCaseView: false },
    { name: 'hex', text: b.toString('hex'), lowerCaseView: true },
  ];
  for (let o = 0; o < 3; o++) {
    const whole = Math.floor((b.length - o) / 3) * 3;
    if (whole < 6) continue; // two groups at least, or it would match by chance
    const std = b.subarray(o, o + whole).toString('base64');
    forms.push({ name: `base64@${o}`, text: std, lowerCaseView: false });
    forms.push({ name: `base64url@${o}`, text: std.replace(/\+/g, '-').replace(/\//g, '_'), lowerCaseView: false });
  }
  for (let o = 0; o < 5; o++) {
    const whole = Math.floor((b.length - o) / 5) * 5;
    if (whole < 10) continue; // two groups at least, as for base64
    forms.push({ name: `base32@${o}`, text: base32(b.subarray(o, o + whole)).toLowerCase(), lowerCaseView: true });
  }
  return forms;
}

// The byte strings to search: the text itself and, for a JSON document,
// every string in it (and a base64 body decoded).
function texts(input: string | Buffer): { name: string; bytes: string }[] {
  const buf = typeof input === 'string' ? Buffer.from(input, 'utf8') : input;
  const out = [{ name: 'text', bytes: buf.toString('latin1') }];
  let doc: unknown;
  try {
    doc = JSON.parse(buf.toString('utf8'));
  } catch {
    return out;
  }
  const walk = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      out.push({ name: `${path}(utf8)`, bytes: Buffer.from(v, 'utf8').toString('latin1') });
      if (!/[^\x00-\xff]/.test(v)) out.push({ name: `${path}(latin1)`, bytes: v });
    } else if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${path}[${i}]`));
    } else if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (o['body_encoding'] === 'base64' && typeof o['body'] === 'string') {
        out.push({ name: `${path}.body(base64-decoded)`, bytes: Buffer.from(o['body'], 'base64').toString('latin1') });
      }
      for (const [k, x] of Object.entries(o)) {
        out.push({ name: `${path}{key}`, bytes: Buffer.from(k, 'utf8').toString('latin1') });
        walk(x, `${path}.${k}`);
      }
    }
  };
  walk(doc, '$');
  return out;
}

// Names ("<form> in <view> of <where>") of every form of the secret found;
// empty when none is.
export function exposures(input: string | Buffer, secret: string | Buffer): string[] {
  const forms = secretForms(secret);
  const found = new Set<string>();
  for (const t of texts(input)) {
    for (const v of views(t.bytes)) {
      const lower = v.text.toLowerCase();
      for (const f of forms) {
        if ((f.lowerCaseView ? lower : v.text).includes(f.text)) found.add(`${f.name} in ${v.name} of ${t.name}`);
      }
    }
  }
  return [...found];
}
