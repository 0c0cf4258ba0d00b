// The strict decoding verify relies on (shared/audit-format.ts decodeEntry):
// canonical base64, the exact time form and canonical JSON, each checked
// against its reference definition (a round trip through Buffer, Date and
// JSON.stringify) on many generated candidates; and decodeEntry as a whole
// (its fast scanner and its JSON path) against a reference decoder written
// here from docs/audit-format.md, on every entry type and every small
// mutation of each.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeEntry, encodeEntry, EntryBody } from '../../shared/audit-format';
import { buildJournal } from '../helpers/journal-fixture';

const PREV = 'ab'.repeat(32);
const TIME = '2025-03-04T05:06:07.089Z';
const line = (body: EntryBody, time = TIME): Buffer => encodeEntry(7, PREV, time, body);
const ok = (b: Buffer): boolean => decodeEntry(b).ok;

// A small deterministic generator, so a failure can be replayed.
let state = 0x9e3779b9;
function rand(n: number): number {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return (state >>> 0) % n;
}

t.test('base64: exactly the canonical encodings are accepted', async (t) => {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ .';
  const candidates: string[] = [
    '',
    '=',
    '==',
    'A===',
    '====',
    'AA==',
    'AB==',
    'AAA=',
    'AAB=',
    'QUJD',
    'QUJ=',
    'QU=D',
    'QUJD\n',
  ];
  for (let i = 0; i < 20000; i++) {
    const len = rand(13);
    let s = '';
    for (let k = 0; k < len; k++) s += alphabet[rand(alphabet.length)];
    candidates.push(s);
  }
  // Real encodings, and each with its last data character nudged.
  for (let n = 0; n < 40; n++) {
    const enc = Buffer.from(Array.from({ length: n }, () => rand(256))).toString('base64');
    candidates.push(enc);
    const at = enc.replace(/=+$/, '').length - 1;
    if (at >= 0) for (const c of 'ABCDEFGHIJKLMNOP') candidates.push(enc.slice(0, at) + c + enc.slice(at + 1));
  }
  let accepted = 0;
  let mismatches = 0;
  for (const ct of candidates) {
    const reference = Buffer.from(ct, 'base64').toString('base64') === ct;
    const got = ok(line({ type: 'event', key_id: 2, nonce: Buffer.alloc(24, 1).toString('base64'), ct }));
    if (got !== reference) {
      mismatches += 1;
      t.fail(`ct ${JSON.stringify(ct)}: decodeEntry ${got}, reference ${reference}`);
    }
    if (got) accepted += 1;
  }
  t.equal(mismatches, 0, `${candidates.length} candidates, ${accepted} canonical`);
  t.ok(accepted > 500 && accepted < candidates.length - 500, 'both outcomes are exercised');
  // Fixed sizes are checked too.
  t.equal(
    ok(line({ type: 'event', key_id: 2, nonce: Buffer.alloc(23).toString('base64'), ct: '' })),
    false,
    'a 23-byte nonce',
  );
  t.equal(
    ok(
      line({
        type: 'checkpoint',
        head_seq: 6,
        head: PREV,
        sign_pub: Buffer.alloc(32).toString('base64'),
        sig: Buffer.alloc(64).toString('base64'),
      }),
    ),
    true,
  );
  t.equal(
    ok(
      line({
        type: 'checkpoint',
        head_seq: 6,
        head: PREV,
        sign_pub: Buffer.alloc(33).toString('base64'),
        sig: Buffer.alloc(64).toString('base64'),
      }),
    ),
    false,
    'a 33-byte key',
  );
});

