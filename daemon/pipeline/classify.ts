// Address classification (SPEC §6.2): every address a request may connect to
// is judged against one TABLE of ranges, each with a reason code, before any
// connection is made. An address outside every row is public. A blocked row
// can be opened by the credential's `allow_addresses`, except the rows no
// credential can open: all of link-local (clouds put metadata services there
// at many addresses, and new ones appear), NAT64 local-use (it can embed any
// IPv4 address, at positions no one fixed), and the metadata services that
// live elsewhere.
//
// IPv6 forms that embed an IPv4 address (mapped, compatible, translated,
// NAT64, 6to4, Teredo, ISATAP) are judged as the IPv4 address they embed, by
// the same rows and the same `allow_addresses` (its IPv4 entries), so that no
// spelling of an address reaches what its plain IPv4 form cannot.
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Refusal } from '../../shared/errors';

export type BlockReason =
  | 'unspecified'
  | 'this_network'
  | 'loopback'
  | 'private'
  | 'cgnat'
  | 'link_local'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'benchmarking'
  | 'documentation'
  | 'ietf_protocol'
  | 'unique_local'
  | 'site_local'
  | 'nat64_local'
  | 'discard'
  | 'not_global_unicast'
  | 'metadata';

export interface AddressRow {
  cidr: string;
  reason: BlockReason;
  overridable: boolean; // false: blocked even when allow_addresses covers it
  note: string; // where the range comes from, shown in the refusal message
}

const row = (cidr: string, reason: BlockReason, note: string): AddressRow => ({
  cidr,
  reason,
  overridable: true,
  note,
});
const always = (cidr: string, reason: BlockReason, note: string): AddressRow => ({
  cidr,
  reason,
  overridable: false,
  note,
});
const metadata = (cidr: string, note: string): AddressRow => always(cidr, 'metadata', note);

// The most specific row containing an address decides (longest prefix), so
// a metadata /32 inside link-local is judged as metadata, whatever the order.
export const ADDRESS_TABLE: readonly AddressRow[] = [
  // ---- IPv4 (RFC 6890 special-purpose registry, plus cloud metadata)
  row('0.0.0.0/8', 'this_network', 'RFC 791'),
  row('0.0.0.0/32', 'unspecified', 'RFC 1122'),
  row('10.0.0.0/8', 'private', 'RFC 1918'),
  row('100.64.0.0/10', 'cgnat', 'shared address space, RFC 6598'),
  row('127.0.0.0/8', 'loopback', 'RFC 1122'),
  always('169.254.0.0/16', 'link_local', 'RFC 3927'),
  row('172.16.0.0/12', 'private', 'RFC 1918'),
  row('192.0.0.0/24', 'ietf_protocol', 'RFC 6890'),
  row('192.0.2.0/24', 'documentation', 'TEST-NET-1, RFC 5737'),
  row('192.168.0.0/16', 'private', 'RFC 1918'),
  row('198.18.0.0/15', 'benchmarking', 'RFC 2544'),
  row('198.51.100.0/24', 'documentation', 'TEST-NET-2, RFC 5737'),
  row('203.0.113.0/24', 'documentation', 'TEST-NET-3, RFC 5737'),
  row('224.0.0.0/4', 'multicast', 'RFC 5771'),
  row('240.0.0.0/4', 'reserved', 'reserved for future use, RFC 1112'),
  row('255.255.255.255/32', 'broadcast', 'limited broadcast, RFC 919'),
  metadata('169.254.169.254/32', 'instance metadata of AWS, GCP, Azure, OpenStack and others'),
  metadata('169.254.170.2/32', 'AWS ECS task metadata and credentials'),
  // Extra: the EKS Pod Identity agent hands out AWS credentials here.
  metadata('169.254.170.23/32', 'AWS EKS Pod Identity credentials'),
  // Inside link-local, so blocked anyway; named so a refusal says what they are.
  metadata('169.254.0.23/32', 'Tencent Cloud instance metadata'),
  metadata('169.254.42.42/32', 'Scaleway instance metadata'),
  metadata('100.100.100.200/32', 'Alibaba Cloud instance metadata'),
  // Extra: Oracle Cloud's legacy metadata address (inside 192.0.0.0/24).
  metadata('192.0.0.192/32', 'Oracle Cloud instance metadata'),
  // Extra: Azure's WireServer, a public-looking address that only exists
  // inside Azure and serves the host agent (certificates, extensions).
  metadata('168.63.129.16/32', 'Azure WireServer'),

  // ---- IPv6 (RFC 6890 / IANA special-purpose registry, plus metadata).
  // The embedding prefixes (::ffff:0:0/96, ::/96, ::ffff:0:0:0/96,
  // 64:ff9b::/96, 2002::/16, 2001::/32) never reach this table: their
  // addresses are judged as the embedded IPv4 (IPV4_EMBEDDINGS below).
  row('::/128', 'unspecified', 'RFC 4291'),
  row('::1/128', 'loopback', 'RFC 4291'),
  always('64:ff9b:1::/48', 'nat64_local', 'RFC 8215'),
  // Extra: a black-hole prefix; nothing answers there.
  row('100::/64', 'discard', 'discard-only, RFC 6666'),
  // Extra: the IPv6 analogue of 192.0.0.0/24, blocked whole as the SPEC
  // blocks the IPv4 one (Teredo, inside it, is judged by its client).
  row('2001::/23', 'ietf_protocol', 'RFC 2928'),
  row('2001:2::/48', 'benchmarking', 'RFC 5180'),
  row('2001:db8::/32', 'documentation', 'RFC 3849'),
  row('3fff::/20', 'documentation', 'RFC 9637'),
  // Extra: segment identifiers, never a host on the internet.
  row('5f00::/16', 'reserved', 'SRv6 SIDs, RFC 9602'),
  row('fc00::/7', 'unique_local', 'RFC 4193'),
  always('fe80::/10', 'link_local', 'RFC 4291'),
  row('fec0::/10', 'site_local', 'deprecated, RFC 3879'),
  row('ff00::/8', 'multicast', 'RFC 4291'),
  metadata('fd00:ec2::254/128', 'AWS instance metadata over IPv6'),
  metadata('fd00:ec2::23/128', 'AWS EKS Pod Identity credentials over IPv6'),
  metadata('fd20:ce::254/128', 'Google Cloud instance metadata over IPv6'),
  // Extra: all of IPv6 outside 2000::/3 is unallocated for global unicast
  // (IANA IPv6 address space); no public host lives there, so these rows
  // block it whole. Together with the rows above they cover every address
  // outside 2000::/3.
  ...[
    '::/8',
    '100::/8',
    '200::/7',
    '400::/6',
    '800::/5',
    '1000::/4',
    '4000::/3',
    '6000::/3',
    '8000::/3',
    'a000::/3',
    'c000::/3',
    'e000::/4',
    'f000::/5',
    'f800::/6',
    'fe00::/9',
  ].map((cidr) => row(cidr, 'not_global_unicast', 'IANA allocates only 2000::/3 for global unicast')),
];

