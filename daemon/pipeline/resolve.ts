// One DNS resolution per request (SPEC §6.2): at most one A and one AAAA
// query, sent together, and every address they return handed back for
// classification. The caller connects only to an address it checked, so
// nothing is filtered or cached here: each request resolves afresh.
//
// The queries go straight to the servers of /etc/resolv.conf (or
// `dns_servers`) through our own stub client (dns/), not getaddrinfo
// (dns.lookup), because:
// - getaddrinfo cannot promise "at most one A and one AAAA query": glibc
//   retries (`attempts`) and, after NXDOMAIN, walks the search domains, so
//   "api.example.com" may come back as "api.example.com.corp.lan";
// - it cannot be cancelled and blocks a libuv pool thread for its whole
//   timeout (up to tens of seconds with a dead server); four of them stall
//   every file write of the daemon, the audit journal included;
// - the system path and the `dns_servers` path are one code path, so what
//   the tests exercise through a test server is what runs.
// And not node's c-ares Resolver, which opened and closed a UDP socket for
// every query and built an exception object for every empty answer; the
// client keeps a socket per server open for a bounded number of queries
// and returns outcomes as values (dns/client.ts says what it checks).
// What this gives up: /etc/hosts and nsswitch. "localhost" and its
// subdomains still resolve, to 127.0.0.1 and ::1 without a query, as
// RFC 6761 §6.3 asks of resolver libraries.
import { isIP } from 'node:net';
import { Refusal } from '../../shared/errors';
import { DnsServer, formatDnsServer, parseDnsServer } from '../../shared/config';
import { DnsClient } from './dns/client';
import { SystemServers } from './dns/system-servers';

export type HostKind = 'name' | 'ipv4' | 'ipv6';

export interface ResolveOptions {
  dnsServers: readonly DnsServer[]; // empty: the system's servers (/etc/resolv.conf)
  timeoutMs: number; // for the whole resolution, both queries together
  // Where the name came from, for messages that ask to check it; default
  // "the host name in the URL".
  nameSource?: string;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface Resolution {
  // A addresses first, then AAAA, each in answer order, without duplicates.
  // Never empty.
  addresses: ResolvedAddress[];
  // The smallest TTL among the records used (seconds); absent when no query
  // was made. For the audit record only: nothing is cached.
  ttl?: number;
  source: 'literal' | 'localhost' | 'dns';
  // A family whose query failed (timeout, SERVFAIL...) while the other
  // returned addresses; the caller may log it. Absent when both answered.
  unanswered?: { family: 4 | 6; code: string }[];
}

const LOCALHOST: ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

function isLocalhost(name: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, '');
  return n === 'localhost' || n.endsWith('.localhost');
}

// What each resolver outcome means, for the message. "empty" outcomes say
// the name has no record of that type; everything else is a failure.
const EMPTY = new Set(['ENODATA']);
const NXDOMAIN = 'ENOTFOUND';
const URL_HOST = 'the host name in the URL';
const EXPLAIN: Record<string, string> = {
  ENOTFOUND: 'the name does not exist (NXDOMAIN); check {name}',
  ENODATA: 'the name has no A or AAAA records; check {name}',
  ESERVFAIL: "the DNS server reported a failure (SERVFAIL); the name's DNS may be broken, retry later",
  EREFUSED: 'the DNS server refused the query; check http.dns_servers in the config',
  ECONNREFUSED: 'the DNS server could not be reached (connection refused); check http.dns_servers in the config',
  EBADNAME: 'the name is not a valid DNS name; check {name}',
  EFORMERR: 'the DNS server could not parse the query (FORMERR); check http.dns_servers in the config',
  EBADRESP: 'the DNS server sent a malformed answer; check http.dns_servers in the config',
  ENOTIMP: 'the DNS server does not implement the query; check http.dns_servers in the config',
};

function explain(code: string, timeoutMs: number, servers: string, nameSource: string): string {
  if (code === 'ETIMEOUT') {
    return `no answer within ${timeoutMs} ms from ${servers}; check the network and http.dns_servers in the config, then retry`;
  }
  return (
    EXPLAIN[code]?.replace('{name}', () => nameSource) ??
    `the resolver failed (${code}); check the network and http.dns_servers in the config, then retry`
  );
}

