// The streaming redactor (the proxy front door, SPEC §11) against the
// whole-body one: for random secrets written in every form the redactor
// handles, placed at random in random text (often across the boundaries of
// random chunkings, down to one byte a chunk), the streamed output, its
// replacement count and its truncation are exactly redact()'s, for every
// cut; it holds back at most maxMatchLength − 1 bytes; and the independent
// detector finds nothing of the secret in what was streamed.
import t from 'tap';
import { buildRedactor, redact, type Redactor } from '../../daemon/pipeline/redact';
import { streamRedactor } from '../../daemon/pipeline/redact/stream';
import { base32, exposures } from '../helpers/exposure';
// A small deterministic generator, so a failure can be replayed by seed.
import { rng } from '../helpers/redact-fuzz';

const hex2 = (c: number): string => c.toString(16).padStart(2, '0');

// Every form and escape of the redactor, for one needle.
function encodings(b: Buffer): [string, string][] {
  const text = b.toString('utf8');
  const ascii = [...b].every((c) => c < 0x80);
  const forms: [string, string][] = [
    ['raw', b.toString('latin1')],
    ['hex', b.toString('hex')],
    ['HEX', b.toString('hex').toUpperCase()],
    ['base64', b.toString('base64')],
    ['base64, offset 1', Buffer.concat([Buffer.from('q'), b]).toString('base64')],
    ['base64, offset 2', Buffer.concat([Buffer.from('qq'), b]).toString('base64')],
    ['base64url unpadded', b.toString('base64url')],
    ['base64 in lines', (b.toString('base64').match(/.{1,8}/g) ?? []).join('\r\n')],
    ['base32', base32(b)],
    ['base32, offset 3', base32(Buffer.concat([Buffer.from('qqq'), b]))],
    ['percent', [...b].map((c) => `%${hex2(c)}`).join('')],
    [
      'percent, upper, partly',
      [...b].map((c, i) => (i % 2 ? `%${hex2(c).toUpperCase()}` : String.fromCharCode(c))).join(''),
    ],
    ['double percent', [...b].map((c) => `%25${hex2(c)}`).join('')],
    ['\\x', [...b].map((c) => `\\x${hex2(c)}`).join('')],
    ['utf-16le', Buffer.from(text, 'utf16le').toString('latin1')],
    ['utf-16be', Buffer.from(text, 'utf16le').swap16().toString('latin1')],
  ];
  if (ascii) {
    forms.push(
      ['json \\u', [...b].map((c) => `\\u${hex2(c).padStart(4, '0')}`).join('')],
      ['html decimal', [...b].map((c) => `&#${c};`).join('')],
      ['html hex, zero-padded', [...b].map((c) => `&#x000${hex2(c)};`).join('')],
      // The longest escape there is, so occurrences come near maxMatchLength.
      ['html hex, longest', [...b].map((c) => `&#x000000${hex2(c)};`).join('')],
    );
  }
  return forms;
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=%&#;\\x"_-. \r\n';

function randomText(next: () => number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(next() * ALPHABET.length)];
  return s;
}

function randomSecret(next: () => number): Buffer {
  const length = 8 + Math.floor(next() * 24);
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789_-/+= %&é';
  let s = '';
  for (let i = 0; i < length; i++) s += chars[Math.floor(next() * chars.length)];
  return Buffer.from(s, 'utf8');
}

function chunked(next: () => number, data: Buffer, maxChunk: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length;) {
    const n = 1 + Math.floor(next() * maxChunk);
    out.push(data.subarray(i, i + n));
    i += n;
  }
  return out;
}

// `flagLast`: the last piece is pushed as the last (as a body of known
// length is), and end() must then add nothing.
function streamed(r: Redactor | null, chunks: Buffer[], cut: number, flagLast = false) {
  const s = streamRedactor(r, cut);
  const parts = chunks.map((c, i) => s.push(c, flagLast && i === chunks.length - 1));
  const rest = s.end();
  if (flagLast && chunks.length > 0 && rest.length > 0) throw new Error('end() gave more after the last piece');
  parts.push(rest);
  return { data: Buffer.concat(parts), count: s.count, cut: s.truncated };
}

