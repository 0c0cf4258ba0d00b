// Probe: scan cost on adversarial bodies (µs per KB, printed as comments).
// - whole-body redact() over 1 and 2 MiB of random bytes, text escaped
//   throughout, base64 noise and near-matches of the secret (its prefix,
//   escaped, repeated): linear (2 MiB within 3x of 1 MiB) and within
//   2000 µs/KB;
// - a secret holding many %, or a run of \, written so that every escape
//   is read two ways and the last byte is wrong: must not be exponential
//   (a 1 KB body within 100 ms);
// - streamRedactor in small pieces over near-matches: within 20x of the
//   whole-body scan per KB (each push rescans the undecided tail through a
//   Proxy and copies the held bytes, so the cost per byte grows with the
//   held length).
import t from 'tap';
import { redact } from '../../daemon/pipeline/redact';
import { chunked, lat, mustBuild, needle, rng, streamed } from './lib';

const perKB = (ms: number, bytes: number): number => (ms * 1000) / (bytes / 1024);

function timeIt(f: () => void): number {
  const t0 = performance.now();
  f();
  return performance.now() - t0;
}

const r = rng(4242);
const secret = needle(r, 'ascii');
const red = mustBuild([secret, Buffer.concat([lat('Bearer '), secret])], 'api');

function fill(size: number, unit: () => string): Buffer {
  const parts: string[] = [];
  let n = 0;
  while (n < size) {
    const u = unit();
    parts.push(u);
    n += u.length;
  }
  return lat(parts.join('').slice(0, size));
}

const hex2 = (b: number): string => b.toString(16).padStart(2, '0');
const prefixEscaped = [...secret.subarray(0, secret.length - 1)].map((b) => `%${hex2(b)}`).join('') + '!';
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const bodies: [string, (size: number) => Buffer][] = [
  ['random bytes', (s) => Buffer.from(Array.from({ length: s }, () => Math.floor(r() * 256)))],
  [
    'escaped throughout',
    (s) =>
      fill(s, () => {
        const b = 0x20 + Math.floor(r() * 95);
        const k = Math.floor(r() * 3);
        return k === 0 ? `%${hex2(b)}` : k === 1 ? `\\u00${hex2(b)}` : `&#${b};`;
      }),
  ],
  ['base64 noise', (s) => fill(s, () => B64[Math.floor(r() * 64)] as string)],
  ['near-matches (secret prefix, %-escaped)', (s) => fill(s, () => prefixEscaped)],
  [
    'near-matches (Bearer + prefix, raw)',
    (s) => fill(s, () => `Bearer ${secret.subarray(0, secret.length - 1).toString('latin1')}!`),
  ],
];

t.test('whole-body scan is linear and bounded per KB', async (t) => {
  for (const [name, make] of bodies) {
    const a = make(1 << 20);
    const b = make(2 << 20);
    const ta = timeIt(() => redact(red, a));
    const tb = timeIt(() => redact(red, b));
    t.comment(`${name}: 1 MiB ${perKB(ta, a.length).toFixed(0)} µs/KB, 2 MiB ${perKB(tb, b.length).toFixed(0)} µs/KB`);
    t.ok(tb < 3 * ta + 50, `${name}: 2 MiB (${tb.toFixed(0)} ms) within 3x of 1 MiB (${ta.toFixed(0)} ms)`);
    t.ok(perKB(tb, b.length) < 2000, `${name}: ${perKB(tb, b.length).toFixed(0)} µs/KB < 2000`);
  }
});

t.test('no exponential backtracking on %, \\ in the secret', async (t) => {
  for (const [name, k, make] of [
    ['%25 for each of k "%"', 22, (k: number) => [lat('x' + 'a%'.repeat(k) + 'z'), lat('x' + 'a%25'.repeat(k) + 'q')]],
    [
      '\\\\ for each of k "\\"',
      24,
      (k: number) => [lat('x' + '\\'.repeat(k) + 'z'), lat('x' + '\\'.repeat(2 * k) + 'q')],
    ],
  ] as const) {
    const [n, body] = make(k);
    const rr = mustBuild([n as Buffer], 'api');
    const times: string[] = [];
    for (const kk of [k - 6, k - 4, k - 2]) {
      const [n2, b2] = make(kk);
      const r2 = mustBuild([n2 as Buffer], 'api');
      times.push(`k=${kk}: ${timeIt(() => redact(r2, b2 as Buffer)).toFixed(1)} ms`);
      r2.wipe();
    }
    const ms = timeIt(() => redact(rr, body as Buffer));
    t.comment(`${name}: ${times.join(', ')}, k=${k}: ${ms.toFixed(1)} ms for ${(body as Buffer).length} bytes`);
    t.ok(ms < 100, `${name}, k=${k}: ${ms.toFixed(0)} ms for a ${(body as Buffer).length}-byte body (< 100 ms)`);
    rr.wipe();
  }
});

t.test('streaming in small pieces stays near the whole-body cost', async (t) => {
  for (const kind of ['ascii', 'long'] as const) {
    const s = needle(rng(7), kind);
    const rr = mustBuild([s, Buffer.concat([lat('Bearer '), s])], 'api');
    const unit = [...s.subarray(0, s.length - 1)].map((b) => `%${hex2(b)}`).join('') + '!';
    const data = fill(kind === 'long' ? 24 << 10 : 96 << 10, () => unit);
    const whole = timeIt(() => redact(rr, data));
    for (const max of [1, 16, 1024]) {
      const pieces = chunked(rng(max), data, max);
      let out: Buffer = Buffer.alloc(0);
      const ms = timeIt(() => {
        out = streamed(rr, pieces, Infinity, false).data;
      });
      t.ok(out.equals(redact(rr, data).data), `${kind}, pieces<=${max}: same output`);
      t.comment(
        `${kind} (hold ${rr.maxMatchLength} B), pieces<=${max}: ${perKB(ms, data.length).toFixed(0)} µs/KB, whole ${perKB(whole, data.length).toFixed(0)} µs/KB`,
      );
      t.ok(
        ms < 20 * whole + 20,
        `${kind}, pieces<=${max}: ${perKB(ms, data.length).toFixed(0)} µs/KB within 20x of whole (${perKB(whole, data.length).toFixed(0)} µs/KB)`,
      );
    }
    rr.wipe();
  }
});
