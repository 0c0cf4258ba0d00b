// every form and escape docs/responses.md promises, for random
// needles (binary, ASCII, UTF-8 with non-ASCII, short, long), embedded
// between inert text. redact() must give exactly `L + MARK + R` (for base64
// and base32: the characters that carry no needle bit kept, every one that
// carries one replaced, padding taken when it follows), count 1, no throw.
// And the streaming redactor over 1-byte pieces gives the same output.
import t from 'tap';
import { redact } from '../../daemon/pipeline/redact';
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

const LABEL = 'api';
const MARK = `[REDACTED:${LABEL}]`;
const INERT = '!#$()*,.;<>?@[]^`{|}~';

function inert(r: Rnd, n: Buffer, len: number): string {
  const bad = new Set(n.toString('latin1'));
  const alpha = [...INERT].filter((c) => !bad.has(c));
  let s = '';
  for (let i = 0; i < len; i++) s += pick(r, alpha.length ? alpha : ['~']);
  return s;
}

interface Case {
  form: string;
  e: string; // the occurrence as written
  before: string; // what must stay before the mark (inside e)
  after: string; // and after it
}

const isUtf8 = (b: Buffer): boolean => Buffer.from(b.toString('utf8'), 'utf8').equals(b);

// Breaks between pieces (before piece i, i > 0), with probability p.
function joinWithBreaks(r: Rnd, pieces: string[], p: number): string {
  return pieces.map((s, i) => (i > 0 && r() < p ? lineBreak(r) + s : s)).join('');
}

function cases(r: Rnd, n: Buffer): Case[] {
  const out: Case[] = [];
  const esc = (s: string | Buffer, text = false, share = 0.5) =>
    escapePieces(r, typeof s === 'string' ? lat(s) : s, text, share);
  out.push({ form: 'raw (escape mix)', e: esc(n, true).join(''), before: '', after: '' });
  out.push({ form: 'raw (fully escaped)', e: esc(n, true, 0).join(''), before: '', after: '' });
  for (const only of ['pct', 'pct2', 'x', 'u', 'dec', 'hex']) {
    const e = escapePieces(r, n, false, 0, only).join('');
    out.push({ form: `raw, every byte ${only}`, e, before: '', after: '' });
  }
  const h = n.toString('hex');
  out.push({ form: 'hex lower', e: esc(h, false, 0.8).join(''), before: '', after: '' });
  out.push({ form: 'hex upper', e: esc(h.toUpperCase(), false, 0.8).join(''), before: '', after: '' });
  out.push({
    form: 'hex mixed case',
    e: esc([...h].map((c) => (r() < 0.5 ? c.toUpperCase() : c)).join(''), false, 0.8).join(''),
    before: '',
    after: '',
  });
  // Colon hex, openssl style: 15 bytes a line, indented, or random breaks.
  const up = r() < 0.5;
  const bytes = [...n].map((b) => b.toString(16).padStart(2, '0')[up ? 'toUpperCase' : 'toLowerCase']());
  {
    const lines: string[] = [];
    for (let i = 0; i < bytes.length; i += 15) lines.push(bytes.slice(i, i + 15).join(':'));
    out.push({ form: 'colon hex, openssl lines', e: lines.join(':\n    '), before: '', after: '' });
    const pieces = esc(bytes.join(':'), false, 0.9);
    out.push({ form: 'colon hex, random breaks', e: joinWithBreaks(r, pieces, 0.2), before: '', after: '' });
  }
  if (isUtf8(n)) {
    const text = n.toString('utf8');
    out.push({ form: 'utf-16le', e: Buffer.from(text, 'utf16le').toString('latin1'), before: '', after: '' });
    out.push({ form: 'utf-16be', e: Buffer.from(text, 'utf16le').swap16().toString('latin1'), before: '', after: '' });
    out.push({
      form: 'utf-16le escaped',
      e: esc(Buffer.from(text, 'utf16le'), false, 0.7).join(''),
      before: '',
      after: '',
    });
  }
  for (const kind of ['base64', 'base64url', 'base32', 'base32lower', 'base32mixed'] as const) {
    for (let k = 0; k < 3; k++) {
      const pre = Buffer.from(Array.from({ length: int(r, 6) }, () => int(r, 256)));
      const post = Buffer.from(Array.from({ length: r() < 0.4 ? 0 : int(r, 6) }, () => int(r, 256)));
      const padded = r() < 0.5;
      const c = radixCase(kind, pre, n, post, padded, r);
      const wrap = kind.startsWith('base64') && r() < 0.5;
      const escape = r() < 0.5;
      const pieces = [...c.chars].map((ch) => (escape ? esc(ch, false, 0.6).join('') : ch));
      const brk = pieces.map((_, i) => (wrap && i > 0 && r() < 0.15 ? lineBreak(r) : ''));
      const seg = (a: number, b: number) =>
        pieces
          .slice(a, b)
          .map((s, i) => brk[a + i] + s)
          .join('');
      const beforeText = seg(0, c.first);
      const afterText = seg(c.last, pieces.length);
      // A break right before the first carrying character stays before the mark.
      const before = beforeText + (brk[c.first] ?? '');
      out.push({
        form: `${kind} pre ${pre.length} post ${post.length}${padded ? ' padded' : ''}${wrap ? ' wrapped' : ''}${escape ? ' escaped' : ''}`,
        e: seg(0, pieces.length),
        before,
        after: afterText,
      });
    }
  }
  return out;
}

t.test('every promised form is replaced whole, exactly once', async (t) => {
  const fails = new Map<string, string>();
  let n = 0;
  for (let seed = 1; seed <= Number(process.env.SEEDS ?? 150); seed++) {
    for (const kind of NEEDLE_KINDS) {
      const r = rng(seed * 7919 + kind.length);
      const nd = needle(r, kind);
      const red = mustBuild([nd], LABEL);
      for (const c of cases(r, nd)) {
        const L = inert(r, nd, int(r, 8));
        const R = inert(r, nd, int(r, 8));
        const body = lat(L + c.e + R);
        const want = lat(L + c.before + MARK + c.after + R);
        let got;
        try {
          got = redact(red, body);
        } catch (e) {
          fails.set(`${c.form} [${kind}] throws`, `seed ${seed}: ${String(e)}`);
          continue;
        }
        n += 1;
        const key = `${c.form.replace(/ pre \d+ post \d+/, '')} [${kind}]`;
        if (!got.data.equals(want) || got.count !== 1) {
          if (!fails.has(key))
            fails.set(
              key,
              `seed ${seed} needle(hex) ${nd.toString('hex')}\n  body ${show(body)}\n  want ${show(want)}\n  got  ${show(got.data)} count ${got.count}`,
            );
          continue;
        }
        if (process.env.NOSTREAM || seed > 20) continue; // the stream over small pieces is slow (see perf.test.ts)
        const s = streamed(red, chunked(r, body, kind === 'long' ? 64 : 1 + int(r, 4)), Infinity, r() < 0.5);
        if (!s.data.equals(want) || s.count !== 1)
          fails.set(`${key} (stream)`, `seed ${seed}: body ${show(body)} got ${show(s.data)}`);
      }
      red.wipe();
    }
  }
  for (const [k, v] of fails) t.fail(`${k}\n  ${v}`);
  t.equal(fails.size, 0, `${n} cases`);
});