function literal(host: string, hostKind: 'ipv4' | 'ipv6'): Resolution {
  const address = hostKind === 'ipv6' ? host.replace(/^\[(.*)\]$/, '$1') : host;
  const family = isIP(address);
  // The URL step validated the literal; a mismatch here is a caller's bug.
  if (family !== (hostKind === 'ipv4' ? 4 : 6) || address.includes('%')) {
    throw new TypeError(`resolve: ${JSON.stringify(host)} is not an ${hostKind} literal`);
  }
  return { addresses: [{ address, family: family as 4 | 6 }], source: 'literal' };
}

// One client for the daemon: its sockets are shared by every request.
const client = new DnsClient();
const systemServers = new SystemServers();

export async function resolveTarget(host: string, hostKind: HostKind, opts: ResolveOptions): Promise<Resolution> {
  if (hostKind !== 'name') return literal(host, hostKind);
  if (isIP(host.replace(/^\[(.*)\]$/, '$1')) !== 0)
    throw new TypeError(`resolve: ${JSON.stringify(host)} is an IP literal, not a name`);
  if (isLocalhost(host)) return { addresses: LOCALHOST.map((a) => ({ ...a })), source: 'localhost' };

  const list = opts.dnsServers.length > 0 ? opts.dnsServers : systemServers.current();
  // Each query gives up at timeoutMs on its own, every server and a TCP
  // retry included (dns/client.ts), so the two together take no longer.
  const [v4, v6] = await Promise.all([
    client.query(list, host, 1, opts.timeoutMs),
    client.query(list, host, 28, opts.timeoutMs),
  ]);

  // NXDOMAIN is about the name, not a type: if either answer says the name
  // does not exist, it is refused even when the other has records (a
  // contradiction only a broken or hostile server produces).
  for (const o of [v4, v6]) {
    if (!o.ok && o.code === NXDOMAIN) throw dnsError(host, NXDOMAIN, opts);
  }

  const seen = new Set<string>();
  const addresses: ResolvedAddress[] = [];
  let ttl: number | undefined;
  const unanswered: { family: 4 | 6; code: string }[] = [];
  for (const [family, o] of [
    [4, v4],
    [6, v6],
  ] as const) {
    if (!o.ok) {
      if (!EMPTY.has(o.code)) unanswered.push({ family, code: o.code });
      continue;
    }
    for (const r of o.records) {
      ttl = ttl === undefined ? r.ttl : Math.min(ttl, r.ttl);
      if (seen.has(r.address)) continue;
      seen.add(r.address);
      addresses.push({ address: r.address, family });
    }
  }

  if (addresses.length === 0) {
    // Both empty: no records. Otherwise report the first real failure.
    const failure = unanswered[0];
    throw dnsError(host, failure ? failure.code : 'ENODATA', opts);
  }
  // One family failing while the other answered is accepted: only the
  // addresses returned are ever connected to, and each is classified, so an
  // unanswered family cannot widen what the request reaches.
  const result: Resolution = { addresses, source: 'dns' };
  if (ttl !== undefined) result.ttl = ttl;
  if (unanswered.length > 0) result.unanswered = unanswered;
  return result;
}

// Which servers were asked, for the message (built only for a refusal).
function serversAsked(opts: ResolveOptions): string {
  return opts.dnsServers.length > 0
    ? `DNS server ${opts.dnsServers.map(formatDnsServer).join(', ')}`
    : "the system's DNS servers (/etc/resolv.conf)";
}

function dnsError(host: string, code: string, opts: ResolveOptions): Refusal {
  const why = explain(code, opts.timeoutMs, serversAsked(opts), opts.nameSource ?? URL_HOST);
  return new Refusal('dns_error', `could not resolve ${host}: ${why}`, {
    host,
    dns_code: code,
  });
}

// The config holds them validated and normalised ("ip:port").
export function dnsServers(list: readonly string[]): DnsServer[] {
  return list.map((text) => {
    const r = parseDnsServer(text);
    if (!r.ok) throw new Refusal('bad_config', `http.dns_servers: ${text} is not usable`);
    return r.value;
  });
}
