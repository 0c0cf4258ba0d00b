// Response redaction (SPEC §6.4), unit by unit: every listed form (raw,
// base64 and base64url at the three alignments and base32 at the five,
// padded or not, with nothing decodable left beside the mark; hex in either
// case; UTF-16LE and UTF-16BE) under every escape (percent in either case,
// fully or partly, and double-encoded; \xXX; JSON, \u in either case,
// \" \\ \/; HTML numeric and named references; "+" for a space), each
// escape mixed with the others, non-ASCII secrets, the short-needle floor,
// longest match first, overlapping occurrences, the cut in input positions,
// the read margin, and near misses that must stay as they are.
// The independent detector sees each unredacted form and nothing of the
// redacted output.
import t from 'tap';
import { buildRedactor, redact, redactText, MIN_NEEDLE, MAX_REF_DIGITS, Redactor } from '../../daemon/pipeline/redact';
import { base32, exposures } from '../helpers/exposure';

const LABEL = 'api';
const MARK = `[REDACTED:${LABEL}]`;
// A secret with the characters encodings treat specially.
const S = 'tk_Q9/x+Yv= "q\\u%26&w~0123456789ABCDEF';
const SB = Buffer.from(S, 'utf8');
const INJECTED = `Bearer ${S}`;

function redactor(...needles: string[]): Redactor {
  const r = buildRedactor(
    needles.map((n) => Buffer.from(n, 'utf8')),
    LABEL,
  );
  if (!r) throw new Error('no redactor');
  return r;
}

const pctAll = (b: Buffer, upper: boolean): string =>
  [...b]
    .map((c) => {
      const h = c.toString(16).padStart(2, '0');
      return `%${upper ? h.toUpperCase() : h}`;
    })
    .join('');
const uAll = (b: Buffer, upper: boolean): string =>
  [...b]
    .map((c) => {
      const h = c.toString(16).padStart(4, '0');
      return `\\u${upper ? h.toUpperCase() : h}`;
    })
    .join('');
const jsonInner = (s: string): string => JSON.stringify(s).slice(1, -1);
const hex2 = (c: number, upper = false): string =>
  c.toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']();
// Per character (code point) or per byte, one escape each.
const htmlDec = (s: string, zeros = 0): string =>
  [...s].map((c) => `&#${'0'.repeat(zeros)}${c.codePointAt(0)};`).join('');
const htmlHex = (s: string, x: 'x' | 'X', upper: boolean, width = 0): string =>
  [...s]
    .map((c) => {
      const h = (c.codePointAt(0) as number).toString(16).padStart(width, '0');
      return `&#${x}${upper ? h.toUpperCase() : h};`;
    })
    .join('');
const xAll = (b: Buffer, upper: boolean): string => [...b].map((c) => `\\x${hex2(c, upper)}`).join('');
const pct2All = (b: Buffer, upper: boolean): string => [...b].map((c) => `%25${hex2(c, upper)}`).join('');
// What an HTML escaper leaves: letters and digits raw, the rest as references.
const htmlPartly = (s: string): string =>
  [...s].map((c) => (/[A-Za-z0-9]/.test(c) ? c : `&#${c.codePointAt(0)};`)).join('');
// Each byte its own way, in turn: raw, %XX, %25XX, \xXX, \u00XX, &#NN;,
// &#xNN; (the last three stand for characters, so only for ASCII bytes).
const mixed = (b: Buffer, shift = 0): string =>
  [...b]
    .map((c, i) => {
      const ways = [String.fromCharCode(c), `%${hex2(c, true)}`, `%25${hex2(c)}`, `\\x${hex2(c)}`];
      if (c < 0x80) ways.push(`\\u00${hex2(c, true)}`, `&#${c};`, `&#x${hex2(c)};`);
      return ways[(i + shift) % ways.length] as string;
    })
    .join('');
const utf16le = (s: string): string => Buffer.from(s, 'utf16le').toString('latin1');
const utf16be = (s: string): string => Buffer.from(s, 'utf16le').swap16().toString('latin1');

