// The text of executor.example.toml and of the config `postern init` writes,
// both derived from the settings table.
import { TABLES, TomlDefault } from './config-types';
import { ROWS } from './config-settings';

function tomlLiteral(v: TomlDefault): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return String(v);
  return '[]';
}

const HEADER = [
  '# postern daemon settings: no secrets and no credential policy',
  '# belong here; those live in the vault. The vault pins this file: after any',
  '# change, the daemon stays locked until `postern config approve`.',
  '#',
  '# Durations: a whole number and a unit: ms, s, m, h, d ("500ms", "30s", "8h"),',
  '#   more than zero and at most 24d (Node timers cannot wait longer).',
  '# Sizes: a whole number and a unit: B, KiB, MiB, GiB (powers of 1024) or',
  '#   KB, MB, GB (powers of 1000), more than zero and at most 1GiB.',
  '# Fractions ("1.5s"), signs, spaces and bare numbers are refused, as are',
  '# unknown keys and tables. Relative paths are relative to home; "~/" is',
  "# the user's home directory.",
  '#',
  '# Request headers (User-Agent, an API version) are not set here: they',
  '# belong to a credential, in the [headers] table of its definition.',
  '# postern sends User-Agent: postern/<version> when neither the agent nor',
  '# the credential sets one (docs/responses.md, "Headers postern adds").',
];

const HOME_NOTE = [
  '# home is commented out so that this file loads wherever it is placed: a',
  '# config found inside a home that names a different home is refused as',
  '# ambiguous. Set it only in a config passed with --config or POSTERN_CONFIG.',
];

const COMMENT_COLUMN = 32;

function renderConfigText(style: 'example' | 'initial'): string {
  const lines = [...HEADER];
  if (style === 'initial') {
    lines.push('#', '# Every setting is commented out and shows its default; uncomment a line to change it.');
  }
  for (const table of TABLES) {
    lines.push('', `[${table}]`);
    for (const row of ROWS) {
      if (row.table !== table) continue;
      const commented = style === 'initial' || row.kind.path === 'home';
      if (row.kind.path === 'home' && style === 'example') lines.push(...HOME_NOTE);
      const setting = `${commented ? '# ' : ''}${row.key} = ${tomlLiteral(row.default)}`;
      lines.push(`${setting.padEnd(COMMENT_COLUMN)} # ${row.reason}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

// What executor.example.toml holds: every setting active except home.
export function exampleConfigText(): string {
  return renderConfigText('example');
}

// What `postern init` writes: every setting commented out, so the effective
// config is the defaults until the user changes a line.
export function initialConfigText(): string {
  return renderConfigText('initial');
}
