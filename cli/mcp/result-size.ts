// Keeping a tool result within mcp.max_result (SPEC §10). A result is one
// line on stdio, and its size is what it weighs serialised: JSON escapes make
// a body of control characters or lone surrogates up to six times longer
// than it is, so sizes here are counted in serialised UTF-8 bytes.

export function serialisedBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

// What the UTF-16 code unit at i (and the one after, for a surrogate pair)
// costs inside a JSON string: bytes written and code units consumed.
function unitCost(s: string, i: number): [bytes: number, units: number] {
  const c = s.charCodeAt(i);
  if (c === 0x22 || c === 0x5c) return [2, 1]; // \" and \\
  if (c < 0x20) return [c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6, 1];
  if (c < 0x80) return [1, 1];
  if (c < 0x800) return [2, 1];
  if (c >= 0xd800 && c <= 0xdbff) {
    const d = s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return [4, 2];
    return [6, 1]; // a lone surrogate is written as \udXXX
  }
  if (c >= 0xdc00 && c <= 0xdfff) return [6, 1];
  return [3, 1];
}

// The longest prefix of s whose JSON string (without its quotes) takes at
// most `bytes`, never splitting a surrogate pair; for base64, a whole number
// of 4-character groups so that what is kept still decodes.
export function prefixWithin(s: string, bytes: number, base64: boolean): string {
  let used = 0;
  let i = 0;
  while (i < s.length) {
    const [b, u] = unitCost(s, i);
    if (used + b > bytes) break;
    used += b;
    i += u;
  }
  if (base64) i -= i % 4;
  return s.slice(0, i);
}

export interface Cut {
  field: string;
  kept: number; // code units kept (characters of base64)
  of: number;
}

// Cuts string fields of `value`, in the order given, until `render(value,
// cuts)` serialises to at most `max` bytes. Returns the rendered result, or
// null when it does not fit even with every listed field emptied. The
// rendering may mention the cuts and the fields' lengths (a note, a
// summary), so a cut is measured once rendered and made shorter by what it
// still overshoots.
export function fitWithin<T extends Record<string, unknown>, R>(
  value: T,
  fields: readonly { name: string; base64: boolean }[],
  max: number,
  render: (value: T, cuts: Cut[]) => R,
): R | null {
  const first = render(value, []);
  if (serialisedBytes(first) <= max) return first;
  let v: T = value;
  const cuts: Cut[] = [];
  for (const { name, base64 } of fields) {
    const text = v[name];
    if (typeof text !== 'string' || text === '') continue;
    const cut: Cut = { field: name, kept: 0, of: text.length };
    cuts.push(cut);
    let room = max - serialisedBytes(render({ ...v, [name]: '' }, cuts));
    for (let tries = 0; tries < 8 && room > 0; tries += 1) {
      const kept = prefixWithin(text, room, base64);
      cut.kept = kept.length;
      const attempt = render({ ...v, [name]: kept }, cuts);
      const over = serialisedBytes(attempt) - max;
      if (over <= 0) return attempt;
      room -= over;
    }
    cut.kept = 0;
    v = { ...v, [name]: '' };
    const emptied = render(v, cuts);
    if (serialisedBytes(emptied) <= max) return emptied;
  }
  return null;
}