// How each reason reads in a message: "address X is <label> (...)".
const LABEL: Record<BlockReason, string> = {
  unspecified: 'the unspecified address',
  this_network: 'in "this network"',
  loopback: 'loopback',
  private: 'private',
  cgnat: 'carrier-grade NAT space',
  link_local: 'link-local',
  multicast: 'multicast',
  broadcast: 'the broadcast address',
  reserved: 'reserved',
  benchmarking: 'reserved for benchmarking',
  documentation: 'reserved for documentation',
  ietf_protocol: 'an IETF protocol assignment',
  unique_local: 'unique local (IPv6 ULA)',
  site_local: 'site-local',
  nat64_local: 'in the NAT64 local-use prefix',
  discard: 'discard-only',
  not_global_unicast: 'not global unicast',
  metadata: 'a cloud metadata endpoint',
};

// ---------------------------------------------------------------- embeddings

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

const NOT_COMPATIBLE = ipaddr.parseCIDR('::/127');

function lastV4(v6: IPv6): IPv4 {
  const p = v6.parts;
  return ipaddr.fromByteArray([p[6]! >> 8, p[6]! & 0xff, p[7]! >> 8, p[7]! & 0xff]) as IPv4;
}

export interface Ipv4Embedding {
  name: string;
  // The prefix that marks the form; null for ISATAP, marked by its
  // interface identifier under any prefix.
  cidr: string | null;
  test?: (v6: IPv6) => boolean;
  extract: (v6: IPv6) => IPv4;
}

