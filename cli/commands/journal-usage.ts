// How big the audit journal is and how fast it grows (SPEC §9), read from
// its files: `postern status` shows the size and the growth over the last
// hour, `postern doctor` warns when the filesystem that holds it is nearly
// full. Every journal line carries its write time in clear, so the growth
// is the bytes of the lines written within the hour, found by reading the
// journal backwards from its end.
import { closeSync, openSync, readSync, statfsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { segmentPath } from '../../shared/audit-format';

export interface JournalUsage {
  bytes: number;
  segments: number;
  // Bytes of the entries written in the last hour.
  last_hour_bytes: number;
  // True when every entry of the journal is from the last hour.
  younger_than_an_hour: boolean;
}

const HOUR_MS = 3600_000;
const CHUNK = 64 * 1024;
const TIME = /"time":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"/;

// Reading `file` backwards from its end: the offset just after the last
// line written before `cutoff`, or null when every line is newer.
function endOfLastOlderLine(file: string, size: number, cutoff: number): number | null {
  const fd = openSync(file, 'r');
  try {
    let end = size;
    let carry = Buffer.alloc(0);
    for (;;) {
      const start = Math.max(0, end - CHUNK);
      const chunk = Buffer.alloc(end - start);
      readSync(fd, chunk, 0, chunk.length, start);
      const buf = Buffer.concat([chunk, carry]);
      const older = (from: number, to: number): boolean => {
        const m = TIME.exec(buf.subarray(from, to).toString('latin1'));
        return m !== null && Date.parse(m[1]!) < cutoff;
      };
      // `to`: where the line being looked at ends (its newline, or the end).
      let to = buf.length;
      for (let j = buf.length - 1; j >= 0; j--) {
        if (buf[j] !== 0x0a) continue;
        if (j + 1 < to && older(j + 1, to)) return Math.min(size, start + to + 1);
        to = j;
      }
      if (start === 0) return to > 0 && older(0, to) ? Math.min(size, to + 1) : null;
      carry = Buffer.from(buf.subarray(0, to));
      end = start;
    }
  } finally {
    closeSync(fd);
  }
}

export function journalUsage(path: string, now = Date.now()): JournalUsage {
  const sizes: number[] = [];
  for (let n = 0; ; n++) {
    try {
      sizes.push(statSync(segmentPath(path, n)).size);
    } catch (e) {
      if (n === 0) throw e;
      break;
    }
  }
  const bytes = sizes.reduce((a, b) => a + b, 0);
  const cutoff = now - HOUR_MS;
  let after = 0;
  for (let n = sizes.length - 1; n >= 0; n--) {
    const at = endOfLastOlderLine(segmentPath(path, n), sizes[n]!, cutoff);
    if (at !== null)
      return { bytes, segments: sizes.length, last_hour_bytes: after + sizes[n]! - at, younger_than_an_hour: false };
    after += sizes[n]!;
  }
  return { bytes, segments: sizes.length, last_hour_bytes: bytes, younger_than_an_hour: true };
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return `${v.toFixed(1)} ${units[u]}`;
}

// Doctor warns below either bound: what a flood of refusals (summarised
// beyond audit.refusal_burst) or a busy day could still fill.
export const MIN_FREE_BYTES = 1024 ** 3;
export const MIN_FREE_FRACTION = 0.05;

export interface FreeSpace {
  free: number;
  total: number;
  nearlyFull: boolean;
}

// The filesystem of the journal's directory, as the daemon's user sees it
// (blocks available to an unprivileged user).
export function journalFreeSpace(path: string): FreeSpace {
  const s = statfsSync(dirname(path));
  const free = s.bavail * s.bsize;
  const total = s.blocks * s.bsize;
  return { free, total, nearlyFull: free < MIN_FREE_BYTES || free < total * MIN_FREE_FRACTION };
}
