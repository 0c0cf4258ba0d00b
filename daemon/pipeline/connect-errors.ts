// Failures of connect(2) itself, for HTTP and SSH alike: nothing was sent,
// and each says why in words an agent can act on.
export const UNREACHABLE: Readonly<Record<string, string>> = {
  ENETUNREACH: 'no route to its network from this machine',
  EHOSTUNREACH: 'no route to the host',
  ENETDOWN: 'the network is down',
  EHOSTDOWN: 'the host is down',
  EADDRNOTAVAIL: 'no local address can reach it',
  EACCES: 'a firewall rule on this machine refused the connection',
  EPERM: 'a firewall rule on this machine refused the connection',
};

// "<host> is unreachable (CODE: why)", or null when `code` is not one of them.
export function unreachable(host: string, code: string | undefined, what: 'request' | 'command'): string | null {
  const why = code === undefined ? undefined : UNREACHABLE[code];
  return why === undefined
    ? null
    : `${host} is unreachable (${code}: ${why}); the ${what} was not sent — check the network, then retry`;
}
