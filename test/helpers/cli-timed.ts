// The CLI run with a deadline (a hang is a finding, not a stuck test), a
// cwd, and stdin from a file descriptor.
import { spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { CLI } from './postern';

export const STACK =
  /^\s+at .+(\(.*:\d+:\d+\)|:\d+:\d+)$|node:internal|\b(TypeError|ReferenceError|RangeError|Error):/m;
export const BUG = /unexpected error \(a bug in postern\)/;

export interface Timed {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
}

export function runTimed(
  env: NodeJS.ProcessEnv,
  args: string[],
  o: { ms?: number; cwd?: string; stdinPath?: string; input?: string } = {},
): Promise<Timed> {
  return new Promise((resolve) => {
    const started = Date.now();
    let stdinFd: number | undefined;
    if (o.stdinPath !== undefined) stdinFd = openSync(o.stdinPath, 'r');
    const keep = env['NODE_OPTIONS'];
    const argv =
      keep === undefined ? ['-u', 'NODE_OPTIONS', process.execPath, CLI, ...args] : [process.execPath, CLI, ...args];
    const p = spawn('/usr/bin/env', argv, {
      env,
      cwd: o.cwd,
      stdio: [stdinFd ?? 'pipe', 'pipe', 'pipe'],
    });
    if (stdinFd !== undefined) closeSync(stdinFd);
    else {
      p.stdin!.on('error', () => undefined);
      p.stdin!.end(o.input ?? '');
    }
    let stdout = '';
    let stderr = '';
    p.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      p.kill('SIGKILL');
    }, o.ms ?? 15_000);
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut, ms: Date.now() - started });
    });
  });
}
