// The fields of a definition, or of one of its tables, as [key, value] pairs
// in print order: printing and comparing walk these, so a typed definition is
// never viewed as a loose record.
import { CredentialDef, HTTP_KEYS, SSH_KEYS } from './types';

export type Field = readonly [key: string, value: unknown];

// A key of any member of a union (keyof a union holds only the shared keys).
type AnyKey<T> = T extends unknown ? keyof T & string : never;

function pick(table: object, keys: readonly string[]): Field[] {
  const values = new Map<string, unknown>(Object.entries(table));
  return keys.filter((k) => values.has(k)).map((k) => [k, values.get(k)]);
}

// The fields `order` names that `table` holds, in that order; the type
// checker holds `order` to keys the table's type has.
export function knownFields<T extends object>(table: T, order: readonly AnyKey<T>[]): Field[] {
  return pick(table, order);
}

// Those, then any others (a definition stored by another version may hold
// keys this one does not know) in sorted order, so nothing is silently left
// out.
export function allFields(table: object, order: readonly string[]): Field[] {
  const rest = Object.keys(table)
    .filter((k) => !order.includes(k))
    .sort();
  return pick(table, [...order, ...rest]);
}

// Every field of a definition: its kind's keys in print order, then any others.
export function definitionFields(def: CredentialDef): Field[] {
  return def.kind === 'ssh' ? allFields(def, SSH_KEYS) : allFields(def, HTTP_KEYS);
}
