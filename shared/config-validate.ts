// The zod schema of the whole file, built from the settings table, and its
// issues turned into problems that name the key and say what to write.
import { z } from 'zod';
import { formatProblems, Problem, Refusal } from './errors';
import { didYouMean } from './suggest';
import { quoteValue } from './units';
import { TABLES } from './config-types';
import { AnySetting, ROWS } from './config-settings';

export function rowSchema(row: AnySetting): z.ZodType<unknown> {
  // Home has no fixed default (it depends on the environment), so an absent
  // home stays absent and is resolved later.
  return row.kind.path === 'home' ? row.kind.schema.optional() : row.kind.schema.prefault(row.default);
}

function buildSchema(): z.ZodType<Record<string, Record<string, unknown>>> {
  const tables: Record<string, z.ZodType<Record<string, unknown>>> = {};
  for (const table of TABLES) {
    const shape: Record<string, z.ZodType<unknown>> = {};
    for (const row of ROWS) if (row.table === table) shape[row.key] = rowSchema(row);
    tables[table] = z.strictObject(shape).prefault({});
  }
  return z.strictObject(tables);
}

export const CONFIG_SCHEMA = buildSchema();

// ---------------------------------------------------------------- problems

export function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function formatIssuePath(p: readonly PropertyKey[]): string {
  return p.map((seg, i) => (typeof seg === 'number' ? `[${seg}]` : `${i === 0 ? '' : '.'}${String(seg)}`)).join('');
}

// Keys as written may be quoted TOML keys holding anything.
function keyText(k: string): string {
  return /^[A-Za-z0-9_-]+$/.test(k) ? k : quoteValue(k);
}

function unknownKeyProblems(parent: readonly PropertyKey[], keys: readonly string[], raw: unknown): Problem[] {
  if (parent.length === 0) {
    return keys.map((k) => {
      const value = isTable(raw) ? raw[k] : undefined;
      if (isTable(value)) {
        return {
          path: `[unknown table] ${keyText(k)}`,
          message: `postern has no [${keyText(k)}] table${didYouMean(k, TABLES)}; the tables are ${TABLES.map((n) => `[${n}]`).join(', ')}`,
        };
      }
      const homes = ROWS.filter((r) => r.key === k).map((r) => `[${r.table}]`);
      const where = homes.length
        ? `; it belongs under ${homes.join(' or ')}`
        : `; settings go under ${TABLES.map((n) => `[${n}]`).join(', ')}`;
      return { path: `[unknown key] ${keyText(k)}`, message: `not a top-level setting${where}` };
    });
  }
  const table = String(parent[0]);
  const known = ROWS.filter((r) => r.table === table).map((r) => r.key);
  return keys.map((k) => ({
    path: `[unknown key] ${table}.${keyText(k)}`,
    message: `[${table}] has no setting ${quoteValue(k)}${didYouMean(k, known)}; remove it or fix its spelling`,
  }));
}

export function issueProblems(issue: z.core.$ZodIssue, raw: unknown): Problem[] {
  if (issue.code === 'unrecognized_keys') return unknownKeyProblems(issue.path, issue.keys, raw);
  if (issue.path.length === 1 && issue.code === 'invalid_type') {
    const table = String(issue.path[0]);
    return [
      { path: table, message: `must be a table: write [${table}] on a line of its own, with its settings below it` },
    ];
  }
  return [{ path: formatIssuePath(issue.path), message: issue.message }];
}

export function badConfig(file: string, problems: readonly Problem[]): Refusal {
  const what = problems.length === 1 ? 'a problem in the config' : `${problems.length} problems in the config`;
  return new Refusal(
    'bad_config',
    `${file}: ${what}: ${formatProblems(problems)}. Fix the config (every setting is documented in executor.example.toml) and try again`,
    { problems: [...problems] },
  );
}

export function fileRefusal(file: string, message: string): Refusal {
  return new Refusal('bad_config', `${file}: ${message}`, { problems: [{ path: '', message }] });
}