// Every IPv6 form that carries an IPv4 address. The prefix forms are
// disjoint; ISATAP can combine with one of them (6to4 or Teredo prefix plus
// an ISATAP interface id), and then both embedded addresses are judged.
export const IPV4_EMBEDDINGS: readonly Ipv4Embedding[] = [
  { name: 'IPv4-mapped', cidr: '::ffff:0:0/96', extract: lastV4 },
  { name: 'IPv4-translated', cidr: '::ffff:0:0:0/96', extract: lastV4 },
  // :: and ::1 are the IPv6 unspecified and loopback addresses, not
  // compatible forms of 0.0.0.0 and 0.0.0.1.
  { name: 'IPv4-compatible', cidr: '::/96', test: (v6) => !v6.match(NOT_COMPATIBLE), extract: lastV4 },
  { name: 'NAT64', cidr: '64:ff9b::/96', extract: lastV4 },
  {
    name: '6to4',
    cidr: '2002::/16',
    extract: (v6) => {
      const p = v6.parts;
      return ipaddr.fromByteArray([p[1]! >> 8, p[1]! & 0xff, p[2]! >> 8, p[2]! & 0xff]) as IPv4;
    },
  },
  {
    // The client address is stored inverted ("obfuscated", RFC 4380 §4).
    name: 'Teredo',
    cidr: '2001::/32',
    extract: (v6) => ipaddr.fromByteArray(lastV4(v6).octets.map((o) => o ^ 0xff)) as IPv4,
  },
  {
    // Interface id 0000:5efe:a.b.c.d or 0200:5efe:a.b.c.d (RFC 5214 §6.1).
    name: 'ISATAP',
    cidr: null,
    test: (v6) => (v6.parts[4] === 0x0000 || v6.parts[4] === 0x0200) && v6.parts[5] === 0x5efe,
    extract: lastV4,
  },
];

// ---------------------------------------------------------------- parsing

type Parsed = IPv4 | IPv6;
type Range = [Parsed, number];

