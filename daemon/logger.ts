import { writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import pino from 'pino';
import type { LogFormat } from '../shared/config';
import { prettyLine } from './log-pretty';

// Logs on stderr: JSON for journald and log collectors, or one short line per
// event for a person at a terminal (daemon.log_format). Synchronous writes so
// nothing is lost when the daemon is killed; log lines never carry secrets
// (callers pass only names, codes, counts and hashes).
export type Logger = pino.Logger;

const STDERR = 2;

// "auto" decides once, at start: a daemon started on a terminal and later
// redirected keeps the format it began with.
export function prettyWanted(format: LogFormat, fd = STDERR): boolean {
  return format === 'pretty' || (format === 'auto' && isatty(fd));
}

// `pid` on every line is the daemon's own. Journal payloads name the
// process a request came from as `pid` too; in the log that one is
// `peer_pid`, so no line carries the key twice with two meanings. The
// daemon's own pid in daemon_start's payload is the same value and is dropped.
export function ownPidOnly(fields: Record<string, unknown>): Record<string, unknown> {
  return 'pid' in fields ? logFields(fields) : fields;
}

// Payloads as the fields of one log line, later ones winning, in one copy
// with the rule above applied (the line's formatter then leaves it as is).
export function logFields(...parts: object[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let pid: unknown;
  for (const part of parts)
    for (const k of Object.keys(part)) {
      const v = (part as Record<string, unknown>)[k];
      if (k !== 'pid') out[k] = v;
      else {
        pid = v;
        out['peer_pid'] = v;
      }
    }
  if (pid === process.pid) delete out['peer_pid'];
  return out;
}

const prettyStderr: pino.DestinationStream = {
  write(line: string): void {
    writeSync(STDERR, prettyLine(line));
  },
};

export function createLogger(level: string, format: LogFormat): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid, name: 'postern' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { log: ownPidOnly },
    },
    prettyWanted(format) ? prettyStderr : pino.destination({ fd: STDERR, sync: true }),
  );
}
