// Failures of connect(2) itself, for HTTP and SSH alike: nothing was sent,
// and each says why in words an agent can act on.
import type { FailureRow } from './failure-table';

const UNREACHABLE: Readonly<Record<string, string>> = {
  ENETUNREACH: 'no route to its network from this machine',
  EHOSTUNREACH: 'no route to the host',
  ENETDOWN: 'the network is down',
  EHOSTDOWN: 'the host is down',
  EADDRNOTAVAIL: 'no local address can reach it',
  EACCES: 'a firewall rule on this machine refused the connection',
  EPERM: 'a firewall rule on this machine refused the connection',
};

// One row per code: "<host> is unreachable (CODE: why)".
export function unreachableRows<F extends { host: string; code: string | undefined }>(
  what: 'request' | 'command',
): FailureRow<F>[] {
  return Object.entries(UNREACHABLE).map(([code, why]) => ({
    covers: (f) => f.code === code,
    refusal: 'upstream_error',
    words: (f) =>
      `${f.host} is unreachable (${code}: ${why}); the ${what} was not sent — check the network, then retry`,
  }));
}
