// The serialisation whose hash the vault pins: stable under key order,
// whitespace-free, and refusing values JSON cannot carry exactly.
import t from 'tap';
import { canonicalJson } from '../../shared/canonical-json';

t.test('keys are sorted at every depth, arrays keep their order', async (t) => {
  const a = { b: 1, a: { z: [3, 1, 2], y: 'x' }, c: true, d: null };
  const b = { d: null, c: true, a: { y: 'x', z: [3, 1, 2] }, b: 1 };
  t.equal(canonicalJson(a), '{"a":{"y":"x","z":[3,1,2]},"b":1,"c":true,"d":null}');
  t.equal(canonicalJson(a), canonicalJson(b));
  t.not(canonicalJson([1, 2]), canonicalJson([2, 1]));
});

t.test('strings are escaped as JSON and parse back', async (t) => {
  const v = { 'k"ey': 'line\nbreak \u202e \u0000 "quoted" \\', é: 'ü' };
  const text = canonicalJson(v);
  t.notMatch(text, /\n/);
  t.same(JSON.parse(text), v);
});

t.test('keys sort by code unit, not locale', async (t) => {
  t.equal(canonicalJson({ b: 1, B: 2, a: 3, _: 4 }), '{"B":2,"_":4,"a":3,"b":1}');
});

t.test('values JSON cannot represent exactly are refused', async (t) => {
  for (const bad of [
    undefined,
    NaN,
    Infinity,
    -Infinity,
    10n,
    () => 1,
    Symbol('s'),
    new Date(0),
    new Map(),
    { a: undefined },
    [1, undefined],
  ]) {
    t.throws(() => canonicalJson(bad), TypeError, String(typeof bad));
  }
});
