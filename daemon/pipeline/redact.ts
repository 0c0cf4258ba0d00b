// Response redaction (SPEC §6.4): every occurrence postern can find of the
// secret and of the whole injected value is replaced by
// `[REDACTED:<credential>]`. Defence in depth, not a guarantee.
//
// Forms searched, each a row of one table: raw; base64 and base64url,
// padded or not, at each of the three alignments; hex in either case;
// percent-encoded (fully, either case); JSON-escaped. The whole (capped)
// body is searched at once, so chunk boundaries do not matter.

type Encoder = (needle: Buffer) => Buffer[];

function b64Variants(needle: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let o = 0; o < 3; o++) {
    const tail = needle.subarray(o);
    if (tail.length < 3) continue;
    const full = Math.floor(tail.length / 3) * 3;
    // The part that encodes the same whatever surrounds it.
    const stable = tail.subarray(0, full).toString('base64');
    out.push(Buffer.from(stable), Buffer.from(stable.replace(/\+/g, '-').replace(/\//g, '_')));
  }
  return out;
}

export const REDACTION_FORMS: readonly { name: string; encode: Encoder }[] = [
  { name: 'raw', encode: (n) => [n] },
  { name: 'base64 / base64url (3 alignments)', encode: b64Variants },
  { name: 'hex (lower, upper)', encode: (n) => [Buffer.from(n.toString('hex')), Buffer.from(n.toString('hex').toUpperCase())] },
  {
    name: 'percent-encoded (lower, upper)',
    encode: (n) => {
      const lower = [...n].map((c) => `%${c.toString(16).padStart(2, '0')}`).join('');
      return [Buffer.from(lower), Buffer.from(lower.toUpperCase())];
    },
  },
  { name: 'JSON-escaped', encode: (n) => [Buffer.from(JSON.stringify(n.toString('latin1')).slice(1, -1), 'latin1')] },
];

export function redactionPatterns(needles: Buffer[]): Buffer[] {
  const set = new Map<string, Buffer>();
  for (const n of needles) {
    if (n.length < 4) continue; // too short to search without false hits
    for (const f of REDACTION_FORMS) for (const p of f.encode(n)) if (p.length >= 4) set.set(p.toString('hex'), p);
  }
  // Longest first, so a whole injected value is replaced before its parts.
  return [...set.values()].sort((a, b) => b.length - a.length);
}

export function redact(data: Buffer, patterns: Buffer[], label: string): { data: Buffer; count: number } {
  let count = 0;
  let cur = data;
  const mark = Buffer.from(`[REDACTED:${label}]`);
  for (const p of patterns) {
    let at = cur.indexOf(p);
    if (at < 0) continue;
    const parts: Buffer[] = [];
    let from = 0;
    while (at >= 0) {
      parts.push(cur.subarray(from, at), mark);
      count += 1;
      from = at + p.length;
      at = cur.indexOf(p, from);
    }
    parts.push(cur.subarray(from));
    cur = Buffer.concat(parts);
  }
  return { data: cur, count };
}

export function maxPatternLength(patterns: Buffer[]): number {
  return patterns.reduce((m, p) => Math.max(m, p.length), 0);
}
