// The real daemon under libfaketime, with
// an offset read from a file at every clock call, so a test can step the
// wall clock while the daemon runs. FAKETIME_DONT_FAKE_MONOTONIC=1: only
// CLOCK_REALTIME moves, as with an NTP step, a user changing the date, or a
// suspend/resume (Linux's CLOCK_MONOTONIC, which Node timers use, does not
// count time spent suspended; see clock_gettime(2)).
//
// The daemon refuses LD_PRELOAD (SPEC §3); the loader needs it only at exec,
// so a one-line `node -e` entry deletes it from process.env before the CLI's
// own check runs. Requires the Debian package `faketime` (libfaketime).
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, startDaemon, type Daemon } from './postern';

export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
export const haveFaketime = existsSync(LIBFAKETIME);

export interface Clock {
  file: string;
  // Offset as libfaketime reads it: "+0", "-1h", "+3h", "-1d" ...
  set(offset: string): void;
}

export function makeClock(dir: string): Clock {
  const file = join(dir, 'faketime-offset');
  writeFileSync(file, '+0\n');
  return { file, set: (offset) => writeFileSync(file, `${offset}\n`) };
}

export function startFakeDaemon(h: { env: NodeJS.ProcessEnv; home: string }, clock: Clock): Promise<Daemon> {
  const entry = `delete process.env.LD_PRELOAD; process.argv = [process.execPath, ${JSON.stringify(CLI)}, 'daemon']; require(${JSON.stringify(CLI)});`;
  return startDaemon(h, [], {
    prefix: [
      `LD_PRELOAD=${LIBFAKETIME}`,
      `FAKETIME_TIMESTAMP_FILE=${clock.file}`,
      'FAKETIME_NO_CACHE=1',
      'FAKETIME_DONT_FAKE_MONOTONIC=1',
    ],
    nodeArgs: ['-e', entry],
    startMs: 30_000,
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
