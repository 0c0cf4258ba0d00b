// How far the old generation may grow before its next full collection.
// V8 lets it grow up to four times the size that survived the last one
// when the program allocates fast. Under load the daemon's requests are in
// flight across young-generation collections, so their short-lived objects
// are promoted and then die in the old generation: with some 25 MiB live,
// the heap reached 100–125 MiB before each full collection, and the
// daemon's resident memory 200–210 MiB at 64 requests in flight. A factor
// of 1.75 keeps that peak at ≈145 MiB for ≈2 % more CPU in the collector's
// helper threads (docs/testing.md, "Peak memory"). It is no cap: the heap
// still grows to whatever its live objects need, so a burst of large
// responses is collected more often, never refused for want of memory.
// Set at run time, since node accepts the flag only on its command line
// (not in NODE_OPTIONS); one given there is kept.
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 75;

const GIVEN = /^--heap[-_]growing[-_]percent(=|$)/;

// true when set here, false when the command line chose already.
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((a) => GIVEN.test(a))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
