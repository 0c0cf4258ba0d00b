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
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, canConnect, Daemon } from './postern';

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

export async function startFakeDaemon(h: { env: NodeJS.ProcessEnv; home: string }, clock: Clock): Promise<Daemon> {
  const entry = `delete process.env.LD_PRELOAD; process.argv = [process.execPath, ${JSON.stringify(CLI)}, 'daemon']; require(${JSON.stringify(CLI)});`;
  const proc = spawn(
    '/usr/bin/env',
    [
      '-u',
      'NODE_OPTIONS',
      `LD_PRELOAD=${LIBFAKETIME}`,
      `FAKETIME_TIMESTAMP_FILE=${clock.file}`,
      'FAKETIME_NO_CACHE=1',
      'FAKETIME_DONT_FAKE_MONOTONIC=1',
      process.execPath,
      '-e',
      entry,
    ],
    { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let logs = '';
  proc.stdout!.on('data', (d: Buffer) => (logs += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  let done = false;
  void exited.then(() => (done = true));
  const deadline = Date.now() + 30_000;
  while (!(await canConnect(join(h.home, 'admin.sock'))) || !(await canConnect(join(h.home, 'agent.sock')))) {
    if (done) throw new Error(`faketime daemon exited early:\n${logs}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`faketime daemon did not start:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    proc,
    logs: () => logs,
    exited,
    async stop() {
      if (!done) proc.kill('SIGTERM');
      return exited;
    },
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