t.test('time: exactly what Date#toISOString writes', async (t) => {
  const pad = (n: number, w: number): string => String(n).padStart(w, '0');
  const candidates: string[] = [
    '2024-02-29T23:59:59.999Z',
    '2023-02-29T00:00:00.000Z',
    '1900-02-29T00:00:00.000Z',
    '2000-02-29T00:00:00.000Z',
    '0000-02-29T00:00:00.000Z',
    '2025-12-31T23:59:60.000Z',
    '2025-04-31T00:00:00.000Z',
    '2025-01-01T24:00:00.000Z',
    '2025-01-01T00:00:00Z',
    '2025-01-01T00:00:00.000+00:00',
    '2025-01-01 00:00:00.000Z',
    '+012025-01-01T00:00:00.000Z',
    '1',
    'Tue, 01 Jan 2025 00:00:00 GMT',
  ];
  for (let i = 0; i < 20000; i++) {
    candidates.push(
      `${pad(rand(10000), 4)}-${pad(rand(14), 2)}-${pad(rand(33), 2)}T${pad(rand(26), 2)}:${pad(rand(62), 2)}:${pad(rand(62), 2)}.${pad(rand(1000), 3)}Z`,
    );
  }
  let accepted = 0;
  let mismatches = 0;
  for (const time of candidates) {
    const ms = Date.parse(time);
    const reference =
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(time) &&
      !Number.isNaN(ms) &&
      new Date(ms).toISOString() === time;
    const got = ok(line({ type: 'vault', generation: 1, vault_hash: PREV }, time));
    if (got !== reference) {
      mismatches += 1;
      t.fail(`time ${time}: decodeEntry ${got}, reference ${reference}`);
    }
    if (got) accepted += 1;
  }
  t.equal(mismatches, 0, `${candidates.length} candidates, ${accepted} valid`);
  t.ok(accepted > 1000, 'valid times are exercised');
});

t.test('canonical JSON: other spellings of the same entry are refused', async (t) => {
  const good = line({ type: 'vault', generation: 1000, vault_hash: PREV }).toString('latin1');
  t.equal(ok(Buffer.from(good, 'latin1')), true);
  const variants: Array<[string, string]> = [
    ['a space', good.replace('"generation":', '"generation": ')],
    ['a trailing space', good + ' '],
    ['an exponent', good.replace('1000', '1e3')],
    ['a fraction', good.replace('1000', '1000.0')],
    ['a leading zero', good.replace('"seq":7', '"seq":07')],
    ['an escaped character', good.replace('"type":"vault"', '"type":"\\u0076ault"')],
    ['an escaped key', good.replace('"generation"', '"\\u0067eneration"')],
    ['a duplicate key', good.replace('"v":1,', '"v":1,"v":1,')],
    ['keys reordered', good.replace('"v":1,"seq":7', '"seq":7,"v":1')],
    ['upper-case hex', good.replace(PREV, PREV.toUpperCase())],
    ['a BOM', '\ufeff' + good],
    ['negative zero', good.replace('"generation":1000', '"generation":-0')],
  ];
  for (const [what, text] of variants) t.equal(ok(Buffer.from(text, 'utf8')), false, what);
  // A byte >= 0x80 anywhere is refused, whatever UTF-8 decoding makes of it.
  const bytes = Buffer.from(good, 'latin1');
  let refused = 0;
  for (let i = 0; i < bytes.length; i++) {
    for (const b of [0x80, 0xc3, 0xe2, 0xef, 0xf0, 0xff]) {
      const copy = Buffer.from(bytes);
      copy[i] = b;
      if (!ok(copy)) refused += 1;
      const wide = Buffer.concat([bytes.subarray(0, i), Buffer.from([0xf0, 0x9f, 0x98]), bytes.subarray(i)]);
      if (!ok(wide)) refused += 1;
    }
  }
  t.equal(refused, bytes.length * 12, 'every non-ASCII byte refused');
});

// The rules of docs/audit-format.md, applied the slow and obvious way.
const TYPE_KEYS: Record<string, string[]> = {
  genesis: ['journal_id', 'sign_pub', 'box_pub'],
  segment: ['segment'],
  key: ['key_id', 'sealed'],
  event: ['key_id', 'nonce', 'ct'],
  vault: ['generation', 'vault_hash'],
  checkpoint: ['head_seq', 'head', 'sign_pub', 'sig'],
  repair: ['cut_bytes', 'at_offset'],
};
const b64Of =
  (size?: number) =>
  (x: unknown): boolean =>
    typeof x === 'string' &&
    Buffer.from(x, 'base64').toString('base64') === x &&
    (size === undefined || Buffer.from(x, 'base64').length === size);
const hexOf =
  (n: number) =>
  (x: unknown): boolean =>
    typeof x === 'string' && new RegExp(`^[0-9a-f]{${n}}$`).test(x);
const count =
  (min: number) =>
  (x: unknown): boolean =>
    typeof x === 'number' && Number.isSafeInteger(x) && x >= min;