t.test('the same replacements, count and cut as the whole-body redactor', async (t) => {
  let cases = 0;
  for (let seed = 1; seed <= 60; seed++) {
    const next = rng(seed);
    const secret = randomSecret(next);
    const injected = Buffer.concat([Buffer.from('Bearer '), secret]);
    const r = buildRedactor([secret, injected], 'api');
    if (!r) throw new Error('no redactor');
    const forms = [...encodings(secret), ...encodings(injected)];
    const pieces: string[] = [];
    const used: string[] = [];
    for (let k = 0; k < 6; k++) {
      pieces.push(randomText(next, Math.floor(next() * 40)));
      const [name, form] = forms[Math.floor(next() * forms.length)]!;
      pieces.push(form);
      used.push(name);
    }
    pieces.push(randomText(next, Math.floor(next() * 40)));
    const data = Buffer.from(pieces.join(''), 'latin1');
    const cuts = [Infinity, data.length, data.length - 1, Math.floor(next() * data.length), 0, 5];
    for (const cut of cuts) {
      const whole = redact(r, data, cut);
      for (const [maxChunk, flagLast] of [1, 3, 17, 200].flatMap((m) => [[m, false] as const, [m, true] as const])) {
        const got = streamed(r, chunked(next, data, maxChunk), cut, flagLast);
        const ending = flagLast ? 'last piece flagged' : 'end()';
        const label = `seed ${seed}, cut ${cut}, chunks ≤ ${maxChunk}, ${ending}, forms ${used.join(' | ')}`;
        if (!got.data.equals(whole.data)) t.fail(`${label}: output differs`);
        if (got.count !== whole.count) t.fail(`${label}: count ${got.count}, whole ${whole.count}`);
        if (got.cut !== whole.cut) t.fail(`${label}: truncated ${got.cut}, whole ${whole.cut}`);
        if (cut === Infinity && exposures(got.data, secret).length > 0) t.fail(`${label}: the secret is left`);
        cases += 1;
      }
    }
    r.wipe();
  }
  t.pass(`${cases} chunkings agree`);
});

t.test('without a redactor, the cut alone applies', async (t) => {
  const data = Buffer.from('0123456789abcdef');
  for (const cut of [Infinity, 16, 15, 4, 0]) {
    const got = streamed(null, chunked(rng(cut === Infinity ? 7 : cut + 1), data, 3), cut);
    const whole = redact(null, data, cut);
    t.same([got.data.toString(), got.cut], [whole.data.toString(), whole.cut], `cut ${cut}`);
  }
});

t.test('at most maxMatchLength − 1 bytes are held back', async (t) => {
  const r = buildRedactor([Buffer.from('tk_secret_value_0123')], 'api');
  if (!r) throw new Error('no redactor');
  const s = streamRedactor(r);
  let sent = 0;
  let pushed = 0;
  let worst = 0;
  const next = rng(99);
  for (let i = 0; i < 2000; i++) {
    const c = Buffer.from(randomText(next, 1 + Math.floor(next() * 5)), 'latin1');
    pushed += c.length;
    sent += s.push(c).length;
    worst = Math.max(worst, pushed - sent);
  }
  t.ok(worst <= r.maxMatchLength - 1, `held back at most ${worst} of ${r.maxMatchLength - 1} allowed`);
  t.ok(worst > 0, 'something is held back (an occurrence may still be arriving)');
  t.equal(sent + s.end().length, pushed, 'text without the secret comes out unchanged');
});

t.test('only what may begin an occurrence waits: an event stream is not held back', async (t) => {
  const secret = 'sk-live-0123456789abcdef';
  const r = buildRedactor([Buffer.from(secret)], 'api');
  if (!r) throw new Error('no redactor');
  const s = streamRedactor(r);
  const event = 'event: delta\ndata: {"text":"hello"}\n\n';
  t.equal(s.push(Buffer.from(event)).toString(), event, 'a whole event goes out at once');
  t.equal(s.push(Buffer.from('data: sk-li')).toString(), 'data: ', 'a possible start of the secret waits');
  t.equal(
    s.push(Buffer.from('ve-0123456789abcdef\n\n')).toString(),
    '[REDACTED:api]\n\n',
    'and is replaced once whole',
  );
  t.equal(s.push(Buffer.from('data: sk-lix\n\n')).toString(), 'data: sk-lix\n\n', 'a near miss goes out once it fails');
  t.equal(s.end().length, 0);
  t.equal(s.count, 1);
});

t.test('nothing is scanned after the last piece: a later piece throws, an empty one is nothing', async (t) => {
  const secret = 'sk-live-0123456789abcdef';
  const r = buildRedactor([Buffer.from(secret)], 'api');
  if (!r) throw new Error('no redactor');
  const s = streamRedactor(r);
  t.equal(
    s.push(Buffer.from('data: sk-live-0123'), true).toString(),
    'data: sk-live-0123',
    'the tail is decided at once',
  );
  t.equal(s.push(Buffer.alloc(0)).length, 0, 'an empty piece after the last adds nothing');
  // Scanned alone, "456789abcdef" would pass: the occurrence spanning the
  // two pieces must not go out in halves.
  t.throws(() => s.push(Buffer.from('456789abcdef')), /after the last one/);
  t.equal(s.end().length, 0);
  r.wipe();
});