// Forms that are the whole secret, written in one way: the output must be
// exactly before + MARK + after.
const WHOLE: [string, string][] = [
  ['raw', S],
  ['hex, lower case', SB.toString('hex')],
  ['hex, upper case', SB.toString('hex').toUpperCase()],
  ['hex, mixed case', SB.toString('hex').replace(/[a-f]/g, (c, i: number) => (i % 3 ? c : c.toUpperCase()))],
  ['percent-encoded, every byte, lower case', pctAll(SB, false)],
  ['percent-encoded, every byte, upper case', pctAll(SB, true)],
  ['percent-encoded, every byte, mixed case', pctAll(SB, true).replace(/%2F/g, '%2f')],
  ['percent-encoded, partly (encodeURIComponent)', encodeURIComponent(S)],
  [
    'percent-encoded, one byte in two',
    [...SB].map((c, i) => (i % 2 ? `%${c.toString(16).padStart(2, '0')}` : String.fromCharCode(c))).join(''),
  ],
  ['form-encoded (space as +)', new URLSearchParams({ k: S }).toString().slice(2)],
  ['JSON string (\\" and \\\\)', jsonInner(S)],
  ['JSON, every character \\u-escaped, lower case', uAll(SB, false)],
  ['JSON, every character \\u-escaped, upper case', uAll(SB, true)],
  ['JSON with \\/', jsonInner(S).replace(/\//g, '\\/')],
  [
    'JSON, some characters \\u-escaped',
    [...S].map((c, i) => (i % 3 === 0 ? uAll(Buffer.from(c), false) : jsonInner(c))).join(''),
  ],
  ['hex, percent-encoded', pctAll(Buffer.from(SB.toString('hex')), false)],
  ['percent-encoded twice, every byte, lower case', pct2All(SB, false)],
  ['percent-encoded twice, every byte, upper case', pct2All(SB, true)],
  [
    'percent-encoded twice, raw and once in turn',
    [...SB].map((c, i) => [String.fromCharCode(c), `%${hex2(c)}`, `%25${hex2(c, true)}`][i % 3]).join(''),
  ],
  ['\\x, every byte, lower case', xAll(SB, false)],
  ['\\x, every byte, upper case', xAll(SB, true)],
  ['\\x, one byte in two', [...SB].map((c, i) => (i % 2 ? `\\x${hex2(c)}` : String.fromCharCode(c))).join('')],
  ['HTML decimal references, every character', htmlDec(S)],
  ['HTML decimal references with leading zeros', htmlDec(S, 2)],
  ['HTML hex references, &#x lower case', htmlHex(S, 'x', false)],
  ['HTML hex references, &#X upper case', htmlHex(S, 'X', true)],
  [`HTML hex references, ${MAX_REF_DIGITS} digits`, htmlHex(S, 'x', false, MAX_REF_DIGITS)],
  ['HTML references, partly (what an HTML escaper leaves)', htmlPartly(S)],
  ['HTML named references (&amp; &quot;)', S.replace(/&/g, '&amp;').replace(/"/g, '&quot;')],
  ['every escape, mixed in one occurrence', mixed(SB)],
  ['every escape, mixed, shifted', mixed(SB, 3)],
  ['UTF-16LE', utf16le(S)],
  ['UTF-16BE', utf16be(S)],
];

t.test('whole-secret forms are replaced exactly, once', async (t) => {
  const r = redactor(S);
  for (const [what, form] of WHOLE) {
    const input = Buffer.from(`<a href="x?${'v'}=`, 'latin1');
    const data = Buffer.concat([input, Buffer.from(form, 'latin1'), Buffer.from('">next</a>')]);
    const out = redact(r, data);
    t.equal(out.data.toString('latin1'), `<a href="x?v=${MARK}">next</a>`, what);
    t.equal(out.count, 1, `${what}: counted once`);
    t.equal(out.cut, false, `${what}: nothing cut`);
    t.not(exposures(data, S).length, 0, `${what}: the detector sees the form`);
    t.same(exposures(out.data, S), [], `${what}: the detector finds nothing left`);
  }
});

t.test('base64 and base64url at the three alignments, padded or not', async (t) => {
  const r = redactor(S);
  for (const prefix of ['', 'a', 'ab']) {
    for (const suffix of ['', 'z', 'zz']) {
      const bytes = Buffer.concat([Buffer.from(prefix), SB, Buffer.from(suffix)]);
      const encodings: [string, string][] = [
        ['base64', bytes.toString('base64')],
        ['base64 unpadded', bytes.toString('base64').replace(/=+$/, '')],
        ['base64url', bytes.toString('base64url')],
        ['base64url padded', bytes.toString('base64').replace(/\+/g, '-').replace(/\//g, '_')],
        ['base64, + and / percent-encoded', encodeURIComponent(bytes.toString('base64'))],
        ['base64 as a JSON string with \\/', bytes.toString('base64').replace(/\//g, '\\/')],
      ];
      for (const [what, enc] of encodings) {
        const label = `${what}, ${prefix.length} byte(s) before, ${suffix.length} after`;
        const out = redact(r, Buffer.from(`token: ${enc}\n`));
        const text = out.data.toString('latin1');
        t.equal(out.count, 1, `${label}: one occurrence`);
        t.ok(text.startsWith('token: ') && text.endsWith('\n') && text.includes(MARK), `${label}: ${text}`);
        // What is left around the mark is at most the groups that also hold
        // surrounding bytes: less than two groups of four on each side.
        t.ok(text.length - 'token: \n'.length - MARK.length <= 2 * 3 + 2 * 6, `${label}: little is left (${text})`);
        t.same(exposures(out.data, S), [], `${label}: the detector finds nothing left`);
      }
    }
  }
});

// ---- Edges of base64 and base32: every character that carries a bit of
// the secret is replaced, so nothing of it stays decodable beside the mark.
// The secret's bytes are printable ASCII, the bytes around it are all
// above 0x7f: any byte decoded from what is left that is below 0x80 is a
// secret byte left decodable.

interface Radix {
  name: string;
  bits: number;
  group: number; // bytes per group
  encode: (b: Buffer) => string; // padded
  decode: (s: string) => Buffer; // the complete bytes
  variants: [string, (s: string) => string][];
}

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
function base32Decode(s: string): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const c of s.replace(/=+$/, '').toUpperCase()) {
    acc = ((acc << 5) | B32.indexOf(c)) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  return Buffer.from(out);
}

const RADIXES: Radix[] = [
  {
    name: 'base64',
    bits: 6,
    group: 3,
    encode: (b) => b.toString('base64'),
    decode: (s) => Buffer.from(s, 'base64'),
    variants: [
      ['padded', (s) => s],
      ['unpadded', (s) => s.replace(/=+$/, '')],
      ['url', (s) => s.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')],
    ],
  },
  {
    name: 'base32',
    bits: 5,
    group: 5,
    encode: base32,
    decode: base32Decode,
    variants: [
      ['padded', (s) => s],
      ['unpadded', (s) => s.replace(/=+$/, '')],
      ['lower case', (s) => s.toLowerCase()],
    ],
  },
];

// Printable bytes, and bytes above ASCII around them.
const secretOf = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => 0x21 + ((i * 37 + 11) % 94)));
const around = (n: number, seed: number): Buffer =>
  Buffer.from(Array.from({ length: n }, (_, i) => 0x80 + ((i * 53 + seed * 29) % 128)));

// The bytes wholly carried by the characters from index `from` on of an
// encoding (realigned to their group, then the bytes that began before
// `from` dropped).
function decodableFrom(rx: Radix, right: string, from: number): Buffer {
  const perGroup = (rx.group * 8) / rx.bits;
  const skip = from % perGroup;
  const bytes = rx.decode('A'.repeat(skip) + right);
  return bytes.subarray(Math.ceil((from * rx.bits) / 8) - ((from - skip) * rx.bits) / 8);
}

for (const rx of RADIXES) {
  t.test(
    `${rx.name}: every character carrying a bit of the secret is replaced, nothing decodable is left`,
    async (t) => {
      let cases = 0;
      for (let n = 12; n < 12 + rx.group; n++) {
        const secret = secretOf(n);
        const r = buildRedactor([secret], LABEL) as Redactor;
        for (let p = 0; p <= rx.group + 1; p++) {
          for (let q = 0; q <= rx.group + 1; q++) {
            const full = rx.encode(Buffer.concat([around(p, n), secret, around(q, n + 1)]));
            for (const [variant, shape] of rx.variants) {
              const enc = shape(full);
              const label = `${variant}, ${n} bytes, ${p} before, ${q} after`;
              const out = redact(r, Buffer.from(`=${enc};`)).data.toString('latin1');
              cases += 1;
              const [left, right] = out.slice(1, -1).split(MARK) as [string, string | undefined];
              if (right === undefined || !enc.startsWith(left) || !enc.endsWith(right)) {
                t.fail(`${label}: one mark, the rest as it was: ${out}`);
                continue;
              }
              const leak = [...rx.decode(left), ...decodableFrom(rx, right, enc.length - right.length)].filter(
                (b) => b < 0x80,
              );
              if (leak.length > 0)
                t.fail(
                  `${label}: secret bytes decodable beside the mark: ${JSON.stringify(Buffer.from(leak).toString('latin1'))}`,
                );
              // Exactly from the first character with a secret bit to the
              // last; with nothing after the secret, the padding goes too.
              const first = Math.floor((p * 8) / rx.bits);
              const end = q === 0 ? enc.length : Math.ceil(((p + n) * 8) / rx.bits);
              if (out !== `=${enc.slice(0, first)}${MARK}${enc.slice(end)};`)
                t.equal(
                  out,
                  `=${enc.slice(0, first)}${MARK}${enc.slice(end)};`,
                  `${label}: replaced from character ${first} to ${end}`,
                );
            }
          }
        }
        r.wipe();
      }
      t.pass(`${cases} encodings, each replaced exactly from its first secret bit to its last, padding included`);
    },
  );
}

t.test('the edge check can fail: the part made of whole groups alone leaves secret bytes decodable', async (t) => {
  // What a redactor that stopped at the stable part would leave, 1 byte
  // before the secret: the group holding it and the secret's first 2 bytes.
  const secret = secretOf(13);
  const enc = Buffer.concat([around(1, 0), secret, around(2, 1)]).toString('base64');
  const left = enc.slice(0, 4);
  t.same(
    [...RADIXES[0]!.decode(left)].filter((b) => b < 0x80),
    [...secret.subarray(0, 2)],
    'the group before the stable part decodes to secret bytes',
  );
  const right = enc.slice(Math.floor((1 + 13) / 3) * 4);
  t.ok(
    [...decodableFrom(RADIXES[0]!, right, Math.floor((1 + 13) / 3) * 4)].some((b) => b < 0x80),
    'so does the group after it',
  );
});

t.test('base32 at the five alignments, escaped and partly percent-encoded', async (t) => {
  const r = redactor(S);
  for (let p = 0; p < 5; p++) {
    const enc = base32(Buffer.concat([Buffer.from('abcd'.slice(0, p)), SB, Buffer.from('!')]));
    for (const [what, text] of [
      ['as is', enc],
      ['lower case', enc.toLowerCase()],
      ['padding percent-encoded', enc.replace(/=/g, '%3D')],
      ['every character \\u-escaped', uAll(Buffer.from(enc), false)],
      ['every character as an HTML reference', htmlDec(enc)],
    ] as [string, string][]) {
      const out = redact(r, Buffer.from(`[${text}]`));
      t.equal(out.count, 1, `${what}, ${p} byte(s) before: one occurrence`);
      t.same(exposures(out.data, S), [], `${what}, ${p} byte(s) before: nothing left`);
    }
  }
});

t.test('non-ASCII characters: HTML references of the code point, \\x and %25 of the bytes, UTF-16', async (t) => {
  const U = 'pässwörd-€-😀-Ω7';
  const UB = Buffer.from(U, 'utf8');
  const r = redactor(U);
  const forms: [string, string][] = [
    ['HTML decimal references of every code point', htmlDec(U)],
    ['HTML hex references of every code point', htmlHex(U, 'x', true)],
    [
      'HTML references of the non-ASCII characters only',
      [...U].map((c) => (c.codePointAt(0)! > 0x7f ? `&#${c.codePointAt(0)};` : c)).join(''),
    ],
    [
      'HTML references and raw UTF-8 in turn',
      [...U]
        .map((c, i) => (i % 2 ? `&#x${c.codePointAt(0)!.toString(16)};` : Buffer.from(c).toString('latin1')))
        .join(''),
    ],
    ['\\x of every byte', xAll(UB, false)],
    ['%25 of every byte', pct2All(UB, true)],
    ['every escape, mixed', mixed(UB)],
    ['UTF-16LE (a surrogate pair for the emoji)', utf16le(U)],
    ['UTF-16BE', utf16be(U)],
    ['UTF-16LE after a byte-order mark', `\xff\xfe${utf16le(U)}`],
  ];
  for (const [what, form] of forms) {
    const data = Buffer.from(`<${form}>`, 'latin1');
    const out = redact(r, data);
    t.equal(
      out.data.toString('latin1'),
      what.includes('mark') ? `<\xff\xfe${MARK}>` : `<${MARK}>`,
      `${what}: replaced exactly`,
    );
    t.equal(out.count, 1, `${what}: once`);
    t.not(exposures(data, U).length, 0, `${what}: the detector sees it`);
    t.same(exposures(out.data, U), [], `${what}: nothing left`);
  }
});

t.test(`HTML references: at most ${MAX_REF_DIGITS} digits; malformed ones are not read`, async (t) => {
  const r = redactor(S);
  const one = (i: number, ref: string): string => S.slice(0, i) + ref + S.slice(i + 1);
  const at = S.indexOf('/');
  const ok: [string, string][] = [
    [`${MAX_REF_DIGITS} hex digits`, one(at, `&#x${'2f'.padStart(MAX_REF_DIGITS, '0')};`)],
    [`${MAX_REF_DIGITS} decimal digits`, one(at, `&#${'47'.padStart(MAX_REF_DIGITS, '0')};`)],
    ['&#X and upper-case digits', one(at, '&#X2F;')],
  ];
  for (const [what, text] of ok) t.equal(redact(r, Buffer.from(text)).count, 1, what);
  const bad: [string, string][] = [
    [`${MAX_REF_DIGITS + 1} hex digits`, one(at, `&#x${'2f'.padStart(MAX_REF_DIGITS + 1, '0')};`)],
    [`${MAX_REF_DIGITS + 1} decimal digits`, one(at, `&#${'47'.padStart(MAX_REF_DIGITS + 1, '0')};`)],
    ['no semicolon', one(at, '&#47')],
    ['no digits', one(at, '&#x;')],
    ['a hex digit in a decimal reference', one(at, '&#4f;')],
    ['the reference of another character', one(at, '&#48;')],
    ['a named reference of another character', one(S.indexOf('&'), '&lt;')],
    ['a code point beyond Unicode', one(at, '&#x11002f;')],
  ];
  for (const [what, text] of bad) {
    const out = redact(r, Buffer.from(text));
    t.equal(out.count, 0, `${what}: not redacted`);
    t.equal(out.data.toString(), text, `${what}: unchanged`);
  }
});

t.test('\\x, %25 and UTF-16: near misses are left as they are', async (t) => {
  const r = redactor(S, INJECTED);
  const at = S.indexOf('Q');
  const cases: [string, string][] = [
    ['\\x with one byte changed', xAll(SB, false).replace('\\x51', '\\x52')],
    ['\\x with one digit missing', xAll(SB, false).replace('\\x51', '\\x5')],
    ['\\u in place of \\x (\\u needs four digits)', xAll(SB, false).replace('\\x51', '\\u51')],
    ['%25 with one byte changed', pct2All(SB, false).replace('%2551', '%2552')],
    ['%25 with a bad digit', pct2All(SB, false).replace('%2551', '%255G')],
    ['%25 alone where a byte was', pct2All(SB, false).replace('%2551', '%25')],
    ['UTF-16LE with one unit changed', utf16le(S.slice(0, at) + 'R' + S.slice(at + 1))],
    ['UTF-16LE less its last byte', utf16le(S).slice(0, -1)],
    ['UTF-32LE', [...S].map((c) => `${c}\0\0\0`).join('')],
    ['base32 of the secret with one byte changed', base32(Buffer.from(S.slice(0, at) + 'R' + S.slice(at + 1)))],
  ];
  for (const [what, text] of cases) {
    const out = redact(r, Buffer.from(text, 'latin1'));
    t.equal(out.count, 0, what);
    t.equal(out.data.toString('latin1'), text, `${what}: unchanged`);
  }
  // One byte changed, wherever it is, under each new escape.
  const flip = (i: number): string => S.slice(0, i) + String.fromCharCode(S.charCodeAt(i) ^ 0x01) + S.slice(i + 1);
  for (let i = 0; i < S.length; i++) {
    for (const text of [
      htmlDec(flip(i)),
      xAll(Buffer.from(flip(i)), true),
      pct2All(Buffer.from(flip(i)), false),
      mixed(Buffer.from(flip(i))),
      utf16be(flip(i)),
    ]) {
      const out = redact(r, Buffer.from(text, 'latin1'));
      if (out.count !== 0) t.fail(`byte ${i} changed, redacted: ${text}`);
    }
  }
  t.pass('no single-byte change of the secret is redacted in HTML references, \\x, %25, mixed escapes or UTF-16BE');
});

t.test('a secret that looks like escapes is found raw, and escaped', async (t) => {
  // Each secret, and what its escapes stand for.
  for (const [secret, meaning] of [
    ['Z%41x%2541q', 'ZAx%41q'],
    ['Z\\x41\\u0042q', 'ZABq'],
    ['Z&#65;&amp;q', 'ZA&q'],
    ['%41%42%43', 'ABC'],
    ['&#x41;&#66;', 'AB'],
  ] as [string, string][]) {
    const r = redactor(secret);
    for (const [what, text] of [
      ['raw', secret],
      ['percent-encoded', encodeURIComponent(secret)],
      ['percent-encoded twice', encodeURIComponent(encodeURIComponent(secret))],
      ['JSON', jsonInner(secret)],
      ['HTML references', htmlDec(secret)],
    ] as [string, string][]) {
      const out = redact(r, Buffer.from(`(${text})`));
      t.equal(out.data.toString(), `(${MARK})`, `${JSON.stringify(secret)} ${what}`);
    }
    t.equal(
      redact(r, Buffer.from(`(${meaning})`)).count,
      0,
      `${JSON.stringify(secret)}: what its escapes stand for is another text`,
    );
  }
});

t.test('the whole injected value wins over the secret inside it', async (t) => {
  const r = redactor(S, INJECTED);
  let out = redact(r, Buffer.from(`{"authorization":"${jsonInner(INJECTED)}"}`));
  t.equal(out.data.toString(), `{"authorization":"${MARK}"}`, '"Bearer …" is replaced as one');
  t.equal(out.count, 1);
  out = redact(r, Buffer.from(`Bearer Bearer ${S}`));
  t.equal(out.data.toString(), `Bearer ${MARK}`, 'only one "Bearer" belongs to the value');
  t.equal(out.count, 1);
  out = redact(r, Buffer.from(`${pctAll(Buffer.from(INJECTED), true)}&x=${S}`));
  t.equal(out.data.toString(), `${MARK}&x=${MARK}`, 'the percent-encoded value, then the bare secret');
  t.equal(out.count, 2);
  // HTTP Basic: "user:secret" in base64, as the Authorization header holds it.
  const pair = `bob:${S}`;
  const rb = redactor(S, pair);
  const basic = `Basic ${Buffer.from(pair).toString('base64')}`;
  out = redact(rb, Buffer.from(basic));
  t.equal(out.count, 1, 'the base64 of user:secret is one occurrence');
  t.equal(out.data.toString(), `Basic ${MARK}`, 'replaced whole, its last character and padding too');
  t.same(exposures(out.data, S), []);
  // The longest form can be written with the longest escape of every byte,
  // and still fits in maxMatchLength (what is read beyond the cap).
  const longest = htmlHex(Buffer.from(INJECTED).toString('hex'), 'x', false, MAX_REF_DIGITS);
  t.ok(
    r.maxMatchLength >= longest.length,
    `maxMatchLength covers the hex of the injected value, every byte as an HTML reference of ${MAX_REF_DIGITS} digits`,
  );
  out = redact(r, Buffer.from(longest));
  t.equal(out.data.toString(), MARK, 'that longest spelling is found');
  const wrapped = (Buffer.from(INJECTED).toString('base64').match(/./g) as string[])
    .map((c) => `&#x${'0'.repeat(MAX_REF_DIGITS - 2)}${hex2(c.charCodeAt(0))};`)
    .join('\\r\\n');
  t.ok(
    r.maxMatchLength >= wrapped.length,
    'and base64 with every character so escaped and a JSON \\r\\n between any two',
  );
  out = redact(r, Buffer.from(wrapped));
  t.equal(out.data.toString(), MARK, 'that spelling is found too');
});

t.test('occurrences: adjacent, overlapping, many', async (t) => {
  const r = redactor(S);
  let out = redact(r, Buffer.from(`${S}${S}`));
  t.equal(out.data.toString(), `${MARK}${MARK}`, 'adjacent occurrences are both replaced');
  t.equal(out.count, 2);
  const O = 'xyzxyzxyzK';
  const ro = redactor(O);
  out = redact(ro, Buffer.from('xyzxyzxyzxyzK'));
  t.equal(out.data.toString(), `xyz${MARK}`, 'the occurrence is found after a false start that overlaps it');
  const P = 'abcabcab';
  const rp = redactor(P);
  out = redact(rp, Buffer.from('abcabcabcab'));
  t.equal(
    out.data.toString(),
    `${MARK}cab`,
    'overlapping occurrences: the first is replaced, what is left holds no whole secret',
  );
  t.equal(out.count, 1);
  const many = Array.from({ length: 500 }, (_, i) => (i % 2 ? S : SB.toString('hex'))).join(',');
  out = redact(r, Buffer.from(many));
  t.equal(out.count, 500);
  t.equal(out.data.toString(), Array.from({ length: 500 }, () => MARK).join(','));
});

t.test('non-ASCII secrets: bytes, JSON \\u escapes of the code points, percent', async (t) => {
  const U = 'pässwörd-€-😀-Ω7';
  const UB = Buffer.from(U, 'utf8');
  const r = redactor(U);
  const jsonEscaped = (upper: boolean): string =>
    JSON.stringify(U)
      .slice(1, -1)
      .replace(/[^\x20-\x7e]/g, (c) => {
        const h = c.charCodeAt(0).toString(16).padStart(4, '0');
        return `\\u${upper ? h.toUpperCase() : h}`;
      });
  t.match(jsonEscaped(false), /\\ud83d\\ude00/, 'the emoji is written as a surrogate pair');
  const forms: [string, Buffer][] = [
    ['UTF-8 bytes', UB],
    ['JSON \\u escapes, lower case', Buffer.from(jsonEscaped(false))],
    ['JSON \\u escapes, upper case', Buffer.from(jsonEscaped(true))],
    [
      'every character \\u-escaped',
      Buffer.from(
        [...U]
          .map((c) =>
            [...Array(c.length).keys()].map((k) => `\\u${c.charCodeAt(k).toString(16).padStart(4, '0')}`).join(''),
          )
          .join(''),
      ),
    ],
    ['percent-encoded UTF-8', Buffer.from(encodeURIComponent(U))],
    ['percent-encoded UTF-8, lower case', Buffer.from(encodeURIComponent(U).toLowerCase())],
    ['hex', Buffer.from(UB.toString('hex'))],
    ['base64', Buffer.from(UB.toString('base64'))],
  ];
  for (const [what, form] of forms) {
    const out = redact(r, Buffer.concat([Buffer.from('['), form, Buffer.from(']')]));
    t.equal(out.count, 1, `${what}: one occurrence`);
    t.same(exposures(out.data, U), [], `${what}: nothing left`);
    if (what !== 'base64') t.equal(out.data.toString(), `[${MARK}]`, `${what}: replaced exactly`);
  }
  // A header value is a latin1 string of the bytes on the wire.
  const header = redactText(r, `x ${UB.toString('latin1')} y`);
  t.same(header, { text: `x ${MARK} y`, count: 1 }, 'in a header value (latin1)');
});

t.test(`needles shorter than ${MIN_NEEDLE} bytes are not searched`, async (t) => {
  t.equal(MIN_NEEDLE, 4);
  t.equal(buildRedactor([Buffer.from('abc')], LABEL), null, 'nothing to search for');
  t.equal(buildRedactor([], LABEL), null);
  const r = redactor('abc', 'wxyz');
  const out = redact(r, Buffer.from('abc wxyz abc'));
  t.equal(out.data.toString(), `abc ${MARK} abc`, 'the 4-byte needle is searched, the 3-byte one is not');
  t.equal(out.count, 1);
  const none = redact(null, Buffer.from('0123456789'), 4);
  t.same(
    { data: none.data.toString(), count: none.count, cut: none.cut },
    { data: '0123', count: 0, cut: true },
    'no redactor: only the cut',
  );
});

t.test('the cut is in input positions', async (t) => {
  const r = redactor(S);
  const CUT = 100;
  const fill = (n: number, c: string): string => c.repeat(n);
  const run = (input: string, cut = CUT): { text: string; count: number; cut: boolean } => {
    const o = redact(r, Buffer.from(input, 'latin1'), cut);
    return { text: o.data.toString('latin1'), count: o.count, cut: o.cut };
  };
  t.same(
    run(fill(150, 'a')),
    { text: fill(100, 'a'), count: 0, cut: true },
    'no occurrence: the first bytes up to the cut',
  );
  t.same(run(fill(100, 'a')), { text: fill(100, 'a'), count: 0, cut: false }, 'exactly the cut: not cut');
  t.same(run(fill(40, 'a') + S), { text: fill(40, 'a') + MARK, count: 1, cut: false }, 'an occurrence within the cut');
  // An occurrence that starts before the cut and ends beyond it is replaced
  // whole: no leading part of the secret is returned.
  for (const before of [1, 5, S.length - 1]) {
    const got = run(fill(CUT - before, 'a') + S + fill(50, 'b'));
    t.same(
      got,
      { text: (fill(CUT - before, 'a') + MARK).slice(0, CUT), count: 1, cut: true },
      `straddling the cut, ${before} byte(s) before it`,
    );
  }
  t.same(
    run(fill(CUT, 'a') + S),
    { text: fill(CUT, 'a'), count: 0, cut: true },
    'an occurrence starting at the cut is left out, not counted',
  );
  // Many occurrences, each longer than its mark: the output shrinks, but
  // nothing from beyond input position CUT is pulled into it.
  const unit = `${S}.`;
  const input = unit.repeat(10) + fill(200, 'Z');
  const o = run(input, 300);
  const starts = Math.ceil(300 / unit.length);
  t.same(
    o,
    { text: `${MARK}.`.repeat(starts - 1) + MARK, count: starts, cut: true },
    'marks for the occurrences that start before the cut, nothing after',
  );
  t.notMatch(o.text, /Z/, 'no byte from beyond the cut');
  t.same(run('abc', 0), { text: '', count: 0, cut: true }, 'a cut of 0');
  t.same(run(S, Infinity), { text: MARK, count: 1, cut: false }, 'no cut');
});

t.test('near misses are left as they are', async (t) => {
  const r = redactor(S, INJECTED);
  const flip = (i: number): string => S.slice(0, i) + String.fromCharCode(S.charCodeAt(i) ^ 0x01) + S.slice(i + 1);
  for (let i = 0; i < S.length; i++) {
    const near = flip(i);
    for (const [what, text] of [
      ['raw', near],
      ['percent-encoded', pctAll(Buffer.from(near), true)],
      ['JSON \\u-escaped', uAll(Buffer.from(near), false)],
      ['hex', Buffer.from(near).toString('hex')],
    ] as [string, string][]) {
      const out = redact(r, Buffer.from(text, 'latin1'));
      if (out.count !== 0) t.fail(`${what} with byte ${i} changed was redacted: ${out.data.toString('latin1')}`);
    }
  }
  t.pass('no single-byte change of the secret is redacted, raw, percent-encoded, \\u-escaped or in hex');
  // In base64 a change inside every aligned group breaks every form.
  const mid = flip(Math.floor(S.length / 2));
  for (const p of ['', 'a', 'ab']) {
    const out = redact(r, Buffer.from(Buffer.from(p + mid).toString('base64')));
    t.equal(out.count, 0, `base64 of a near miss, ${p.length} byte(s) before`);
  }
  const cases: [string, string][] = [
    ['the secret less its last byte', S.slice(0, -1)],
    ['the secret less its first byte', S.slice(1)],
    ['the secret in other case', S.toLowerCase()],
    ['the secret reversed', [...S].reverse().join('')],
    ['a percent escape with a bad digit', pctAll(SB, true).replace('%2F', '%2G')],
    ['a \\u escape of the wrong length', uAll(SB, false).replace('\\u002f', '\\u02f')],
  ];
  for (const [what, text] of cases) {
    const out = redact(r, Buffer.from(text, 'latin1'));
    t.equal(out.count, 0, what);
    t.equal(out.data.toString('latin1'), text, `${what}: unchanged`);
  }
});

t.test('header values and names (redactText)', async (t) => {
  const r = redactor(S, INJECTED);
  t.same(redactText(r, `Bearer ${S}`), { text: MARK, count: 1 });
  t.same(redactText(r, `a=${encodeURIComponent(S)}; b=${SB.toString('hex')}`), {
    text: `a=${MARK}; b=${MARK}`,
    count: 2,
  });
  t.same(redactText(r, `x-${SB.toString('hex')}`), { text: `x-${MARK}`, count: 1 }, 'a header name holding the hex');
  t.same(redactText(null, S), { text: S, count: 0 }, 'redaction off');
});

t.test('base64 broken into lines (PEM, MIME, JSON-escaped newlines) is still found', async (t) => {
  const secret = Buffer.from(randomBytesForWrap(96));
  const r = buildRedactor([Buffer.from(secret)], 'k') as Redactor;
  const mark = '[REDACTED:k]';
  for (const [name, sep] of [
    ['LF every 64', '\n'],
    ['CRLF every 76', '\r\n'],
    ['JSON \\n every 64', '\\n'],
  ] as const) {
    const width = name.includes('76') ? 76 : 64;
    for (let prefix = 0; prefix < 3; prefix++) {
      const b64 = Buffer.concat([Buffer.alloc(prefix, 7), secret, Buffer.from('tail')]).toString('base64');
      const lines = b64.match(new RegExp(`.{1,${width}}`, 'g')) as string[];
      const out = redact(r, Buffer.from(`-----BEGIN X-----${sep}${lines.join(sep)}${sep}-----END X-----`));
      t.equal(out.count, 1, `${name}, ${prefix} bytes before: one occurrence`);
      t.match(out.data.toString(), mark, `${name}, ${prefix} bytes before: replaced`);
    }
  }
  t.ok(r.maxMatchLength >= Math.ceil((secret.length * 4) / 3) * 6, 'the read margin covers a wrapped, escaped form');
});

// Bytes with every value, so the base64 uses "+" and "/" too.
function randomBytesForWrap(n: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * 97 + 13) % 256);
}

t.test('key material as `openssl -text` prints it, and base64 indented inside YAML', async (t) => {
  const secret = Buffer.from(randomBytesForWrap(40));
  const r = buildRedactor([Buffer.from(secret)], 'k') as Redactor;
  const colon = (b: Buffer): string => [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
  // fifteen bytes a line, each line indented four spaces, a colon at the end of all but the last
  const lines = (b: Buffer, sep: string, indent: string): string => {
    const rows: string[] = [];
    for (let i = 0; i < b.length; i += 15) rows.push(indent + colon(b.subarray(i, i + 15)));
    return rows.join(`:${sep}`);
  };
  for (const [name, text] of [
    ['one line', `priv: ${colon(secret)}\n`],
    ['upper case', `priv: ${colon(secret).toUpperCase()}\n`],
    ['openssl lines', `priv:\n${lines(secret, '\n', '    ')}\npub:\n`],
    ['CRLF and a tab', `priv:\r\n${lines(secret, '\r\n', '\t')}\r\n`],
    ['JSON-escaped', JSON.stringify({ out: `priv:\n${lines(secret, '\n', '    ')}\n` })],
    ['after a leading 00 byte', `d:\n    00:${colon(secret)}\n`],
    [
      'base64 in an indented YAML block',
      `key: |\n${(secret.toString('base64').match(/.{1,20}/g) as string[]).map((l) => `      ${l}`).join('\n')}\n`,
    ],
  ] as const) {
    const out = redact(r, Buffer.from(text));
    t.equal(out.count, 1, `${name}: one occurrence`);
    t.notOk(
      out.data
        .toString()
        .replace(/[:\s\\n]/g, '')
        .toLowerCase()
        .includes(secret.subarray(0, 8).toString('hex')),
      name,
    );
  }
  t.ok(
    r.maxMatchLength >= (secret.length * 3 - 1) * (12 + 20),
    'the read margin covers the wrapped, escaped colon form',
  );
});
