// streamRedactor against redact() over adversarial bodies. Random
// needles (secret + "Bearer secret", all kinds), bodies made of whole
// occurrences in every form, truncated and mutated occurrences (near
// matches), overlapping occurrences, partial escapes and base64 noise;
// cuts at random, at and around an occurrence's start; pieces of 1 byte,
// random sizes, with and without `last`. The streamed output, count and
// truncation must equal redact()'s; nothing throws; with no cut the
// independent detector (test/helpers/exposure.ts) finds nothing of the
// secret in the output (needles whose last byte is %, \ or & are left out
// of that check: forms.test.ts shows that defect on its own).
import t from 'tap';
import { redact } from '../../daemon/pipeline/redact';
import { exposures } from '../helpers/exposure';
import {
  NEEDLE_KINDS,
  chunked,
  escapePieces,
  int,
  lat,
  lineBreak,
  mustBuild,
  needle,
  pick,
  radixCase,
  rng,
  show,
  streamed,
  type Rnd,
} from '../helpers/redact-fuzz';

const NOISE = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=%&#;\\xu"_-. :\r\n\t';

function noise(r: Rnd, n: number): string {
  const kind = int(r, 4);
  let s = '';
  for (let i = 0; i < n; i++) {
    if (kind === 0) s += pick(r, [...NOISE]);
    else if (kind === 1) s += pick(r, ['%', '%2', '%25', '\\', '\\u00', '\\x', '&#', '&#x0', '&am', '\\n', '+', '=']);
    else if (kind === 2) s += pick(r, [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/']);
    else s += String.fromCharCode(int(r, 256));
  }
  return s;
}

// One occurrence of n written some promised way.
function occurrence(r: Rnd, n: Buffer): string {
  const k = int(r, 7);
  if (k === 0) return escapePieces(r, n, true, 0.5).join('');
  if (k === 1) return escapePieces(r, lat(n.toString('hex')), false, 0.8).join('');
  if (k === 2) {
    const c = radixCase(
      pick(r, ['base64', 'base64url', 'base32', 'base32lower'] as const),
      Buffer.from(Array.from({ length: int(r, 4) }, () => int(r, 256))),
      n,
      Buffer.from(Array.from({ length: int(r, 4) }, () => int(r, 256))),
      r() < 0.5,
      r,
    );
    const wrap = c.name.startsWith('base64') && r() < 0.5;
    return [...c.chars]
      .map((ch, i) => (wrap && i > 0 && r() < 0.1 ? lineBreak(r) : '') + escapePieces(r, lat(ch), false, 0.7).join(''))
      .join('');
  }
  if (k === 3)
    return [...n]
      .map((b) => b.toString(16).padStart(2, '0'))
      .map((h, i) => (i && r() < 0.1 ? ':' + lineBreak(r) : i ? ':' : '') + h)
      .join('');
  if (k === 4) return Buffer.from(n.toString('utf8'), 'utf16le').toString('latin1');
  if (k === 5) return n.toString('latin1');
  return escapePieces(r, n, true, 0).join('');
}

function nearMiss(r: Rnd, n: Buffer): string {
  const o = occurrence(r, n);
  if (r() < 0.5) return o.slice(0, int(r, o.length));
  const i = int(r, o.length);
  return o.slice(0, i) + pick(r, [...NOISE]) + o.slice(i + 1);
}

interface Body {
  data: Buffer;
  starts: number[];
}

function body(r: Rnd, needles: Buffer[]): Body {
  let s = '';
  const starts: number[] = [];
  const parts = 2 + int(r, 8);
  for (let k = 0; k < parts; k++) {
    s += noise(r, int(r, 30));
    const n = pick(r, needles);
    const x = int(r, 4);
    if (x === 0) s += nearMiss(r, n);
    else if (x === 1) {
      // Overlapping: an occurrence whose tail starts another.
      const o = occurrence(r, n);
      const cutAt = int(r, o.length);
      starts.push(s.length);
      s += o.slice(0, cutAt);
      starts.push(s.length);
      s += occurrence(r, n);
    } else {
      starts.push(s.length);
      s += occurrence(r, n);
    }
  }
  s += noise(r, int(r, 30));
  return { data: lat(s), starts };
}

t.test('stream equals redact over adversarial bodies, cuts and chunkings', async (t) => {
  const fails = new Map<string, string>();
  let n = 0;
  const seeds = Number(process.env.SEEDS ?? 150);
  for (let seed = 1; seed <= seeds; seed++) {
    const T0 = performance.now();
    const r = rng(seed * 104729 + 17);
    const kind = NEEDLE_KINDS[seed % NEEDLE_KINDS.length] as (typeof NEEDLE_KINDS)[number];
    if (kind === 'long' && seed > 15) continue; // slow in small pieces
    const secret = needle(r, kind);
    const injected = Buffer.concat([lat('Bearer '), secret]);
    const needles = [secret, injected];
    const red = mustBuild(needles, 'api');
    for (let b = 0; b < 3; b++) {
      const { data, starts } = body(r, needles);
      const st = starts.length ? pick(r, starts) : 0;
      const cuts = [Infinity, int(r, data.length + 1), st, st + 1, Math.max(0, st - 1), int(r, 40)];
      for (const cut of cuts) {
        let whole;
        try {
          whole = redact(red, data, cut);
        } catch (e) {
          fails.set('redact throws', `seed ${seed}: ${String(e)} body ${show(data)}`);
          continue;
        }
        // 1-byte pieces cost O(held) a byte (see perf.test.ts): only for two cuts.
        const small = kind !== 'long' && (cut === cuts[0] || cut === cuts[2]);
        const plan: [number, boolean][] = [
          [small ? 1 : kind === 'long' ? 31 : 3, r() < 0.5],
          [7, true],
          [97, false],
          [100000, true],
        ];
        for (const [max, last] of plan) {
          n += 1;
          let got;
          try {
            got = streamed(red, chunked(r, data, max), cut, last);
          } catch (e) {
            fails.set('stream throws', `seed ${seed} cut ${cut} max ${max}: ${String(e)}`);
            continue;
          }
          const where = `seed ${seed} [${kind}] cut ${cut} pieces<=${max} last=${last}\n  secret ${show(secret)}\n  body ${show(data)}`;
          if (!got.data.equals(whole.data) && !fails.has(`output differs [${kind}]`))
            fails.set(`output differs [${kind}]`, `${where}\n  redact ${show(whole.data)}\n  stream ${show(got.data)}`);
          if (got.count !== whole.count && !fails.has('count differs'))
            fails.set(
              'count differs',
              `${where}\n  redact count ${whole.count}, stream count ${got.count}; output ${show(whole.data)}`,
            );
          if (got.cut !== whole.cut && !fails.has('truncated differs'))
            fails.set('truncated differs', `${where}\n  redact ${whole.cut}, stream ${got.cut}`);
        }
        const endsInEscapeByte = [0x25, 0x5c, 0x26].includes(secret[secret.length - 1] as number);
        if (cut === Infinity && !endsInEscapeByte) {
          const ex = exposures(whole.data, secret);
          if (ex.length > 0 && !fails.has(`exposure [${kind}]`))
            fails.set(
              `exposure [${kind}]`,
              `seed ${seed} ${ex.join(',')}\n  secret ${show(secret)}\n  body ${show(data)}\n  out ${show(whole.data)}`,
            );
        }
      }
    }
    red.wipe();
    if (process.env.TIMING) console.error(seed, kind, Math.round(performance.now() - T0));
  }
  for (const [k, v] of fails) t.fail(`${k}: ${v}`);
  t.equal(fails.size, 0, `${n} streamed cases`);
});
