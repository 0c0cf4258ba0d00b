// What an agent is told when an SSH connection cannot be made (SPEC §6.6):
// ssh2's failure levels and Node's errno, as one table read top to bottom.
// Nothing was sent in any of them: the command goes only on a connection
// that is up and logged in.
import type { Refusal } from '../../shared/errors';
import { unreachableRows } from './connect-errors';
import { codeIs, refusalFor, type FailureTable } from './failure-table';

export interface SshFailure {
  host: string;
  code: string | undefined; // Node's errno
  level: string | undefined; // ssh2's stage of failure
  timedOut: boolean; // the connection's deadline passed
}

export const SSH_CONNECT_FAILURES: FailureTable<SshFailure> = {
  rows: [
    {
      covers: (f) => f.timedOut || f.level === 'client-timeout',
      refusal: 'upstream_timeout',
      maybeExecuted: false,
      words: (f) => `connecting to ${f.host} over SSH timed out; the command was not sent — retry later`,
    },
    {
      covers: (f) => f.level === 'client-authentication',
      refusal: 'upstream_error',
      words: (f) =>
        `${f.host} refused the credential's login; the command was not sent — a human should check the user and secret of the credential`,
    },
    {
      covers: codeIs('ECONNREFUSED'),
      refusal: 'upstream_error',
      words: (f) => `${f.host} refused the SSH connection; the command was not sent — check the host and port`,
    },
    ...unreachableRows<SshFailure>('command'),
  ],
  otherwise: {
    refusal: 'upstream_error',
    words: (f) =>
      `the SSH connection to ${f.host} failed (${f.code ?? f.level ?? 'unknown'}); the command was not sent — check the host and port, or retry later`,
  },
};

export function connectFailure(e: unknown, host: string, timedOut: boolean): Refusal {
  const err = e as { code?: string; level?: string };
  return refusalFor(SSH_CONNECT_FAILURES, { host, code: err?.code, level: err?.level, timedOut });
}

export function connectTimeout(host: string): Refusal {
  return connectFailure(null, host, true);
}
