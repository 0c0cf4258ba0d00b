// The secret detector used by the redaction tests must itself find every
// form and escape it claims to, or those tests could pass on a leak.
import t from 'tap';
import { exposures, secretForms } from '../helpers/exposure';

const S = 'Zq9/xK+v=w "7\\%&k_0123456789abcdef';
const SB = Buffer.from(S, 'utf8');

const hexAll = (b: Buffer, upper: boolean): string =>
  [...b]
    .map((c) => `%${c.toString(16).padStart(2, '0')}`)
    .join('')
    [upper ? 'toUpperCase' : 'toLowerCase']();
const uAll = (s: string, upper: boolean): string =>
  [...s]
    .map((c) => {
      const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
      return `\\u${upper ? hex.toUpperCase() : hex}`;
    })
    .join('');
const b64 = (prefix: number, url: boolean, pad: boolean): string => {
  let s = Buffer.concat([Buffer.from('ABC'.slice(0, prefix)), SB, Buffer.from('!')]).toString(
    url ? 'base64url' : 'base64',
  );
  if (!pad) s = s.replace(/=+$/, '');
  return s;
};

// [what, text, the form that must be named]
const FOUND: [string, string | Buffer, RegExp][] = [
  ['raw', `x ${S} y`, /^raw in as-is/],
  ['raw, as bytes', Buffer.concat([Buffer.from([0, 255]), SB, Buffer.from([10])]), /^raw in as-is/],
  ['hex lower', `id=${SB.toString('hex')};`, /^hex in as-is/],
  ['hex upper', `id=${SB.toString('hex').toUpperCase()};`, /^hex in as-is/],
  [
    'hex mixed case',
    SB.toString('hex').replace(/[a-f]/g, (c, i: number) => (i % 2 ? c.toUpperCase() : c)),
    /^hex in as-is/,
  ],
  ...[0, 1, 2].flatMap((o): [string, string, RegExp][] => [
    [`base64, ${o} bytes before, padded`, b64(o, false, true), new RegExp(`^base64@${(3 - o) % 3} in as-is`)],
    [`base64, ${o} bytes before, unpadded`, b64(o, false, false), new RegExp(`^base64@${(3 - o) % 3} in as-is`)],
    [`base64url, ${o} bytes before`, b64(o, true, false), new RegExp(`^base64url@${(3 - o) % 3} in as-is`)],
  ]),
  ['base64 with + and / percent-encoded', encodeURIComponent(b64(1, false, true)), /^base64@2 in percent/],
  ['percent-encoded, every byte, lower case', hexAll(SB, false), /^raw in percent/],
  ['percent-encoded, every byte, upper case', hexAll(SB, true), /^raw in percent/],
  ['percent-encoded, partly', encodeURIComponent(S), /^raw in percent/],
  [
    'percent-encoded, one byte in two',
    [...SB].map((c, i) => (i % 2 ? `%${c.toString(16)}` : String.fromCharCode(c))).join(''),
    /^raw in percent/,
  ],
  ['form-encoded (space as +)', new URLSearchParams({ k: S }).toString(), /^raw in form/],
  ['JSON string', JSON.stringify({ v: S }).slice(1, -1) + ']', /^raw in json/],
  ['JSON, every character \\u-escaped, lower case', uAll(S, false), /^raw in json/],
  ['JSON, every character \\u-escaped, upper case', uAll(S, true), /^raw in json/],
  ['JSON with \\/', `"${S.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\//g, '\\/')}`, /^raw in json/],
  ['JSON-escaped, then percent-encoded', encodeURIComponent(uAll(S, false)), /^raw in percent\+json/],
  ['percent-encoded, then JSON-escaped', uAll(hexAll(SB, true), false), /^raw in json\+percent/],
  ['hex inside a JSON \\u escape run', uAll(SB.toString('hex'), true), /^hex in json/],
  [
    'a reply body in base64 (hex inside)',
    JSON.stringify({
      status: 200,
      body: Buffer.from(`<${SB.toString('hex')}>`).toString('base64'),
      body_encoding: 'base64',
    }),
    /^hex in as-is of \$\.body\(base64-decoded\)/,
  ],
  [
    'a reply header value (latin1)',
    JSON.stringify({ headers: { 'x-a': Buffer.from(`é${S}`, 'utf8').toString('latin1') } }),
    /^raw in as-is of \$\.headers\.x-a\(latin1\)/,
  ],
  [
    'a reply header name',
    JSON.stringify({ headers: { [`x-${SB.toString('hex')}`]: '1' } }),
    /^hex in as-is of \$\.headers\{key\}/,
  ],
];

t.test('every listed form and escape is found', async (t) => {
  for (const [what, text, form] of FOUND) {
    const found = exposures(text, S);
    t.ok(
      found.some((f) => form.test(f)),
      `${what}: ${form} among ${JSON.stringify(found.slice(0, 6))}`,
    );
  }
});

t.test('a non-ASCII secret: bytes, \\u escapes (surrogate pairs too), percent', async (t) => {
  const U = 'pässwörd-€-😀-0123456789';
  const UB = Buffer.from(U, 'utf8');
  const json = JSON.stringify(U).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  t.match(json, /\\ud83d\\ude00/, 'the emoji is a surrogate pair');
  for (const [what, text, form] of [
    ['UTF-8 bytes', UB, /^raw in as-is/],
    ['JSON \\u escapes', json, /^raw in json/],
    [
      'JSON \\u escapes, upper case',
      json.replace(/\\u([0-9a-f]{4})/g, (_m, h: string) => `\\u${h.toUpperCase()}`),
      /^raw in json/,
    ],
    ['percent-encoded UTF-8', encodeURIComponent(U), /^raw in percent/],
    ['hex', UB.toString('hex').toUpperCase(), /^hex/],
    ['base64', UB.toString('base64'), /^base64@0/],
  ] as [string, string | Buffer, RegExp][]) {
    const found = exposures(text, U);
    t.ok(
      found.some((f) => form.test(f)),
      `${what}: ${JSON.stringify(found.slice(0, 4))}`,
    );
  }
});

t.test('nothing is found where the secret is not', async (t) => {
  const nearMiss = S.slice(0, 15) + (S[15] === 'a' ? 'b' : 'a') + S.slice(16);
  t.same(exposures('', S), []);
  t.same(exposures(`{"body":"[REDACTED:api]","redactions":1}`, S), []);
  t.same(exposures(nearMiss, S), [], 'one byte changed');
  t.same(exposures(Buffer.from(nearMiss).toString('hex'), S), [], 'hex of a near miss');
  t.same(exposures(Buffer.from(nearMiss).toString('base64'), S), [], 'base64 of a near miss');
  t.same(exposures(encodeURIComponent(nearMiss), S), [], 'percent-encoded near miss');
  t.same(exposures(S.slice(0, -1), S), [], 'the secret less its last byte');
});

t.test('the base64 forms are the complete groups at each alignment', async (t) => {
  const forms = secretForms('abcdefgh');
  t.same(
    forms.map((f) => [f.name, f.text]),
    [
      ['raw', 'abcdefgh'],
      ['hex', '6162636465666768'],
      ['base64@0', Buffer.from('abcdef').toString('base64')],
      ['base64url@0', Buffer.from('abcdef').toString('base64url')],
      ['base64@1', Buffer.from('bcdefg').toString('base64')],
      ['base64url@1', Buffer.from('bcdefg').toString('base64url')],
      ['base64@2', Buffer.from('cdefgh').toString('base64')],
      ['base64url@2', Buffer.from('cdefgh').toString('base64url')],
    ],
  );
});
