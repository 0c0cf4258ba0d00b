// Comparing definitions: the hash recorded in the audit journal and the
// vault, and the line-by-line difference `cred update` shows.
import { createHash } from 'node:crypto';
import { canonicalJson } from '../canonical-json';
import { CredentialDef, INJECT_KEYS, ALLOW_RULE_KEYS } from './types';
import { Field, allFields, definitionFields } from './entries';

// "sha256:<hex>" of the canonical JSON (sorted keys, no whitespace) of the
// normalised definition. A definition holds no secret, so neither does this.
export function definitionHash(def: CredentialDef): string {
  return `sha256:${createHash('sha256').update(canonicalJson(def), 'utf8').digest('hex')}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// path → JSON text of each leaf, in print order. Tables and lists of tables
// are walked; lists of values are leaves.
function flatten(def: CredentialDef): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (fields: readonly Field[], prefix: string): void => {
    for (const [key, v] of fields) {
      const path = `${prefix}${key}`;
      if (v === undefined || v === null) continue;
      if (isPlainObject(v)) walk(allFields(v, key === 'inject' ? INJECT_KEYS : []), `${path}.`);
      else if (Array.isArray(v) && v.some(isPlainObject)) {
        v.forEach((item, i) => {
          if (isPlainObject(item)) walk(allFields(item, key === 'allow' ? ALLOW_RULE_KEYS : []), `${path}[${i}].`);
          else out.set(`${path}[${i}]`, JSON.stringify(item));
        });
      } else out.set(path, JSON.stringify(v));
    }
  };
  walk(definitionFields(def), '');
  return out;
}

// The paths of both, in document order: those of `after`, with those only
// in `before` placed after the path that preceded them there.
function mergedOrder(before: string[], after: string[]): string[] {
  const inAfter = new Set(after);
  const out: string[] = [];
  let i = 0;
  const flushUntil = (stop: string | undefined): void => {
    while (i < before.length && before[i] !== stop) {
      const p = before[i] as string;
      if (!inAfter.has(p)) out.push(p);
      i += 1;
    }
  };
  for (const p of after) {
    if (before.indexOf(p, i) !== -1) {
      flushUntil(p);
      i += 1;
    } else {
      // A new path: removed paths at this point come first ("-" before "+").
      while (i < before.length && !inAfter.has(before[i] as string)) out.push(before[i++] as string);
    }
    out.push(p);
  }
  flushUntil(undefined);
  return out;
}

// Human-readable changes: "- path = old" then "+ path = new" for each leaf
// that differs; [] when the definitions are equal.
export function diffDefinitions(before: CredentialDef, after: CredentialDef): string[] {
  const a = flatten(before);
  const b = flatten(after);
  const lines: string[] = [];
  for (const path of mergedOrder([...a.keys()], [...b.keys()])) {
    const old = a.get(path);
    const now = b.get(path);
    if (old === now) continue;
    if (old !== undefined) lines.push(`- ${path} = ${old}`);
    if (now !== undefined) lines.push(`+ ${path} = ${now}`);
  }
  return lines;
}
