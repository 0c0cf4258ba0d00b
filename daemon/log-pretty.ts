import { escapeInvisible } from '../shared/units';

// The daemon's log for a person at a terminal: one short line per event,
// `HH:MM:SS level message key=value…`. Every value is escaped, so a value
// that came from a peer (an exe path, a host name) cannot move the cursor,
// recolour the screen or start a line that looks like another event.

const LEVELS: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

// Keys the line shows in its fixed places, or that a person does not need on
// every line (the daemon's own pid and name). A journal event's `kind` is
// its message already, and is not repeated.
const FIXED = new Set(['time', 'level', 'msg', 'pid', 'name']);

// Bare when nothing in it could be mistaken for a separator or a quote;
// otherwise JSON-quoted, with what JSON leaves raw (DEL, C1 controls,
// bidirectional overrides, line and paragraph separators) escaped too.
export function prettyValue(value: unknown): string {
  if (typeof value === 'string' && value !== '' && !/[\s"=\\\p{Cc}\p{Cf}\p{Z}]/u.test(value)) return value;
  return escapeInvisible(JSON.stringify(value) ?? String(value));
}

function clock(time: unknown): string {
  const d = typeof time === 'string' || typeof time === 'number' ? new Date(time) : new Date();
  const at = Number.isNaN(d.getTime()) ? new Date() : d;
  return [at.getHours(), at.getMinutes(), at.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

// One JSON log line as pino wrote it → one pretty line (with its newline).
export function prettyLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return `${escapeInvisible(json.trimEnd())}\n`;
  }
  const level = LEVELS[Number(entry['level'])] ?? 'log';
  const msg = typeof entry['msg'] === 'string' ? escapeInvisible(entry['msg']).replace(/\s/g, ' ') : '';
  const fields = Object.entries(entry)
    .filter(([k, v]) => !FIXED.has(k) && !(k === 'kind' && v === entry['msg']))
    .map(([k, v]) => `${prettyValue(k)}=${prettyValue(v)}`);
  return `${[clock(entry['time']), level.padEnd(5), msg, ...fields].filter((p) => p !== '').join(' ')}\n`;
}
