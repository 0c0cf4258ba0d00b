// How two canonical forms differ, key by key.
import { canonicalJson } from './canonical-json';
import { Refusal } from './errors';
import { ROWS } from './config-settings';
import { isTable } from './config-validate';
import { canonicalConfig } from './config-canonical';
import { defaultConfig } from './config-load';

export interface ConfigChange {
  path: string;
  from: unknown;
  to: unknown;
}

function flatten(value: unknown, prefix: string, out: Map<string, unknown>): void {
  if (isTable(value)) {
    for (const k of Object.keys(value)) flatten(value[k], prefix === '' ? k : `${prefix}.${k}`, out);
  } else {
    out.set(prefix, value);
  }
}

function parseCanonical(text: string, which: string): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (text === '') return out;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Refusal(
      'internal_error',
      `the ${which} config record is not valid JSON; review the config and run \`postern config approve\``,
    );
  }
  if (!isTable(value))
    throw new Refusal(
      'internal_error',
      `the ${which} config record is not an object; review the config and run \`postern config approve\``,
    );
  flatten(value, '', out);
  return out;
}

const ORDER = new Map<string, number>(
  ROWS.flatMap((r) =>
    r.path === 'http.ca_file' ? [r.path, 'http.ca_file_sha256', 'http.ca_certificates'] : [r.path],
  ).map((p, i) => [p, i]),
);

const PATH_KEYS = new Set<string>(ROWS.filter((r) => r.kind.path !== undefined).map((r) => r.path));

// Key by key, in the table's order; a key on one side only is reported with
// `undefined` on the other. "" (no approved record) reports every key.
export function diffCanonical(approved: string, current: string): ConfigChange[] {
  const a = parseCanonical(approved, 'approved');
  const b = parseCanonical(current, 'current');
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort((x, y) => {
    const ox = ORDER.get(x) ?? Infinity;
    const oy = ORDER.get(y) ?? Infinity;
    return ox !== oy ? ox - oy : x < y ? -1 : x > y ? 1 : 0;
  });
  // A setting this version added, absent from a config approved before it
  // existed, is no change while it keeps its default: upgrading postern
  // does not lock anyone out (paths have no fixed default, and no new
  // setting is a path).
  const added =
    approved === '' ? new Map<string, unknown>() : parseCanonical(canonicalConfig(defaultConfig('/'), null), 'default');
  const changes: ConfigChange[] = [];
  for (const k of keys) {
    const from = a.get(k);
    const to = b.get(k);
    if (!a.has(k) && added.has(k) && !PATH_KEYS.has(k) && canonicalJson(added.get(k)) === canonicalJson(to)) continue;
    // The certificate list is read from the CA file: first listed for a file
    // whose contents are unchanged, it is the same approval.
    if (
      k === 'http.ca_certificates' &&
      !a.has(k) &&
      approved !== '' &&
      a.has('http.ca_file_sha256') &&
      a.get('http.ca_file_sha256') === b.get('http.ca_file_sha256')
    )
      continue;
    const fromText = a.has(k) ? canonicalJson(from) : undefined;
    const toText = b.has(k) ? canonicalJson(to) : undefined;
    if (fromText !== toText) changes.push({ path: k, from, to });
  }
  return changes;
}
