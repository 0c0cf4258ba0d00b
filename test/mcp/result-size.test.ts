// How the bridge measures and cuts a tool result (SPEC §10), against
// JSON.stringify itself: every kind of character that grows when
// serialised, surrogate pairs never split, lone surrogates, base64 cut on
// whole groups, and a rendering whose summary depends on what was kept.
import t from 'tap';
import { randomInt } from 'node:crypto';
import { fitWithin, prefixWithin, serialisedBytes } from '../../cli/mcp/result-size';

// Characters of every serialised width: 1 (a), 2 (\" \\ \n é), 3 (€), 4
// (😀, a pair), 6 (\u0001, and a lone surrogate written as \udXXX).
const ALPHABET = [
  'a',
  '"',
  '\\',
  '\n',
  '\t',
  'é',
  '€',
  '😀',
  '\u0001',
  '\u001f',
  '\u007f',
  '\ud800',
  '\udc00',
  '\u2028',
];

function randomText(n: number): string {
  let s = '';
  for (let i = 0; i < n; i += 1) s += ALPHABET[randomInt(ALPHABET.length)];
  return s;
}

// The serialised size of a string without its quotes.
const inside = (s: string): number => serialisedBytes(s) - 2;

t.test('prefixWithin takes the longest prefix that fits, serialised', async (t) => {
  for (let round = 0; round < 200; round += 1) {
    const text = randomText(randomInt(1, 60));
    const budget = randomInt(0, inside(text) + 3);
    const p = prefixWithin(text, budget, false);
    t.ok(text.startsWith(p), 'a prefix');
    t.ok(inside(p) <= budget, `fits: ${inside(p)} <= ${budget}`);
    // One more character (or pair) would not fit.
    if (p.length < text.length) {
      const c = text.charCodeAt(p.length);
      const next = c >= 0xd800 && c <= 0xdbff && text.length > p.length + 1 ? 2 : 1;
      const longer = text.slice(0, p.length + next);
      const pairSplit = p.length > 0 && /[\ud800-\udbff]$/.test(p) && /^[\udc00-\udfff]/.test(text.slice(p.length));
      t.notOk(pairSplit, 'a surrogate pair is never split');
      t.ok(
        inside(longer) > budget || pairSplit,
        `the longest: one more character would take ${inside(longer)} > ${budget}`,
      );
    }
  }
});

t.test('a surrogate pair is kept whole or not at all', async (t) => {
  t.equal(prefixWithin('a😀', 4, false), 'a', 'not half of the pair');
  t.equal(prefixWithin('a😀', 5, false), 'a😀');
  t.equal(prefixWithin('\ud800a', 6, false), '\ud800', 'a lone surrogate counts six bytes');
  t.equal(prefixWithin('\ud800a', 5, false), '');
});

t.test('base64 is cut on whole groups', async (t) => {
  const b64 = Buffer.from('hello, world and more').toString('base64');
  for (let budget = 0; budget <= b64.length; budget += 1) {
    const p = prefixWithin(b64, budget, true);
    t.equal(p.length % 4, 0, `budget ${budget}: whole groups`);
    t.ok(p.length <= budget && budget - p.length < 4, `budget ${budget}: as many as fit`);
  }
});

t.test('fitWithin fits a rendering that mentions what it kept', async (t) => {
  for (const max of [200, 1000, 5000]) {
    const value = { status: 200, body: randomText(3000), stderr: randomText(500) };
    const r = fitWithin(
      value,
      [
        { name: 'body', base64: false },
        { name: 'stderr', base64: false },
      ],
      max,
      (v, cuts) => ({
        summary: `${v.body.length} characters kept, ${cuts.map((c) => `${c.field} ${c.kept}/${c.of}`).join(' ')}`,
        value: v,
      }),
    );
    t.ok(r !== null, `${max}: fits`);
    t.ok(serialisedBytes(r) <= max, `${max}: ${serialisedBytes(r)} bytes`);
    t.ok(serialisedBytes(r) > max - 12, `${max}: and uses the room (${serialisedBytes(r)})`);
    t.ok(value.body.startsWith(r!.value.body), `${max}: the body is a prefix`);
  }
  t.equal(
    fitWithin({ huge: 'x'.repeat(500), body: 'y' }, [{ name: 'body', base64: false }], 100, (v) => v),
    null,
    'null when emptying the fields is not enough',
  );
  const small = { body: 'fits' };
  t.equal(
    fitWithin(small, [{ name: 'body', base64: false }], 100, (v, cuts) => ({ v, cuts: cuts.length }))?.cuts,
    0,
    'what fits is not cut',
  );
});
