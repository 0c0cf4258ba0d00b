import { Problem, Refusal } from './errors';
import { RefusalCode } from './protocol';

// Durations and sizes as written in the config file: a whole number followed
// directly by a unit, e.g. "30s" or "8MiB". Fractions, signs, spaces and
// bare numbers are refused rather than guessed at: "1.5s" could be a typo
// for "15s", and a bare 8 could mean bytes or megabytes. Zero is refused too:
// a zero timeout or limit would make postern refuse everything.

export const DURATION_UNITS = {
  ms: 1,
  s: 1000,
  m: 60 * 1000,
  h: 60 * 60 * 1000,
  d: 24 * 60 * 60 * 1000,
} as const;

// Binary units are powers of 1024, decimal ones powers of 1000, as their
// names say (IEC). Both are accepted because both are common.
export const SIZE_UNITS = {
  B: 1,
  KB: 1000,
  MB: 1000 ** 2,
  GB: 1000 ** 3,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
} as const;

// Node's timers fire at once (with only a warning) for delays above
// 2^31-1 ms, about 24.8 days; a longer duration would silently mean "now".
export const MAX_DURATION_MS = 24 * DURATION_UNITS.d;
// Limits are buffered in memory; above 1 GiB a limit protects nothing.
export const MAX_SIZE_BYTES = SIZE_UNITS.GiB;

export type UnitResult = { ok: true; value: number } | { ok: false; message: string };

const DURATION_EXAMPLE = '"30s" (units: ms, s, m, h, d)';
const SIZE_EXAMPLE = '"8MiB" (units: B, KiB, MiB, GiB, or KB, MB, GB for powers of 1000)';

// Control, bidi and zero-width characters in text shown to a person are
// written as \u{…} escapes, so a value cannot disguise itself or the line.
export function escapeInvisible(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

// Shown in messages: config values are not secret, but they are quoted,
// escaped and cut short.
export function quoteValue(value: unknown): string {
  const text = typeof value === 'string' ? value : String(value);
  return escapeInvisible(JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text));
}

function parseWithUnits(
  text: unknown,
  units: Readonly<Record<string, number>>,
  kind: string,
  example: string,
  max: number,
  maxText: string,
): UnitResult {
  if (typeof text !== 'string') {
    return { ok: false, message: `must be a ${kind} string such as ${example}` };
  }
  const m = /^([0-9]+)([A-Za-z]+)$/.exec(text);
  if (!m) {
    if (/^\s*-/.test(text))
      return { ok: false, message: `${quoteValue(text)}: a ${kind} cannot be negative; write e.g. ${example}` };
    if (/^[0-9]*[.,][0-9]+[A-Za-z]+$/.test(text)) {
      return {
        ok: false,
        message: `${quoteValue(text)}: fractions are not accepted; use a whole number of a smaller unit, e.g. ${example}`,
      };
    }
    return {
      ok: false,
      message: `${quoteValue(text)} is not a ${kind}; write a whole number directly followed by a unit, e.g. ${example}`,
    };
  }
  const [, digits = '', unit = ''] = m;
  const factor = Object.prototype.hasOwnProperty.call(units, unit) ? units[unit] : undefined;
  if (factor === undefined) {
    return { ok: false, message: `${quoteValue(text)}: unknown unit ${quoteValue(unit)}; write e.g. ${example}` };
  }
  const value = Number(digits) * factor;
  if (value === 0) return { ok: false, message: `${quoteValue(text)}: must be more than zero` };
  if (digits.length > 15 || value > max)
    return { ok: false, message: `${quoteValue(text)}: must be at most ${maxText}` };
  return { ok: true, value };
}

export function checkDuration(text: unknown): UnitResult {
  return parseWithUnits(text, DURATION_UNITS, 'duration', DURATION_EXAMPLE, MAX_DURATION_MS, '24d');
}

// A duration no timer waits for (a lifetime checked against the clock) may
// have a bound of its own, above or below MAX_DURATION_MS.
export function checkDurationAtMost(text: unknown, max: number, maxText: string): UnitResult {
  return parseWithUnits(text, DURATION_UNITS, 'duration', DURATION_EXAMPLE, max, maxText);
}

export function checkSize(text: unknown): UnitResult {
  return parseWithUnits(text, SIZE_UNITS, 'size', SIZE_EXAMPLE, MAX_SIZE_BYTES, '1GiB');
}

function orRefuse(result: UnitResult, path: string, code: RefusalCode): number {
  if (result.ok) return result.value;
  const problem: Problem = { path, message: result.message };
  throw new Refusal(code, `${path}: ${result.message}`, { problems: [problem] });
}

// Milliseconds. Throws a Refusal (default bad_config) whose one problem names `path`.
export function parseDuration(text: unknown, path: string, code: RefusalCode = 'bad_config'): number {
  return orRefuse(checkDuration(text), path, code);
}

// Bytes. Throws a Refusal (default bad_config) whose one problem names `path`.
export function parseSize(text: unknown, path: string, code: RefusalCode = 'bad_config'): number {
  return orRefuse(checkSize(text), path, code);
}

// The largest unit that divides the value exactly, so formatting and parsing
// round-trip: 28800000 → "8h", 1500 → "1500ms".
function formatWithUnits(value: number, units: readonly (readonly [string, number])[]): string {
  for (const [unit, factor] of units) {
    if (value !== 0 && value % factor === 0) return `${value / factor}${unit}`;
  }
  const smallest = units[units.length - 1];
  return `${value}${smallest ? smallest[0] : ''}`;
}

const DURATIONS_LARGEST_FIRST = Object.entries(DURATION_UNITS).sort((a, b) => b[1] - a[1]);
// Binary units first: limits are usually powers of two.
const SIZES_PREFERRED = (['GiB', 'MiB', 'KiB', 'GB', 'MB', 'KB', 'B'] as const).map((u) => [u, SIZE_UNITS[u]] as const);

export function formatDuration(ms: number): string {
  return formatWithUnits(ms, DURATIONS_LARGEST_FIRST);
}

export function formatSize(bytes: number): string {
  return formatWithUnits(bytes, SIZES_PREFERRED);
}
