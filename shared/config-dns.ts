// DNS servers as http.dns_servers names them.
import { isIPv4, isIPv6 } from 'node:net';
import { quoteValue } from './units';
import type { Check } from './config-types';

export interface DnsServer {
  address: string;
  port: number;
  family: 4 | 6;
}

// "ip", "ip:port", "ipv6", "[ipv6]" or "[ipv6]:port"; the port defaults to 53.
// Names are refused: finding the resolver must not itself need a resolver.
export function parseDnsServer(text: string): Check<DnsServer> {
  const hint = 'write an IP address with an optional port, e.g. "127.0.0.1:5353", "[::1]:53" or "1.1.1.1"';
  let host: string;
  let portText: string | undefined;
  let family: 4 | 6;
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(text);
  if (bracketed) {
    host = bracketed[1] ?? '';
    portText = bracketed[2];
    family = 6;
  } else if (isIPv6(text)) {
    host = text;
    family = 6;
  } else {
    const colon = text.lastIndexOf(':');
    host = colon >= 0 ? text.slice(0, colon) : text;
    portText = colon >= 0 ? text.slice(colon + 1) : undefined;
    family = 4;
  }
  if (host.includes('%')) return { ok: false, message: `${quoteValue(text)}: IPv6 zone ids are not accepted; ${hint}` };
  if (family === 6 ? !isIPv6(host) : !isIPv4(host))
    return { ok: false, message: `${quoteValue(text)} is not an IP address; ${hint}` };
  let port = 53;
  if (portText !== undefined) {
    port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
    if (port < 1 || port > 65535)
      return { ok: false, message: `${quoteValue(text)}: the port must be a number from 1 to 65535; ${hint}` };
  }
  return { ok: true, value: { address: host.toLowerCase(), port, family } };
}

export function formatDnsServer(s: DnsServer): string {
  return s.family === 6 ? `[${s.address}]:${s.port}` : `${s.address}:${s.port}`;
}
