import pino from 'pino';

// JSON logs on stderr. Synchronous writes so nothing is lost when the daemon
// is killed; log lines never carry secrets (callers pass only names, codes,
// counts and hashes).
export type Logger = pino.Logger;

export function createLogger(level: string): Logger {
  return pino(
    { level, base: { pid: process.pid, name: 'postern' }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ fd: 2, sync: true }),
  );
}
