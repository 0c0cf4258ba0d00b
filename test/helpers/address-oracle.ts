// An independent oracle for SPEC §6.2 address classification, written from
// the IANA IPv4 and IPv6 Special-Purpose Address Registries (and the IPv6
// Address Space registry: only 2000::/3 is allocated for global unicast),
// plus the SPEC's own list. It does not read postern's table.
//
// verdict(address, allow) answers what SPEC §6.2 requires:
//   'must_block'  : non-global (or always-blocked) and not opened by allow
//   'may_block'   : global per the embedded IPv4 / IANA, but refusing is a
//                   documented strictness (IETF 192.0.0/24, outside
//                   2000::/3, 2001::/23 ...) or an ambiguous registry entry
//   'must_allow'  : global per every source, or opened by allow
// Also a seeded PRNG and generators biased toward range edges.
import type { Test } from 'tap';
import { mulberry32 } from './prng';

export type V4 = number; // 0 .. 2^32-1
export type V6 = bigint; // 0 .. 2^128-1

export interface Range {
  net: bigint; // for IPv4: the 32-bit value as bigint
  len: number;
  v6: boolean;
  name: string;
}

// ---------- parsing and formatting (own code) ----------

export function v4ToString(x: V4): string {
  return [x >>> 24, (x >>> 16) & 255, (x >>> 8) & 255, x & 255].join('.');
}

export function parseV4(s: string): V4 {
  const p = s.split('.');
  if (p.length !== 4) throw new Error(`bad v4 ${s}`);
  let x = 0;
  for (const o of p) {
    const n = Number(o);
    if (!/^\d{1,3}$/.test(o) || n > 255) throw new Error(`bad v4 ${s}`);
    x = x * 256 + n;
  }
  return x;
}

export function parseV6(s: string): V6 {
  let text = s;
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const v4 = parseV4(text.slice(lastColon + 1));
    tail = [v4 >>> 16, v4 & 0xffff];
    text = text.slice(0, lastColon + 1) + (text.endsWith('::') ? '' : '') + '0:0';
    // replaced the IPv4 tail by two placeholder groups, filled below
  }
  const halves = text.split('::');
  if (halves.length > 2) throw new Error(`bad v6 ${s}`);
  const groups = (h: string): number[] => (h === '' ? [] : h.split(':').map((g) => parseInt(g, 16)));
  let all: number[];
  if (halves.length === 2) {
    const a = groups(halves[0]!);
    const b = groups(halves[1]!);
    all = [...a, ...Array(8 - a.length - b.length).fill(0), ...b];
  } else all = groups(halves[0]!);
  if (all.length !== 8) throw new Error(`bad v6 ${s}`);
  if (tail.length) {
    all[6] = tail[0]!;
    all[7] = tail[1]!;
  }
  let x = 0n;
  for (const g of all) x = (x << 16n) | BigInt(g);
  return x;
}

export function v6Groups(x: V6): number[] {
  const g: number[] = [];
  for (let i = 7; i >= 0; i--) g.push(Number((x >> BigInt(i * 16)) & 0xffffn));
  return g;
}

