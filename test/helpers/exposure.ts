// An independent detector of a secret in bytes postern emits (replies, logs,
// the journal). It shares nothing with the product's redactor: instead of
// compiling the escapes into one pattern, it decodes the text into several
// "views" and searches each view for the plain forms of the secret.
//
// Views: the text as is; percent-decoded (%XX, either case, leniently:
// anything else stays); JSON-unescaped (\uXXXX in either case, surrogate
// pairs joined, \" \\ \/ and the short escapes); both orders of those two;
// and each of these with "+" read as a space. All views are byte strings
// (one char per byte), so a \u escape of a non-ASCII code point becomes its
// UTF-8 bytes.
// Forms searched in every view: the secret's bytes; its hex (in the view
// lower-cased); and, at each of the three alignments, the part of its base64
// and base64url that does not depend on the bytes around it (every complete
// group of three bytes).
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

const SHORT_ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

function jsonUnescape(s: string): string {
  return s.replace(/\\[uU]([0-9a-fA-F]{4})(?:\\[uU]([0-9a-fA-F]{4}))?|\\(["\\/bfnrt])/g, (_m, hi?: string, lo?: string, short?: string) => {
    if (short !== undefined) return SHORT_ESCAPES[short] as string;
    const a = parseInt(hi as string, 16);
    if (lo !== undefined) {
      const b = parseInt(lo, 16);
      if (a >= 0xd800 && a < 0xdc00 && b >= 0xdc00 && b < 0xe000) return utf8Bytes(0x10000 + ((a - 0xd800) << 10) + (b - 0xdc00));
      return utf8Bytes(a) + utf8Bytes(b);
    }
    return utf8Bytes(a);
  });
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
  return [...base, ...plus, ...form];
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
