// One DNS resolution per request (SPEC §6.2): at most one A and one AAAA
// query, sent together, and every address they return handed back for
// classification. The caller connects only to an address it checked, so
// nothing is filtered or cached here: each request resolves afresh.
//
// The system resolver is c-ares with the servers of /etc/resolv.conf, not
// getaddrinfo (dns.lookup), because:
// - getaddrinfo cannot promise "at most one A and one AAAA query": glibc
//   retries (`attempts`) and, after NXDOMAIN, walks the search domains, so
//   "api.example.com" may come back as "api.example.com.corp.lan";
// - it cannot be cancelled and blocks a libuv pool thread for its whole
//   timeout (up to tens of seconds with a dead server); four of them stall
//   every file write of the daemon, the audit journal included;
// - with c-ares the system path and the `dns_servers` path are one code
//   path, so what the tests exercise through a test server is what runs.
// What this gives up: /etc/hosts and nsswitch. "localhost" and its
// subdomains still resolve, to 127.0.0.1 and ::1 without a query, as
// RFC 6761 §6.3 asks of resolver libraries.
import { promises as dns, RecordWithTtl } from 'node:dns';
import { isIP } from 'node:net';
import { Refusal } from '../../shared/errors';
import { DnsServer, formatDnsServer, parseDnsServer } from '../../shared/config';

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

type Outcome = { ok: true; records: RecordWithTtl[] } | { ok: false; code: string };

async function query(run: () => Promise<RecordWithTtl[]>): Promise<Outcome> {
  try {
    return { ok: true, records: await run() };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
    return { ok: false, code: code === 'ECANCELLED' ? 'ETIMEOUT' : code };
  }
}

// One c-ares channel per (servers, timeout), shared by the requests using
// it: making a channel reads /etc/resolv.conf and opens sockets, which cost
// more than the queries. Node's c-ares keeps no answer cache (each request
// still sends its own A and AAAA query: the tests count them). tries: 1:
// one query per type. With several servers listed, c-ares asks the next one
// only when a server cannot be reached (connection refused); a SERVFAIL or
// REFUSED answer is final, and a silent server uses up the timeout.
const resolvers = new Map<string, dns.Resolver>();

function resolverFor(opts: ResolveOptions): dns.Resolver {
  const id = `${opts.timeoutMs}|${opts.dnsServers.map(formatDnsServer).join(',')}`;
  let r = resolvers.get(id);
  if (!r) {
    if (resolvers.size >= 8) resolvers.clear();
    r = new dns.Resolver({ timeout: opts.timeoutMs, tries: 1 });
    if (opts.dnsServers.length > 0) r.setServers(opts.dnsServers.map(formatDnsServer));
    resolvers.set(id, r);
  }
  return r;
}

export async function resolveTarget(host: string, hostKind: HostKind, opts: ResolveOptions): Promise<Resolution> {
  if (hostKind !== 'name') return literal(host, hostKind);
  if (isIP(host.replace(/^\[(.*)\]$/, '$1')) !== 0)
    throw new TypeError(`resolve: ${JSON.stringify(host)} is an IP literal, not a name`);
  if (isLocalhost(host)) return { addresses: LOCALHOST.map((a) => ({ ...a })), source: 'localhost' };

  const resolver = resolverFor(opts);
  const servers =
    opts.dnsServers.length > 0
      ? `DNS server ${opts.dnsServers.map(formatDnsServer).join(', ')}`
      : "the system's DNS servers (/etc/resolv.conf)";

  // c-ares gives each listed server the full timeout in turn and rounds
  // short timeouts up (to ~250 ms here); this bounds the whole resolution
  // to timeoutMs. A query still running then is left to c-ares's own
  // timeout; its late answer is dropped.
  let guard: NodeJS.Timeout | undefined;
  const late = new Promise<Outcome>((resolve) => {
    guard = setTimeout(() => resolve({ ok: false, code: 'ETIMEOUT' }), opts.timeoutMs);
  });
  let v4: Outcome;
  let v6: Outcome;
  try {
    [v4, v6] = await Promise.all([
      Promise.race([query(() => resolver.resolve4(host, { ttl: true })), late]),
      Promise.race([query(() => resolver.resolve6(host, { ttl: true })), late]),
    ]);
  } finally {
    clearTimeout(guard);
  }

  // NXDOMAIN is about the name, not a type: if either answer says the name
  // does not exist, it is refused even when the other has records (a
  // contradiction only a broken or hostile server produces).
  for (const o of [v4, v6]) {
    if (!o.ok && o.code === NXDOMAIN)
      throw dnsError(host, NXDOMAIN, opts.timeoutMs, servers, opts.nameSource ?? URL_HOST);
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
    throw dnsError(host, failure ? failure.code : 'ENODATA', opts.timeoutMs, servers, opts.nameSource ?? URL_HOST);
  }
  // One family failing while the other answered is accepted: only the
  // addresses returned are ever connected to, and each is classified, so an
  // unanswered family cannot widen what the request reaches.
  const result: Resolution = { addresses, source: 'dns' };
  if (ttl !== undefined) result.ttl = ttl;
  if (unanswered.length > 0) result.unanswered = unanswered;
  return result;
}

function dnsError(host: string, code: string, timeoutMs: number, servers: string, nameSource: string): Refusal {
  return new Refusal('dns_error', `could not resolve ${host}: ${explain(code, timeoutMs, servers, nameSource)}`, {
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