// RFC 5952 text: lower case, longest run (>=2) of zero groups compressed.
export function v6ToString(x: V6): string {
  const g = v6Groups(x);
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((n) => n.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

function r4(cidr: string, name: string): Range {
  const [a, l] = cidr.split('/');
  return { net: BigInt(parseV4(a!)), len: Number(l), v6: false, name };
}
function r6(cidr: string, name: string): Range {
  const [a, l] = cidr.split('/');
  return { net: parseV6(a!), len: Number(l), v6: true, name };
}

export function inRange(x: bigint, v6: boolean, r: Range): boolean {
  if (r.v6 !== v6) return false;
  const bits = v6 ? 128 : 32;
  const shift = BigInt(bits - r.len);
  return x >> shift === r.net >> shift;
}

export function rangeFirst(r: Range): bigint {
  const bits = r.v6 ? 128 : 32;
  const shift = BigInt(bits - r.len);
  return (r.net >> shift) << shift;
}
export function rangeLast(r: Range): bigint {
  const bits = r.v6 ? 128 : 32;
  return rangeFirst(r) | ((1n << BigInt(bits - r.len)) - 1n);
}

// ---------- the registries ----------

// IPv4: not globally reachable (IANA "Globally Reachable = False"), plus
// multicast and broadcast, plus the SPEC's extra IPv4 blocks.
export const V4_NON_GLOBAL: Range[] = [
  r4('0.0.0.0/8', 'this network (RFC 791)'),
  r4('10.0.0.0/8', 'private (RFC 1918)'),
  r4('100.64.0.0/10', 'shared address space (RFC 6598)'),
  r4('127.0.0.0/8', 'loopback'),
  r4('169.254.0.0/16', 'link local'),
  r4('172.16.0.0/12', 'private (RFC 1918)'),
  r4('192.0.0.0/24', 'IETF protocol assignments'),
  r4('192.0.2.0/24', 'TEST-NET-1'),
  r4('192.168.0.0/16', 'private (RFC 1918)'),
  r4('198.18.0.0/15', 'benchmarking'),
  r4('198.51.100.0/24', 'TEST-NET-2'),
  r4('203.0.113.0/24', 'TEST-NET-3'),
  r4('224.0.0.0/4', 'multicast'),
  r4('240.0.0.0/4', 'reserved'),
  r4('255.255.255.255/32', 'limited broadcast'),
];
// Within the blocks above, IANA marks these globally reachable: refusing
// them is the SPEC's choice (192.0.0/24 whole), so "may block".
export const V4_IANA_GLOBAL_EXCEPTIONS: Range[] = [
  r4('192.0.0.9/32', 'Port Control Protocol anycast'),
  r4('192.0.0.10/32', 'TURN anycast'),
  // design-notes.md: refused as a metadata address whatever allow says.
  r4('192.0.0.192/32', 'metadata (documented)'),
];
// Registry entries that are globally reachable (or N/A): either answer is
// acceptable.
export const V4_AMBIGUOUS: Range[] = [
  r4('192.31.196.0/24', 'AS112-v4'),
  r4('192.52.193.0/24', 'AMT'),
  r4('192.88.99.0/24', 'deprecated 6to4 relay anycast'),
  r4('192.175.48.0/24', 'AS112 direct delegation'),
];
// Blocked whatever allow_addresses says (SPEC §6.2).
export const V4_ALWAYS: Range[] = [
  r4('169.254.0.0/16', 'link local'),
  r4('100.100.100.200/32', 'Alibaba metadata'),
  r4('168.63.129.16/32', 'Azure platform'),
];

export const V6_NON_GLOBAL: Range[] = [
  r6('::/128', 'unspecified'),
  r6('::1/128', 'loopback'),
  r6('100::/64', 'discard-only'),
  r6('100:0:0:1::/64', 'dummy prefix (RFC 9780)'),
  r6('64:ff9b:1::/48', 'local-use NAT64'),
  r6('2001::/23', 'IETF protocol assignments'),
  r6('2001:2::/48', 'benchmarking'),
  r6('2001:db8::/32', 'documentation'),
  r6('2001:10::/28', 'deprecated ORCHID'),
  r6('3fff::/20', 'documentation'),
  r6('5f00::/16', 'SRv6 SIDs'),
  r6('fc00::/7', 'unique local'),
  r6('fe80::/10', 'link local'),
  r6('fec0::/10', 'site local (deprecated)'),
  r6('ff00::/8', 'multicast'),
];
// IANA: globally reachable inside 2001::/23; refusing is the design's
// documented choice (2001::/23 whole): "may block".
export const V6_IANA_GLOBAL_EXCEPTIONS: Range[] = [
  r6('2001:1::1/128', 'PCP anycast'),
  r6('2001:1::2/128', 'TURN anycast'),
  r6('2001:1::3/128', 'DNS-SD SRP anycast'),
  r6('2001:3::/32', 'AMT'),
  r6('2001:4:112::/48', 'AS112-v6'),
  r6('2001:20::/28', 'ORCHIDv2'),
  r6('2001:30::/28', 'drone remote ID'),
];
export const V6_AMBIGUOUS: Range[] = [r6('2620:4f:8000::/48', 'AS112 direct delegation')];
export const V6_ALWAYS: Range[] = [
  r6('fe80::/10', 'link local'),
  r6('64:ff9b:1::/48', 'local-use NAT64'),
  r6('fd00:ec2::254/128', 'AWS metadata'),
  r6('fd00:ec2::23/128', 'AWS metadata'),
  r6('fd20:ce::254/128', 'Google Cloud metadata'),
];
export const GLOBAL_UNICAST = r6('2000::/3', 'global unicast');

// Every IPv6 form that embeds an IPv4 address, with the embedded address.
export function embeddedV4(x: V6): { form: string; v4: V4 } | null {
  const low32 = Number(x & 0xffffffffn);
  const hi96 = x >> 32n;
  if (hi96 === 0xffffn) return { form: 'mapped ::ffff:0:0/96', v4: low32 };
  if (hi96 === 0xffff0000n) return { form: 'translated ::ffff:0:0:0/96', v4: low32 };
  if (hi96 === 0n && low32 > 1) return { form: 'compatible ::/96', v4: low32 };
  if (hi96 === parseV6('64:ff9b::') >> 32n) return { form: 'NAT64 64:ff9b::/96', v4: low32 };
  if (x >> 112n === 0x2002n) return { form: '6to4 2002::/16', v4: Number((x >> 80n) & 0xffffffffn) };
  if (x >> 96n === 0x20010000n) return { form: 'Teredo 2001::/32', v4: ~low32 >>> 0 };
  const iid = Number((x >> 32n) & 0xffffffffn);
  // ISATAP (RFC 5214): interface id 0000:5efe or 0200:5efe (u/l bit), as
  // Linux's ipv6_addr_is_isatap() reads it (the group bit is not ISATAP).
  if ((iid | 0x02000000) >>> 0 === 0x02005efe) return { form: 'ISATAP ::5efe:0:0/96 iid', v4: low32 };
  return null;
}

export type Verdict = 'must_block' | 'may_block' | 'must_allow';

export interface Allow {
  v4: Range[];
  v6: Range[];
}

export function parseAllow(list: readonly string[]): Allow {
  const a: Allow = { v4: [], v6: [] };
  for (const c of list) {
    if (!c.includes(':')) {
      a.v4.push(r4(c, 'allow'));
      continue;
    }
    const r = r6(c, 'allow');
    // Documented (shared/credential/fields.ts checkCidr): an IPv4-mapped
    // range ::ffff:a.b.c.d/96+n is the IPv4 range it maps.
    if (r.len >= 96 && r.net >> 32n === 0xffffn) {
      a.v4.push({ net: r.net & 0xffffffffn, len: r.len - 96, v6: false, name: 'allow (mapped)' });
    } else a.v6.push(r);
  }
  return a;
}

const hit = (x: bigint, v6: boolean, rs: Range[]): Range | undefined => rs.find((r) => inRange(x, v6, r));

export interface OracleAnswer {
  verdict: Verdict;
  why: string;
}

export function judgeV4(v: V4, allow: Allow): OracleAnswer {
  const x = BigInt(v);
  const always = hit(x, false, V4_ALWAYS);
  if (always) return { verdict: 'must_block', why: `always: ${always.name}` };
  const ng = hit(x, false, V4_NON_GLOBAL);
  const opened = hit(x, false, allow.v4);
  if (ng) {
    if (opened && x === BigInt(parseV4('192.0.0.192'))) return { verdict: 'may_block', why: 'documented metadata' };
    if (opened) return { verdict: 'must_allow', why: `${ng.name}, opened by allow` };
    if (hit(x, false, V4_IANA_GLOBAL_EXCEPTIONS)) return { verdict: 'may_block', why: `IANA-global in ${ng.name}` };
    return { verdict: 'must_block', why: ng.name };
  }
  const amb = hit(x, false, V4_AMBIGUOUS);
  if (amb && !opened) return { verdict: 'may_block', why: amb.name };
  return { verdict: 'must_allow', why: opened ? 'opened by allow' : 'global' };
}

export function judge(address: string, allowList: readonly string[]): OracleAnswer {
  const allow = parseAllow(allowList);
  if (!address.includes(':')) return judgeV4(parseV4(address), allow);
  const x = parseV6(address);
  const always = hit(x, true, V6_ALWAYS);
  if (always) return { verdict: 'must_block', why: `always: ${always.name}` };
  const emb = embeddedV4(x);
  if (emb) {
    const inner = judgeV4(emb.v4, allow);
    const why = `${emb.form} of ${v4ToString(emb.v4)}: ${inner.why}`;
    // ISATAP is an interface id under any prefix: the prefix is judged too
    // (an ISATAP id under a ULA prefix still reaches a private host).
    if (emb.form.startsWith('ISATAP')) {
      const outer = judgeContainer(x, allow);
      if (outer.verdict === 'must_block') return { verdict: 'must_block', why: `${outer.why}; ${why}` };
    }
    // SPEC §6.2: judged exactly as the IPv4 address it embeds (so an IPv4
    // allow entry covers it, and a global one is reachable in any form).
    return { verdict: inner.verdict, why };
  }
  return judgeContainer(x, allow);
}

function judgeContainer(x: V6, allow: Allow): OracleAnswer {
  const ng = hit(x, true, V6_NON_GLOBAL);
  const opened = hit(x, true, allow.v6);
  if (ng) {
    if (opened) return { verdict: 'must_allow', why: `${ng.name}, opened by allow` };
    if (hit(x, true, V6_IANA_GLOBAL_EXCEPTIONS)) return { verdict: 'may_block', why: `IANA-global in ${ng.name}` };
    return { verdict: 'must_block', why: ng.name };
  }
  if (!inRange(x, true, GLOBAL_UNICAST)) {
    if (opened) return { verdict: 'must_allow', why: 'unallocated, opened by allow' };
    return { verdict: 'must_block', why: 'unallocated (outside 2000::/3)' };
  }
  if (hit(x, true, V6_AMBIGUOUS) && !opened) return { verdict: 'may_block', why: 'AS112' };
  return { verdict: 'must_allow', why: opened ? 'opened by allow' : 'global' };
}

// ---------- seeded PRNG and generators ----------

// The generators' seed: FUZZ_SEED (a number, or `clock` for a new one each
// run), by default a fixed one so that `make test` is repeatable. Every
// failure names the seed, so a run with a new seed that fails replays.
export function fuzzSeed(): number {
  const v = process.env['FUZZ_SEED'];
  if (v === 'clock') return Date.now() % 2 ** 31;
  return v !== undefined && /^[0-9]{1,10}$/.test(v) ? Number(v) : 20261206;
}

export const prng = mulberry32;

export class Gen {
  constructor(public rnd: () => number) {}
  int(n: number): number {
    return Math.floor(this.rnd() * n);
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)]!;
  }
  u32(): number {
    return (this.int(65536) * 65536 + this.int(65536)) >>> 0;
  }
  u128(): bigint {
    let x = 0n;
    for (let i = 0; i < 4; i++) x = (x << 32n) | BigInt(this.u32());
    return x;
  }
}

