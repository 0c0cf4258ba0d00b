// How the CLI ends: exit codes of SPEC §5 and one line on stderr naming what
// to do next; never a stack trace.
import { Refusal } from '../shared/errors';

export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3, interrupted: 130 } as const;

export class UsageError extends Error {}

// The person pressed Ctrl-C at a prompt: nothing was done (exit 130, as a
// shell reports a command ended by SIGINT).
export class Interrupted extends Error {
  constructor() {
    super('cancelled (Ctrl-C); nothing was done');
  }
}

// The daemon could not be reached, or (maybeExecuted) it had the request and
// closed the connection before answering.
export class Unreachable extends Error {
  constructor(
    message: string,
    readonly maybeExecuted = false,
  ) {
    super(message);
  }
}

// An error returned by the daemon over admin.sock.
export class DaemonRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly detail: Record<string, unknown>,
  ) {
    super(message);
  }
}

export function exitCodeFor(e: unknown): number {
  // A command that ends as another tool does (`request ssh`: 255, as ssh)
  // gives its errors their exit code.
  const own = (e as { exitCode?: unknown } | null)?.exitCode;
  if (typeof own === 'number') return own;
  if (e instanceof UsageError) return EXIT.usage;
  if (e instanceof Interrupted) return EXIT.interrupted;
  if (e instanceof Unreachable) return EXIT.unreachable;
  return EXIT.refused;
}

export function describeError(e: unknown): string {
  if (
    e instanceof Refusal ||
    e instanceof DaemonRefusal ||
    e instanceof UsageError ||
    e instanceof Unreachable ||
    e instanceof Interrupted
  ) {
    return e.message;
  }
  const err = e as NodeJS.ErrnoException;
  if (err && typeof err.code === 'string' && typeof err.path === 'string')
    return `${err.code} on ${err.path}; check the path and its permissions`;
  return 'unexpected error (a bug in postern); please report it with the command you ran';
}

export function problemsOf(e: unknown): { path: string; message: string }[] {
  const d = e instanceof Refusal ? e.detail : e instanceof DaemonRefusal ? e.detail : undefined;
  const p = d?.['problems'];
  return Array.isArray(p) ? (p as { path: string; message: string }[]) : [];
}

// A daemon's code as it came; otherwise one of CLIENT_CODES.
export function codeOf(e: unknown): string {
  if (e instanceof Refusal || e instanceof DaemonRefusal) return e.code;
  if (e instanceof UsageError) return 'usage';
  if (e instanceof Interrupted) return 'interrupted';
  if (e instanceof Unreachable) return 'daemon_unreachable';
  return 'internal_error';
}
