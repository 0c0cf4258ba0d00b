// The soft "Max open files" of this process, as /proc/self/limits says
// (Node raises it to the hard limit at start): what the daemon's and
// `postern run`'s connection budgets are made from.
import { readFileSync } from 'node:fs';

// null when /proc does not say.
export function openFileLimit(text = readLimits()): number | null {
  const line = text.split('\n').find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  if (soft === 'unlimited') return Number.MAX_SAFE_INTEGER;
  const n = Number(soft);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

function readLimits(): string {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return '';
  }
}
