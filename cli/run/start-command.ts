// CMD itself: started without a shell, stdio inherited, the signals a
// terminal or a supervisor sends passed on, and its end turned into an exit
// status as a shell gives it (128 + n for a signal; 127 not found, 126 not
// executable).
import { spawn, ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { UsageError } from '../errors';
import { inTerminalForeground } from './terminal-group';

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

// CMD shares run's process group, so a signal sent to the group reaches it
// without run. Ctrl-C is such a signal: the terminal sends SIGINT to its
// foreground group, and a second copy from run would be a second interrupt
// (which many programs take as "stop now", an agent's CLI as "exit"). So a
// SIGINT is not passed on while run is in its terminal's foreground group;
// anywhere else, and for SIGTERM and SIGHUP, it is (nothing tells a signal
// sent to run's pid from one sent to its group: docs/operations.md).
function reachedCmdAlready(signal: NodeJS.Signals): boolean {
  return signal === 'SIGINT' && inTerminalForeground();
}

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
  // The handlers are in place before CMD exists: a signal that arrives
  // while it starts is passed on once it runs, never taken by run itself.
  let child: ChildProcess | null = null;
  const pending: NodeJS.Signals[] = [];
  const forward = (signal: NodeJS.Signals) => (): void => {
    if (child?.pid === undefined) pending.push(signal);
    else if (!reachedCmdAlready(signal)) child.kill(signal);
  };
  const handlers = FORWARDED.map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  const release = (): void => {
    for (const [s, h] of handlers) process.off(s, h);
  };
  return new Promise((resolve, reject) => {
    const started = spawn(cmd, args, { env, stdio: 'inherit' });
    child = started;
    const status = new Promise<number>((done) => {
      started.once('exit', (code, signal) => {
        release();
        const n = signal ? (constants.signals as Record<string, number | undefined>)[signal] : undefined;
        done(code ?? (n !== undefined ? 128 + n : 1));
      });
    });
    started.once('error', (e: NodeJS.ErrnoException) => {
      if (started.pid !== undefined) return;
      release();
      reject(startProblem(cmd, e));
    });
    started.once('spawn', () => {
      for (const s of pending.splice(0)) started.kill(s);
      resolve({ child: started, status });
    });
  });
}