function parseAddress(address: string): Parsed {
  // Node's isIP is inet_pton-strict (no "127.1", "0x7f.0.0.1" or leading
  // zeros, which ipaddr.js would accept); zone ids are not addresses.
  const family = isIP(address);
  if (family === 0 || address.includes('%'))
    throw new TypeError(`classify: not an IP address: ${JSON.stringify(address)}`);
  // ipaddr.js reads "::a.b.c.d" as IPv4-mapped; RFC 4291 says compatible.
  const compat = /^::(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  return ipaddr.parse(compat ? `::0:${compat[1]}` : address);
}

function show(a: Parsed): string {
  return a.kind() === 'ipv4' ? a.toString() : (a as IPv6).toRFC5952String();
}

const TABLE = ADDRESS_TABLE.map((r) => ({ row: r, range: ipaddr.parseCIDR(r.cidr) as Range }));
const EMBEDDINGS = IPV4_EMBEDDINGS.map((e) => ({
  e,
  range: e.cidr === null ? null : (ipaddr.parseCIDR(e.cidr) as Range),
}));

function inRange(a: Parsed, range: Range): boolean {
  return a.kind() === range[0].kind() && a.match(range);
}

// Allow entries as ranges; an IPv4-mapped entry is its IPv4 range (what
// the credential schema stores anyway), so it covers the IPv4 judgement.
// Parsed once per list: a credential's list is the same array request after
// request, and ipaddr.js's parseCIDR throws and catches on every IPv4 entry.
// The text is compared too, so a list changed in place is parsed again.
const parsedAllow = new WeakMap<readonly string[], { text: string; ranges: Range[] }>();

function parseAllow(allow: readonly string[]): Range[] {
  const text = allow.join(' ');
  const known = parsedAllow.get(allow);
  if (known && known.text === text) return known.ranges;
  const ranges = parseAllowList(allow);
  parsedAllow.set(allow, { text, ranges });
  return ranges;
}

function parseAllowList(allow: readonly string[]): Range[] {
  return allow.map((cidr) => {
    const [addr, bits] = ipaddr.parseCIDR(cidr);
    if (addr.kind() === 'ipv6' && (addr as IPv6).isIPv4MappedAddress() && bits >= 96) {
      return [(addr as IPv6).toIPv4Address(), bits - 96] as Range;
    }
    return [addr, bits] as Range;
  });
}

// ---------------------------------------------------------------- verdicts

export type AllowedVerdict = { allowed: true; reason: 'public' | 'allowed_by_credential'; judgedAs: string };
export type BlockedVerdict = { allowed: false; reason: BlockReason; range: string; judgedAs: string; message: string };
export type Verdict = AllowedVerdict | BlockedVerdict;

// What an address is judged as: itself, or the IPv4 address(es) it embeds.
interface View {
  addr: Parsed;
  via: string | null; // the embedding's name
}

function viewsOf(a: Parsed): View[] {
  if (a.kind() === 'ipv4') return [{ addr: a, via: null }];
  const v6 = a as IPv6;
  const views: View[] = [];
  for (const { e, range } of EMBEDDINGS) {
    if (range && !v6.match(range)) continue;
    if (e.test && !e.test(v6)) continue;
    views.push({ addr: e.extract(v6), via: e.name });
  }
  // Without an embedding prefix the IPv6 address is judged itself too: an
  // ISATAP id under fe80::/10 is link-local whatever IPv4 it names.
  const prefixForm = views.some((v) => v.via !== 'ISATAP');
  if (!prefixForm) views.unshift({ addr: v6, via: null });
  return views;
}

function mostSpecificRow(a: Parsed): { row: AddressRow; range: Range } | undefined {
  let best: { row: AddressRow; range: Range } | undefined;
  for (const t of TABLE) {
    if (inRange(a, t.range) && (!best || t.range[1] > best.range[1])) best = t;
  }
  return best;
}

function blockedMessage(input: string, view: View, row: AddressRow): string {
  const judged = show(view.addr);
  const subject = view.via ? `address ${input} (${view.via}, judged as ${judged})` : `address ${input}`;
  const what = `${subject} is ${LABEL[row.reason]} (${row.note}, ${row.cidr})`;
  return row.overridable
    ? `${what}; a credential may reach it only if allow_addresses covers ${view.via ? judged : 'it'}`
    : `${what}; it is blocked for every credential, even when allow_addresses covers it`;
}

// Judges one address. Throws TypeError on a string that is not an IP
// address (the caller passes resolver output or a validated literal); so
// does a malformed allow_addresses entry (validated when the credential was
// defined).
export function classifyAddress(address: string, allowAddresses: readonly string[]): Verdict {
  const a = parseAddress(address);
  const allow = parseAllow(allowAddresses);
  let byCredential = false;
  const views = viewsOf(a);
  for (const view of views) {
    const hit = mostSpecificRow(view.addr);
    if (!hit) continue;
    if (hit.row.overridable && allow.some((r) => inRange(view.addr, r))) {
      byCredential = true;
      continue;
    }
    return {
      allowed: false,
      reason: hit.row.reason,
      range: hit.row.cidr,
      judgedAs: show(view.addr),
      message: blockedMessage(address, view, hit.row),
    };
  }
  // judgedAs: the embedded IPv4 when there is one, else the address itself.
  const primary = views.find((v) => v.via !== null) ?? views[0]!;
  return { allowed: true, reason: byCredential ? 'allowed_by_credential' : 'public', judgedAs: show(primary.addr) };
}

export type ClassifiedAll =
  | { allowed: true; verdicts: AllowedVerdict[] }
  | { allowed: false; blocked: BlockedVerdict & { address: string }; verdicts: Verdict[] };

// Judges every address (none is skipped because an earlier one failed).
export function classifyAll(addresses: readonly string[], allowAddresses: readonly string[]): ClassifiedAll {
  const verdicts = addresses.map((a) => classifyAddress(a, allowAddresses));
  const i = verdicts.findIndex((v) => !v.allowed);
  if (i < 0) return { allowed: true, verdicts: verdicts as AllowedVerdict[] };
  return { allowed: false, blocked: { ...(verdicts[i] as BlockedVerdict), address: addresses[i]! }, verdicts };
}

const SHOWN_ADDRESSES = 8;

// The request step: refuses with denied_address when any address is
// blocked, naming the first blocked address and its range. An empty list
// is a bug in the caller (resolution never yields one): fail closed.
export function assertAllAllowed(
  host: string,
  addresses: readonly string[],
  allowAddresses: readonly string[],
): AllowedVerdict[] {
  if (addresses.length === 0) throw new Error(`classify: no addresses to check for ${host}`);
  const result = classifyAll(addresses, allowAddresses);
  if (result.allowed) return result.verdicts;
  const { blocked } = result;
  const count = result.verdicts.filter((v) => !v.allowed).length;
  const literal = isIP(host.replace(/^\[(.*)\]$/, '$1')) !== 0;
  const shown = addresses.slice(0, SHOWN_ADDRESSES).join(', ') + (addresses.length > SHOWN_ADDRESSES ? ', ...' : '');
  const others = count > 1 ? ` (${count} of its ${addresses.length} addresses are blocked)` : '';
  const lead = literal ? '' : `${host} resolves to ${shown}${others}, and every address must be allowed: `;
  throw new Refusal('denied_address', lead + blocked.message, {
    host,
    address: blocked.address,
    judged_as: blocked.judgedAs,
    range: blocked.range,
    reason: blocked.reason,
  });
}