export const ALL_V4: Range[] = [
  ...V4_NON_GLOBAL,
  ...V4_IANA_GLOBAL_EXCEPTIONS,
  ...V4_AMBIGUOUS,
  ...V4_ALWAYS,
  r4('169.254.169.254/32', 'metadata'),
  r4('169.254.170.2/32', 'metadata'),
  r4('192.0.0.192/32', 'metadata'),
  r4('192.0.0.170/31', 'NAT64 discovery'),
  r4('192.0.0.8/32', 'dummy'),
  r4('192.0.0.0/29', 'DS-Lite'),
  r4('1.0.0.0/8', 'public'),
  r4('8.8.8.8/32', 'public'),
  r4('100.0.0.0/8', 'public-ish'),
];
export const ALL_V6: Range[] = [
  ...V6_NON_GLOBAL,
  ...V6_IANA_GLOBAL_EXCEPTIONS,
  ...V6_AMBIGUOUS,
  ...V6_ALWAYS,
  GLOBAL_UNICAST,
  r6('2001::/32', 'Teredo'),
  r6('2002::/16', '6to4'),
  r6('64:ff9b::/96', 'NAT64'),
  r6('::ffff:0:0/96', 'mapped'),
  r6('::ffff:0:0:0/96', 'translated'),
  r6('::/96', 'compatible'),
  r6('::/8', 'reserved'),
  r6('4000::/2', 'unallocated'),
  r6('1fff:ffff::/32', 'below 2000::/3'),
  r6('4000::/16', 'above 2000::/3'),
  r6('2600::/12', 'global'),
];

