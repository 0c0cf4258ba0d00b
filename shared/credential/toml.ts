// Credential definitions as TOML: reading a file the author wrote, and
// printing the normalised definition `cred add` / `cred update` show before
// the passphrase is asked.
import { parseToml, TomlError, tomlSyntaxProblem } from '../toml';
import { Refusal } from '../errors';
import { CredentialDef, HTTP_KEYS, SSH_KEYS, INJECT_KEYS, ALLOW_RULE_KEYS } from './types';
import { Field, knownFields } from './entries';
import { TomlFloat, validateDefinition, DEFAULT_SOURCE } from './schema';

// Integers arrive as bigint (so floats can be told apart); integers that fit
// become numbers, floats become TomlFloat so the validator reports them.
// Tables are rebuilt without a prototype so a "__proto__" key stays a key.
function fromToml(value: unknown): unknown {
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value;
  if (typeof value === 'number') return new TomlFloat(value);
  if (Array.isArray(value)) return value.map(fromToml);
  if (typeof value === 'object' && value !== null && !(value instanceof Date)) {
    const out = Object.create(null) as Record<string, unknown>;
    for (const [k, v] of Object.entries(value)) out[k] = fromToml(v);
    return out;
  }
  return value;
}

// Read and validate a definition. A TOML syntax error names its line and
// column but never quotes the document: a secret pasted into the wrong file
// must not end up in an error message.
export function parseDefinitionToml(text: string, source: string = DEFAULT_SOURCE): CredentialDef {
  let doc: unknown;
  try {
    doc = parseToml(text, { integersAsBigInt: true });
  } catch (e) {
    if (!(e instanceof TomlError)) throw e;
    const what = tomlSyntaxProblem(e, text);
    const message = `not valid TOML at line ${e.line}, column ${e.column}: ${what}`;
    throw new Refusal('invalid_definition', `${source}: ${message}; fix the definition and run the command again`, {
      problems: [{ path: '', message }],
    });
  }
  return validateDefinition(fromToml(doc), source);
}

// TOML basic strings accept JSON's escapes; DEL must be escaped too.
function tomlString(s: string): string {
  return JSON.stringify(s).replace(/\x7f/g, '\\u007f');
}

function tomlValue(v: unknown): string {
  if (typeof v === 'string') return tomlString(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(', ')}]`;
  // An inline table (the computed forms of [inject]), keys as written.
  if (typeof v === 'object' && v !== null)
    return `{ ${Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${tomlKey(k)} = ${tomlValue(x)}`)
      .join(', ')} }`;
  throw new TypeError(`definitionToToml: cannot print ${typeof v}`);
}

// A header name is a bare key unless it holds a character TOML keys cannot
// (a "." would make it a dotted key).
function tomlKey(k: string): string {
  return /^[A-Za-z0-9_-]+$/.test(k) ? k : tomlString(k);
}

function keyLines(fields: readonly Field[]): string[] {
  return fields.filter(([, v]) => v !== undefined).map(([k, v]) => `${k} = ${tomlValue(v)}`);
}

// The normalised definition as TOML: fixed key order, top-level keys before
// the [headers], [inject] and [[allow]] tables. parseDefinitionToml reads it back to an
// equal definition.
export function definitionToToml(def: CredentialDef): string {
  if (def.kind === 'ssh') return `${keyLines(knownFields(def, SSH_KEYS)).join('\n')}\n`;
  const top = HTTP_KEYS.filter((k) => k !== 'headers' && k !== 'inject' && k !== 'allow');
  const parts = [keyLines(knownFields(def, top)).join('\n')];
  if (def.headers) {
    parts.push(
      ['[headers]', ...Object.entries(def.headers).map(([k, v]) => `${tomlKey(k)} = ${tomlString(v)}`)].join('\n'),
    );
  }
  parts.push(['[inject]', ...keyLines(knownFields(def.inject, INJECT_KEYS))].join('\n'));
  for (const rule of def.allow) {
    parts.push(['[[allow]]', ...keyLines(knownFields(rule, ALLOW_RULE_KEYS))].join('\n'));
  }
  return `${parts.join('\n\n')}\n`;
}
