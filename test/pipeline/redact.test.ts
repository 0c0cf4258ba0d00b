// Response redaction (SPEC §6.4), unit by unit: every listed form (raw,
// base64 and base64url at the three alignments, padded or not, hex in
// either case) under every escape (percent in either case, fully or partly;
// JSON, \u in either case, \" \\ \/; "+" for a space), non-ASCII secrets,
// the short-needle floor, longest match first, overlapping occurrences, the
// cut in input positions, and near misses that must stay as they are.
// Each redacted output is also checked by the independent detector.
import t from 'tap';
import { buildRedactor, redact, redactText, MIN_NEEDLE, Redactor } from '../../daemon/pipeline/redact';
import { exposures } from '../helpers/exposure';

const LABEL = 'api';
const MARK = `[REDACTED:${LABEL}]`;
// A secret with the characters encodings treat specially.
const S = 'tk_Q9/x+Yv= "q\\u%26&w~0123456789ABCDEF';
const SB = Buffer.from(S, 'utf8');
const INJECTED = `Bearer ${S}`;

function redactor(...needles: string[]): Redactor {
  const r = buildRedactor(needles.map((n) => Buffer.from(n, 'utf8')), LABEL);
  if (!r) throw new Error('no redactor');
  return r;
}

const pctAll = (b: Buffer, upper: boolean): string => [...b].map((c) => {
  const h = c.toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
}).join('');
const uAll = (b: Buffer, upper: boolean): string => [...b].map((c) => {
  const h = c.toString(16).padStart(4, '0');
  return `\\u${upper ? h.toUpperCase() : h}`;
}).join('');
const jsonInner = (s: string): string => JSON.stringify(s).slice(1, -1);

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
  ['percent-encoded, one byte in two', [...SB].map((c, i) => (i % 2 ? `%${c.toString(16).padStart(2, '0')}` : String.fromCharCode(c))).join('')],
  ['form-encoded (space as +)', new URLSearchParams({ k: S }).toString().slice(2)],
  ['JSON string (\\" and \\\\)', jsonInner(S)],
  ['JSON, every character \\u-escaped, lower case', uAll(SB, false)],
  ['JSON, every character \\u-escaped, upper case', uAll(SB, true)],
  ['JSON with \\/', jsonInner(S).replace(/\//g, '\\/')],
  ['JSON, some characters \\u-escaped', [...S].map((c, i) => (i % 3 === 0 ? uAll(Buffer.from(c), false) : jsonInner(c))).join('')],
  ['hex, percent-encoded', pctAll(Buffer.from(SB.toString('hex')), false)],
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
  t.match(out.data.toString(), new RegExp(`^Basic \\[REDACTED:${LABEL}\\][A-Za-z0-9+/=]{0,4}$`), 'replaced from its first group on');
  t.same(exposures(out.data, S), []);
  // The longest form can be written with the longest escape of every byte,
  // and still fits in maxMatchLength (what is read beyond the cap).
  const longest = uAll(Buffer.from(Buffer.from(INJECTED).toString('hex')), false);
  t.ok(r.maxMatchLength >= longest.length, 'maxMatchLength covers the hex of the injected value, every byte as \\u00XX');
  out = redact(r, Buffer.from(longest));
  t.equal(out.data.toString(), MARK, 'that longest spelling is found');
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
  t.equal(out.data.toString(), `${MARK}cab`, 'overlapping occurrences: the first is replaced, what is left holds no whole secret');
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
  const jsonEscaped = (upper: boolean): string => JSON.stringify(U).slice(1, -1).replace(/[^\x20-\x7e]/g, (c) => {
    const h = c.charCodeAt(0).toString(16).padStart(4, '0');
    return `\\u${upper ? h.toUpperCase() : h}`;
  });
  t.match(jsonEscaped(false), /\\ud83d\\ude00/, 'the emoji is written as a surrogate pair');
  const forms: [string, Buffer][] = [
    ['UTF-8 bytes', UB],
    ['JSON \\u escapes, lower case', Buffer.from(jsonEscaped(false))],
    ['JSON \\u escapes, upper case', Buffer.from(jsonEscaped(true))],
    ['every character \\u-escaped', Buffer.from([...U].map((c) => [...Array(c.length).keys()].map((k) => `\\u${c.charCodeAt(k).toString(16).padStart(4, '0')}`).join('')).join(''))],
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
  t.same({ data: none.data.toString(), count: none.count, cut: none.cut }, { data: '0123', count: 0, cut: true }, 'no redactor: only the cut');
});

t.test('the cut is in input positions', async (t) => {
  const r = redactor(S);
  const CUT = 100;
  const fill = (n: number, c: string): string => c.repeat(n);
  const run = (input: string, cut = CUT): { text: string; count: number; cut: boolean } => {
    const o = redact(r, Buffer.from(input, 'latin1'), cut);
    return { text: o.data.toString('latin1'), count: o.count, cut: o.cut };
  };
  t.same(run(fill(150, 'a')), { text: fill(100, 'a'), count: 0, cut: true }, 'no occurrence: the first bytes up to the cut');
  t.same(run(fill(100, 'a')), { text: fill(100, 'a'), count: 0, cut: false }, 'exactly the cut: not cut');
  t.same(run(fill(40, 'a') + S), { text: fill(40, 'a') + MARK, count: 1, cut: false }, 'an occurrence within the cut');
  // An occurrence that starts before the cut and ends beyond it is replaced
  // whole: no leading part of the secret is returned.
  for (const before of [1, 5, S.length - 1]) {
    const got = run(fill(CUT - before, 'a') + S + fill(50, 'b'));
    t.same(got, { text: (fill(CUT - before, 'a') + MARK).slice(0, CUT), count: 1, cut: true }, `straddling the cut, ${before} byte(s) before it`);
  }
  t.same(run(fill(CUT, 'a') + S), { text: fill(CUT, 'a'), count: 0, cut: true }, 'an occurrence starting at the cut is left out, not counted');
  // Many occurrences, each longer than its mark: the output shrinks, but
  // nothing from beyond input position CUT is pulled into it.
  const unit = `${S}.`;
  const input = unit.repeat(10) + fill(200, 'Z');
  const o = run(input, 300);
  const starts = Math.ceil(300 / unit.length);
  t.same(o, { text: `${MARK}.`.repeat(starts - 1) + MARK, count: starts, cut: true }, 'marks for the occurrences that start before the cut, nothing after');
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
  t.same(redactText(r, `a=${encodeURIComponent(S)}; b=${SB.toString('hex')}`), { text: `a=${MARK}; b=${MARK}`, count: 2 });
  t.same(redactText(r, `x-${SB.toString('hex')}`), { text: `x-${MARK}`, count: 1 }, 'a header name holding the hex');
  t.same(redactText(null, S), { text: S, count: 0 }, 'redaction off');
});

t.test('base64 broken into lines (PEM, MIME, JSON-escaped newlines) is still found', async (t) => {
  const secret = Buffer.from(randomBytesForWrap(96));
  const r = buildRedactor([Buffer.from(secret)], 'k') as Redactor;
  const mark = '[REDACTED:k]';
  for (const [name, sep] of [['LF every 64', '\n'], ['CRLF every 76', '\r\n'], ['JSON \\n every 64', '\\n']] as const) {
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