// An IPv4 value near an edge: a range's first/last address or a neighbour.
export function edgeV4(g: Gen): V4 {
  const r = g.pick(ALL_V4);
  const base = g.int(2) ? rangeFirst(r) : rangeLast(r);
  const d = BigInt(g.pick([0, 0, 0, 1, -1, 2, -2]));
  const v = base + d;
  return Number(((v % (1n << 32n)) + (1n << 32n)) % (1n << 32n));
}

export function randomV4(g: Gen): V4 {
  switch (g.int(4)) {
    case 0:
      return g.u32();
    case 1: {
      const r = g.pick(ALL_V4);
      const span = rangeLast(r) - rangeFirst(r) + 1n;
      return Number(rangeFirst(r) + (BigInt(g.u32()) % span));
    }
    default:
      return edgeV4(g);
  }
}

const M128 = (1n << 128n) - 1n;

export const EMBED_FORMS = 7;

// form: 0 mapped, 1 translated, 2 compatible, 3 NAT64, 4 6to4, 5 Teredo,
// 6 ISATAP (random otherwise).
export function embedV4(g: Gen, v4: V4, form = g.int(EMBED_FORMS)): V6 {
  const v = BigInt(v4);
  const rand = (bits: number): bigint => g.u128() & ((1n << BigInt(bits)) - 1n);
  switch (form) {
    case 0:
      return (0xffffn << 32n) | v;
    case 1:
      return (0xffff0000n << 32n) | v;
    case 2:
      return v; // compatible
    case 3:
      return (parseV6('64:ff9b::') & ~0xffffffffn) | v;
    case 4:
      return (0x2002n << 112n) | (v << 80n) | rand(80);
    case 5: {
      // Teredo: prefix, server (any v4), flags, port (obfuscated), client ^ ff..
      const server = BigInt(g.u32());
      return (0x20010000n << 96n) | (server << 64n) | (rand(32) << 32n) | (BigInt(~v4 >>> 0) & 0xffffffffn);
    }
    default: {
      // ISATAP in a global /64, iid 0000:5efe, 0200:5efe (or group bit)
      const prefix = g.pick([0x2600n << 112n, 0x2a00n << 112n, parseV6('fe80::'), parseV6('2001:db8::')]);
      const iid = g.pick([0x00005efen, 0x02005efen, 0x01005efen, 0x03005efen]);
      return (prefix & ~((1n << 64n) - 1n)) | (rand(48) << 64n) | (iid << 32n) | v;
    }
  }
}

