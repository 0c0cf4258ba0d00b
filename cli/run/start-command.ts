// CMD itself: started without a shell, stdio inherited, the signals a
// terminal or a supervisor sends passed on, and its end turned into an exit
// status as a shell gives it (128 + n for a signal; 127 not found, 126 not
// executable).
import { spawn, ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { UsageError } from '../errors';

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

// A CMD that cannot be started is the command line's mistake, with a
// shell's exit code.
export class CannotStart extends UsageError {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

function startProblem(cmd: string, e: NodeJS.ErrnoException): CannotStart {
  if (e.code === 'ENOENT') return new CannotStart(`${cmd}: command not found; check the name and PATH`, 127);
  if (e.code === 'EACCES' || e.code === 'EISDIR' || e.code === 'ENOEXEC')
    return new CannotStart(`${cmd}: not executable (${e.code}); check the file and its mode`, 126);
  return new CannotStart(`${cmd}: cannot be started (${e.code ?? e.message})`, 126);
}

export interface Started {
  child: ChildProcess;
  // CMD's exit status.
  status: Promise<number>;
}

// Resolves once CMD runs (its pid known), or rejects with CannotStart.
export function startCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<Started> {
  const [cmd, ...args] = argv as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: 'inherit' });
    const forward = (signal: NodeJS.Signals) => (): void => void child.kill(signal);
    const handlers = FORWARDED.map((s) => [s, forward(s)] as const);
    const status = new Promise<number>((done) => {
      child.once('exit', (code, signal) => {
        for (const [s, h] of handlers) process.off(s, h);
        const n = signal ? (constants.signals as Record<string, number | undefined>)[signal] : undefined;
        done(code ?? (n !== undefined ? 128 + n : 1));
      });
    });
    child.once('error', (e: NodeJS.ErrnoException) => {
      if (child.pid === undefined) reject(startProblem(cmd, e));
    });
    child.once('spawn', () => {
      for (const [s, h] of handlers) process.on(s, h);
      resolve({ child, status });
    });
  });
}
