// A stable JSON serialisation for hashing: object keys sorted by UTF-16 code
// unit, no whitespace, and only values that JSON represents exactly (strings,
// finite numbers, booleans, null, arrays, plain objects). Anything else is a
// programming error and throws, because silently dropping or coercing a value
// (as JSON.stringify does with undefined or NaN) would let two different
// inputs share a hash.

export type CanonicalValue =
  string | number | boolean | null | readonly CanonicalValue[] | { readonly [key: string]: CanonicalValue };

export function canonicalJson(value: unknown): string {
  return encode(value, '$');
}

function encode(value: unknown, where: string): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: ${where} is not a finite number`);
      return JSON.stringify(value);
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) return `[${value.map((v, i) => encode(v, `${where}[${i}]`)).join(',')}]`;
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`canonicalJson: ${where} is not a plain object`);
      }
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${encode(record[k], `${where}.${k}`)}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonicalJson: ${where} has type ${typeof value}, which JSON cannot represent`);
  }
}