export function randomV6(g: Gen): V6 {
  switch (g.int(5)) {
    case 0:
      return g.u128();
    case 1:
      return embedV4(g, randomV4(g));
    case 2: {
      const r = g.pick(ALL_V6);
      const span = rangeLast(r) - rangeFirst(r) + 1n;
      return rangeFirst(r) + (g.u128() % span);
    }
    default: {
      const r = g.pick(ALL_V6);
      const base = g.int(2) ? rangeFirst(r) : rangeLast(r);
      const d = BigInt(g.pick([0, 0, 0, 1, -1, 2, -2]));
      return (((base + d) % (M128 + 1n)) + M128 + 1n) % (M128 + 1n);
    }
  }
}

// A random allow_addresses list: empty, everything, one family, or a few
// random prefixes (often around a non-global block).
export function randomAllow(g: Gen): string[] {
  switch (g.int(6)) {
    case 0:
    case 1:
      return [];
    case 2:
      return ['0.0.0.0/0', '::/0'];
    case 3:
      return [g.pick(['0.0.0.0/0', '::/0'])];
    default: {
      const out: string[] = [];
      for (let n = 1 + g.int(3); n > 0; n--) {
        if (g.int(2)) {
          const len = g.pick([8, 10, 12, 16, 24, 32, g.int(33)]);
          const v = randomV4(g);
          const net = len === 0 ? 0 : (v & ~((2 ** (32 - len) - 1) >>> 0)) >>> 0;
          out.push(`${v4ToString(len === 32 ? v : net)}/${len}`);
        } else {
          const len = g.pick([7, 10, 16, 32, 48, 64, 96, 128, g.int(129)]);
          const v = randomV6(g);
          const net = len === 0 ? 0n : (v >> BigInt(128 - len)) << BigInt(128 - len);
          out.push(`${v6ToString(net)}/${len}`);
        }
      }
      return out;
    }
  }
}