const RULES: Record<string, (x: unknown) => boolean> = {
  v: (x) => x === 1,
  seq: count(1),
  prev: hexOf(64),
  time: (x) =>
    typeof x === 'string' &&
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(x) &&
    !Number.isNaN(Date.parse(x)) &&
    new Date(Date.parse(x)).toISOString() === x,
  type: (x) => typeof x === 'string' && Object.prototype.hasOwnProperty.call(TYPE_KEYS, x),
  journal_id: hexOf(32),
  sign_pub: b64Of(32),
  box_pub: b64Of(32),
  segment: count(1),
  key_id: count(0),
  sealed: b64Of(80),
  nonce: b64Of(24),
  ct: b64Of(),
  generation: count(0),
  vault_hash: hexOf(64),
  head_seq: count(0),
  head: hexOf(64),
  sig: b64Of(64),
  cut_bytes: count(0),
  at_offset: count(0),
};

function reference(line: Buffer): unknown {
  let o: unknown;
  try {
    o = JSON.parse(line.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return null;
  const r = o as Record<string, unknown>;
  if (!RULES['type']?.(r['type'])) return null;
  const keys = ['v', 'seq', 'prev', 'time', 'type', ...(TYPE_KEYS[r['type'] as string] as string[])];
  if (Object.keys(r).join(',') !== keys.join(',')) return null;
  if (!keys.every((k) => RULES[k]?.(r[k]))) return null;
  return Buffer.from(JSON.stringify(r), 'utf8').equals(line) ? r : null;
}

t.test('decodeEntry agrees with the reference on every type and every small mutation', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pt-audit-decode-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const j = await buildJournal(dir, 140, { segmentEvery: 100 });
  const all = j.files.flat();
  const samples = new Map<string, Buffer>();
  all.forEach((l, i) => samples.set(j.types[i] as string, l));
  samples.set('repair', line({ type: 'repair', cut_bytes: 17, at_offset: 123456 }));
  samples.set('zeros', line({ type: 'repair', cut_bytes: 0, at_offset: 0 }));
  t.same([...samples.keys()].sort(), ['checkpoint', 'event', 'genesis', 'key', 'repair', 'segment', 'vault', 'zeros']);

  const inserts = ['"', '\\', ' ', '0', '9', 'e', '.', '-', '}', ',', 'A', '=', '\n', '\u00e9'];
  let accepted = 0;
  let total = 0;
  const compare = (what: string, b: Buffer): void => {
    total += 1;
    const want = reference(b);
    const got = decodeEntry(b);
    if (got.ok !== (want !== null) || (got.ok && JSON.stringify(got.entry) !== JSON.stringify(want))) {
      t.fail(`${what}: decodeEntry ${JSON.stringify(got)}, reference ${JSON.stringify(want)}`);
    }
    if (got.ok) accepted += 1;
  };
  for (const l of all) compare('journal line', l);
  for (const [type, l] of samples) {
    for (let i = 0; i < l.length; i++) {
      for (const mask of [0x01, 0x02, 0x08, 0x20, 0x80]) {
        const b = Buffer.from(l);
        b[i] = (b[i] as number) ^ mask;
        compare(`${type} byte ${i} ^0x${mask.toString(16)}`, b);
      }
      for (const ins of inserts) {
        const x = Buffer.from(ins, 'utf8');
        compare(`${type} insert ${JSON.stringify(ins)} at ${i}`, Buffer.concat([l.subarray(0, i), x, l.subarray(i)]));
        compare(
          `${type} byte ${i} replaced by ${JSON.stringify(ins)}`,
          Buffer.concat([l.subarray(0, i), x, l.subarray(i + 1)]),
        );
      }
      compare(`${type} byte ${i} removed`, Buffer.concat([l.subarray(0, i), l.subarray(i + 1)]));
    }
  }
  t.ok(accepted > all.length + 100, `${total} lines compared, ${accepted} accepted by both`);
  // Numbers at the edge of safe integers.
  for (const n of [
    '9007199254740991',
    '9007199254740992',
    '9999999999999999',
    '10000000000000000',
    '123456789012345678901',
  ]) {
    const text = line({ type: 'vault', generation: 1, vault_hash: PREV })
      .toString()
      .replace('"generation":1', `"generation":${n}`);
    compare(`generation ${n}`, Buffer.from(text));
  }
});