// A few rows written from the registries by hand, for the oracle to be
// checked against (classify-oracle.test.ts): a slip in the oracle cannot
// then hide a defect in the product.
export function oracleSelfCheck(t: Test): void {
  {
    const rows: [string, string[], Verdict][] = [
      ['10.0.0.1', [], 'must_block'],
      ['8.8.8.8', [], 'must_allow'],
      ['192.0.0.9', [], 'may_block'],
      ['169.254.169.254', ['0.0.0.0/0'], 'must_block'],
      ['10.0.0.1', ['10.0.0.0/8'], 'must_allow'],
      ['10.0.0.1', ['::ffff:10.0.0.0/104'], 'must_allow'],
      ['::ffff:10.0.0.1', ['::/0'], 'must_block'],
      ['::ffff:10.0.0.1', ['10.0.0.0/8'], 'must_allow'],
      ['2002:a00:1::', [], 'must_block'],
      ['2002:808:808::', [], 'must_allow'],
      ['2001:0:4136:e378:8000:63bf:f5ff:fffe', [], 'must_block'], // Teredo client 10.0.0.1
      ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', [], 'must_allow'], // Teredo client 8.8.8.8
      ['2600::200:5efe:a00:1', [], 'must_block'], // ISATAP 10.0.0.1
      ['fc00::5efe:808:808', [], 'must_block'], // ISATAP id under a ULA
      ['2600::100:5efe:a00:1', [], 'must_allow'], // group bit: not ISATAP
      ['64:ff9b:1::808:808', ['::/0', '0.0.0.0/0'], 'must_block'],
      ['fd00:ec2::254', ['::/0'], 'must_block'],
      ['fec0::1', [], 'must_block'],
      ['100::1', [], 'must_block'],
      ['4000::1', [], 'must_block'],
      ['2606:4700::1111', [], 'must_allow'],
      ['::8.8.8.8', [], 'must_allow'],
      ['::ffff:192.31.196.1', [], 'may_block'],
      ['::2', [], 'must_block'],
    ];
    for (const [a, allow, want] of rows) t.equal(judge(a, allow).verdict, want, `${a} ${JSON.stringify(allow)}`);
    t.equal(v6ToString(parseV6('::ffff:1.2.3.4')), '::ffff:102:304');
    t.equal(v6ToString(parseV6('1:0:0:1:0:0:0:1')), '1:0:0:1::1');
  }
}
