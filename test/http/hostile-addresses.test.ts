// Hostile DNS answers through the real daemon (SPEC §6.2, §6.3): every
// blocked range with boundary addresses on both sides, IPv6 forms that embed
// an IPv4 address, mixed answers, CNAME chains, cloud metadata, and DNS
// failures. One TABLE of rows; each asserts the exact status and code, that
// the upstream saw nothing (for refusals) and that the refusal is journaled.
//
// Nothing may connect anywhere but 127.0.0.1. Public addresses are only ever
// answered next to a blocked SENTINEL, so a correct daemon refuses naming
// the sentinel (proving the public address passed classification) and an
// incorrect one refuses naming the public address. As a second fence, the
// approver denies every card whose address is not loopback: a daemon that
// wrongly let an address through would be stopped at approval, never
// connect, and fail the row with denied_by_user.
import t, { Test } from 'tap';
import ipaddr from 'ipaddr.js';
import { startStack, Stack, Card } from '../helpers/stack';
import type { Answer } from '../helpers/dns-server';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

const SENTINEL4 = '192.168.77.77';
const SENTINEL6 = 'fc00::77';

type Cred = 'strict' | 'loop' | 'meta' | 'wide';
// The wildcard each credential's one rule allows: `<row>.<zone>`.
const ZONE: Record<Cred, string> = { strict: 'addr.test', loop: 'loop.test', meta: 'meta.test', wide: 'wide.test' };

type Expect =
  | { kind: 'denied'; address: string; reason: string; judgedAs?: string; message?: RegExp }
  | { kind: 'dns_error'; message?: RegExp }
  | { kind: 'ok'; address: string };

interface Row {
  what: string;
  cred: Cred;
  answer: Answer | ((type: string, count: number) => Answer);
  expect: Expect;
}

const denied = (address: string, reason: string, judgedAs?: string, message?: RegExp): Expect => ({
  kind: 'denied',
  address,
  reason,
  ...(judgedAs ? { judgedAs } : {}),
  ...(message ? { message } : {}),
});
const v4 = (...A: string[]): Answer => ({ A });
const v6 = (...AAAA: string[]): Answer => ({ AAAA });

// Inside a blocked range: refused naming the address and its reason.
const inside = (address: string, reason: string, cred: Cred = 'strict'): Row => ({
  what: `${address} is ${reason}`,
  cred,
  answer: address.includes(':') ? v6(address) : v4(address),
  expect: denied(address, reason),
});

// Just outside a blocked range, on the public side: answered with the
// sentinel after it; the refusal must name the sentinel.
const outside = (address: string, cred: Cred = 'strict'): Row => {
  const six = address.includes(':');
  return {
    what: `${address} passes classification (the refusal names the sentinel)`,
    cred,
    answer: six ? v6(address, SENTINEL6) : v4(address, SENTINEL4),
    expect: six ? denied(SENTINEL6, 'unique_local') : denied(SENTINEL4, 'private'),
  };
};

// An IPv6 form embedding an IPv4 address, judged as that address.
const embedded = (form: string, address: string, judgedAs: string, reason: string, cred: Cred = 'strict'): Row => ({
  what: `${form} ${address} is judged as ${judgedAs} (${reason})`,
  cred,
  answer: v6(address),
  expect: denied(address, reason, judgedAs, new RegExp(`${form}, judged as ${judgedAs.replace(/\./g, '\\.')}`)),
});

const ROWS: Row[] = [
  // ---- IPv4: both ends of every blocked range, and both public neighbours.
  inside('0.0.0.0', 'unspecified'),
  inside('0.0.0.1', 'this_network'),
  inside('0.255.255.255', 'this_network'),
  outside('1.0.0.0'),
  outside('9.255.255.255'),
  inside('10.0.0.0', 'private'),
  inside('10.255.255.255', 'private'),
  outside('11.0.0.0'),
  outside('100.63.255.255'),
  inside('100.64.0.0', 'cgnat'),
  inside('100.127.255.255', 'cgnat'),
  outside('100.128.0.0'),
  outside('126.255.255.255'),
  inside('127.0.0.0', 'loopback'),
  inside('127.0.0.1', 'loopback'),
  inside('127.255.255.255', 'loopback'),
  outside('128.0.0.0'),
  outside('169.253.255.255'),
  inside('169.254.0.0', 'link_local'),
  inside('169.254.255.255', 'link_local'),
  outside('169.255.0.0'),
  outside('172.15.255.255'),
  inside('172.16.0.0', 'private'),
  inside('172.31.255.255', 'private'),
  outside('172.32.0.0'),
  outside('191.255.255.255'),
  inside('192.0.0.0', 'ietf_protocol'),
  inside('192.0.0.255', 'ietf_protocol'),
  outside('192.0.1.0'),
  outside('192.0.1.255'),
  inside('192.0.2.0', 'documentation'),
  inside('192.0.2.255', 'documentation'),
  outside('192.0.3.0'),
  outside('192.167.255.255'),
  inside('192.168.0.0', 'private'),
  inside('192.168.255.255', 'private'),
  outside('192.169.0.0'),
  outside('198.17.255.255'),
  inside('198.18.0.0', 'benchmarking'),
  inside('198.19.255.255', 'benchmarking'),
  outside('198.20.0.0'),
  outside('198.51.99.255'),
  inside('198.51.100.0', 'documentation'),
  inside('198.51.100.255', 'documentation'),
  outside('198.51.101.0'),
  outside('203.0.112.255'),
  inside('203.0.113.0', 'documentation'),
  inside('203.0.113.255', 'documentation'),
  outside('203.0.114.0'),
  outside('223.255.255.255'),
  inside('224.0.0.0', 'multicast'),
  inside('239.255.255.255', 'multicast'),
  inside('240.0.0.0', 'reserved'),
  inside('255.255.255.254', 'reserved'),
  inside('255.255.255.255', 'broadcast'),
  inside('169.254.169.254', 'metadata'),
  inside('169.254.170.2', 'metadata'),
  inside('100.100.100.200', 'metadata'),

  // ---- IPv6 ranges. Outside 2000::/3 the neighbours are themselves blocked
  // (not global unicast), so both sides are refused, each for its own reason.
  inside('::', 'unspecified'),
  inside('::1', 'loopback'),
  // ::2 is the IPv4-compatible form of 0.0.0.2; ::/8 beyond ::/96 is not
  // global unicast.
  embedded('IPv4-compatible', '::2', '0.0.0.2', 'this_network'),
  inside('::1:0:0:0', 'not_global_unicast'),
  inside('fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'not_global_unicast'),
  inside('fc00::', 'unique_local'),
  inside('fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'unique_local'),
  inside('fd00::2', 'unique_local'),
  inside('fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'not_global_unicast'),
  inside('fe80::', 'link_local'),
  inside('febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'link_local'),
  inside('fec0::', 'site_local'),
  inside('feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'site_local'),
  inside('ff00::', 'multicast'),
  inside('ff02::1', 'multicast'),
  inside('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'multicast'),
  outside('2001:db7:ffff:ffff:ffff:ffff:ffff:ffff'),
  inside('2001:db8::', 'documentation'),
  inside('2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation'),
  outside('2001:db9::'),
  outside('3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff'),
  inside('3fff::', 'documentation'),
  inside('3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation'),
  outside('3fff:1000::'),
  outside('3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'),
  inside('4000::', 'not_global_unicast'),
  inside('1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'not_global_unicast'),
  outside('2000::'),
  outside('2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff'),
  inside('2001:1::', 'ietf_protocol'),
  inside('2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', 'ietf_protocol'),
  outside('2001:200::'),
  inside('2001:2::', 'benchmarking'),
  inside('2001:2:0:ffff:ffff:ffff:ffff:ffff', 'benchmarking'),
  inside('2001:2:1::', 'ietf_protocol'),
  inside('64:ff9b:1::', 'nat64_local'),
  inside('64:ff9b:1:ffff:ffff:ffff:ffff:ffff', 'nat64_local'),
  inside('64:ff9b:0:ffff:ffff:ffff:ffff:ffff', 'not_global_unicast'),
  inside('100::', 'discard'),
  inside('100::ffff:ffff:ffff:ffff', 'discard'),
  inside('100:0:0:1::', 'not_global_unicast'),
  inside('5f00::', 'reserved'),
  inside('fd00:ec2::254', 'metadata'),

  // ---- IPv6 forms embedding an IPv4 address.
  embedded('IPv4-mapped', '::ffff:10.0.0.1', '10.0.0.1', 'private'),
  embedded('IPv4-mapped', '::ffff:127.0.0.1', '127.0.0.1', 'loopback'),
  embedded('IPv4-mapped', '::ffff:169.254.169.254', '169.254.169.254', 'metadata'),
  embedded('IPv4-compatible', '::10.0.0.1', '10.0.0.1', 'private'),
  embedded('IPv4-translated', '::ffff:0:a00:1', '10.0.0.1', 'private'),
  embedded('NAT64', '64:ff9b::a00:1', '10.0.0.1', 'private'),
  embedded('NAT64', '64:ff9b::7f00:1', '127.0.0.1', 'loopback'),
  embedded('6to4', '2002:a00:1::1', '10.0.0.1', 'private'),
  embedded('6to4', '2002:7f00:1::', '127.0.0.1', 'loopback'),
  // Teredo: server 65.54.227.120, flags 0x8000, client port 40000, and the
  // client address stored inverted (RFC 4380): ~127.0.0.1 = 80ff:fffe.
  embedded('Teredo', '2001:0:4136:e378:8000:63bf:80ff:fffe', '127.0.0.1', 'loopback'),
  embedded('Teredo', '2001:0:4136:e378:8000:63bf:f5ff:fffe', '10.0.0.1', 'private'),
  embedded('ISATAP', '2001:db9::5efe:a00:1', '10.0.0.1', 'private'),
  embedded('ISATAP', '2001:db9::200:5efe:7f00:1', '127.0.0.1', 'loopback'),
  // ISATAP under link-local is judged as the link-local address itself.
  {
    what: 'ISATAP id under fe80::/10 is link-local',
    cred: 'strict',
    answer: v6('fe80::5efe:808:808'),
    expect: denied('fe80::5efe:808:808', 'link_local'),
  },
  outside('::ffff:8.8.8.8'),
  outside('2002:808:808::1'),

  // ---- A credential whose allow_addresses is ["127.0.0.1/32"].
  {
    what: 'a name answering 127.0.0.1 is served',
    cred: 'loop',
    answer: v4('127.0.0.1'),
    expect: { kind: 'ok', address: '127.0.0.1' },
  },
  {
    what: 'allow 127.0.0.1/32 covers ::ffff:127.0.0.1 too',
    cred: 'loop',
    answer: v6('::ffff:127.0.0.1'),
    expect: { kind: 'ok', address: '::ffff:127.0.0.1' },
  },
  {
    what: 'mixed: allowed 127.0.0.1 then blocked 10.0.0.1',
    cred: 'loop',
    answer: v4('127.0.0.1', '10.0.0.1'),
    expect: denied('10.0.0.1', 'private', undefined, /resolves to 127\.0\.0\.1, 10\.0\.0\.1/),
  },
  {
    what: 'mixed: blocked 10.0.0.1 listed first',
    cred: 'loop',
    answer: v4('10.0.0.1', '127.0.0.1'),
    expect: denied('10.0.0.1', 'private'),
  },
  {
    what: 'mixed: 127.0.0.2 is outside the /32',
    cred: 'loop',
    answer: v4('127.0.0.1', '127.0.0.2'),
    expect: denied('127.0.0.2', 'loopback'),
  },
  {
    what: 'mixed: allowed A, blocked AAAA',
    cred: 'loop',
    answer: { A: ['127.0.0.1'], AAAA: ['fd00::1'] },
    expect: denied('fd00::1', 'unique_local'),
  },
  {
    what: 'mixed: allowed A, AAAA ::1 (not covered by an IPv4 allow)',
    cred: 'loop',
    answer: { A: ['127.0.0.1'], AAAA: ['::1'] },
    expect: denied('::1', 'loopback'),
  },
  {
    what: 'mixed: allowed A, AAAA NAT64 of 10.0.0.1',
    cred: 'loop',
    answer: { A: ['127.0.0.1'], AAAA: ['64:ff9b::a00:1'] },
    expect: denied('64:ff9b::a00:1', 'private', '10.0.0.1'),
  },
  {
    what: 'mixed: two blocked, the count is given',
    cred: 'loop',
    answer: v4('127.0.0.1', '10.0.0.1', '10.0.0.2'),
    expect: denied('10.0.0.1', 'private', undefined, /2 of its 3 addresses are blocked/),
  },
  {
    what: 'CNAME to a name answering 127.0.0.1 is served',
    cred: 'loop',
    answer: { CNAME: 'good.chain.test' },
    expect: { kind: 'ok', address: '127.0.0.1' },
  },
  {
    what: 'CNAME chain ending at 10.0.0.9',
    cred: 'loop',
    answer: { CNAME: 'hop1.chain.test' },
    expect: denied('10.0.0.9', 'private'),
  },
  {
    what: 'CNAME to a name answering 127.0.0.1 and the metadata address',
    cred: 'loop',
    answer: { CNAME: 'meta.chain.test' },
    expect: denied('169.254.169.254', 'metadata'),
  },
  {
    what: 'CNAME to a name answering a blocked AAAA',
    cred: 'loop',
    answer: { CNAME: 'ula.chain.test' },
    expect: denied('fd12::1', 'unique_local'),
  },
  {
    what: 'CNAME to a name that does not exist',
    cred: 'loop',
    answer: { CNAME: 'missing.chain.test' },
    expect: { kind: 'dns_error', message: /NXDOMAIN/ },
  },
  { what: 'CNAME loop', cred: 'loop', answer: { CNAME: 'loop-a.chain.test' }, expect: { kind: 'dns_error' } },
  { what: 'NXDOMAIN', cred: 'loop', answer: { rcode: 'NXDOMAIN' }, expect: { kind: 'dns_error', message: /NXDOMAIN/ } },
  { what: 'SERVFAIL', cred: 'loop', answer: { rcode: 'SERVFAIL' }, expect: { kind: 'dns_error', message: /SERVFAIL/ } },
  { what: 'REFUSED', cred: 'loop', answer: { rcode: 'REFUSED' }, expect: { kind: 'dns_error', message: /refused/ } },
  { what: 'no records at all', cred: 'loop', answer: {}, expect: { kind: 'dns_error', message: /no A or AAAA/ } },
  {
    what: 'A answers 127.0.0.1 while AAAA says NXDOMAIN',
    cred: 'loop',
    answer: (type) => (type === 'A' ? v4('127.0.0.1') : { rcode: 'NXDOMAIN' }),
    expect: { kind: 'dns_error', message: /NXDOMAIN/ },
  },
  {
    what: 'A SERVFAIL, AAAA blocked: the answered family is still judged',
    cred: 'loop',
    answer: (type) => (type === 'A' ? { rcode: 'SERVFAIL' } : v6('fd00::9')),
    expect: denied('fd00::9', 'unique_local'),
  },

  // ---- A credential whose allow_addresses covers link-local, CGNAT, ULA
  // and 192.0.0.0/24: the metadata addresses stay blocked, and so does all
  // of link-local (SPEC §6.2: no allow_addresses opens it).
  inside('169.254.169.254', 'metadata', 'meta'),
  inside('169.254.170.2', 'metadata', 'meta'),
  inside('169.254.170.23', 'metadata', 'meta'),
  inside('169.254.0.23', 'metadata', 'meta'),
  inside('169.254.42.42', 'metadata', 'meta'),
  inside('100.100.100.200', 'metadata', 'meta'),
  inside('fd00:ec2::254', 'metadata', 'meta'),
  inside('fd00:ec2::23', 'metadata', 'meta'),
  embedded('IPv4-mapped', '::ffff:169.254.169.254', '169.254.169.254', 'metadata', 'meta'),
  embedded('NAT64', '64:ff9b::a9fe:a9fe', '169.254.169.254', 'metadata', 'meta'),
  inside('169.254.0.0', 'link_local', 'meta'),
  inside('169.254.169.253', 'link_local', 'meta'),
  inside('169.254.255.255', 'link_local', 'meta'),
  embedded('IPv4-mapped', '::ffff:169.254.1.1', '169.254.1.1', 'link_local', 'meta'),
  // Neighbours of the metadata addresses outside link-local are opened by
  // allow_addresses.
  outside('100.100.100.199', 'meta'),
  outside('100.100.100.201', 'meta'),
  outside('fd00:ec2::253', 'meta'),

  // ---- A credential that allows every address ("0.0.0.0/0", "::/0"):
  // link-local, NAT64 local-use and the metadata services stay blocked.
  inside('169.254.169.254', 'metadata', 'wide'),
  inside('169.254.0.23', 'metadata', 'wide'),
  inside('169.254.42.42', 'metadata', 'wide'),
  inside('169.254.1.1', 'link_local', 'wide'),
  inside('fe80::1', 'link_local', 'wide'),
  inside('fe80::a9fe:a9fe', 'link_local', 'wide'),
  inside('64:ff9b:1::a9fe:a9fe', 'nat64_local', 'wide'),
  inside('64:ff9b:1::7f00:1', 'nat64_local', 'wide'),
  inside('fd00:ec2::254', 'metadata', 'wide'),
  inside('fd20:ce::254', 'metadata', 'wide'),
  inside('100.100.100.200', 'metadata', 'wide'),
  inside('168.63.129.16', 'metadata', 'wide'),
  embedded('IPv4-mapped', '::ffff:169.254.0.23', '169.254.0.23', 'metadata', 'wide'),
  embedded('IPv4-compatible', '::169.254.42.42', '169.254.42.42', 'metadata', 'wide'),
  embedded('NAT64', '64:ff9b::a9fe:101', '169.254.1.1', 'link_local', 'wide'),
  embedded('6to4', '2002:a9fe:a9fe::1', '169.254.169.254', 'metadata', 'wide'),
  embedded('NAT64', '64:ff9b::a83f:8110', '168.63.129.16', 'metadata', 'wide'),
  embedded('IPv4-mapped', '::ffff:100.100.100.200', '100.100.100.200', 'metadata', 'wide'),
  {
    what: 'ISATAP id under fe80::/10 naming a public address',
    cred: 'wide',
    answer: v6('fe80::5efe:808:808'),
    expect: denied('fe80::5efe:808:808', 'link_local'),
  },
];

// Targets of the CNAME rows.
const CHAIN: Record<string, Answer> = {
  'good.chain.test': v4('127.0.0.1'),
  'hop1.chain.test': { CNAME: 'hop2.chain.test' },
  'hop2.chain.test': { CNAME: 'hop3.chain.test' },
  'hop3.chain.test': v4('10.0.0.9'),
  'meta.chain.test': v4('127.0.0.1', '169.254.169.254'),
  'ula.chain.test': { A: ['127.0.0.1'], AAAA: ['fd12::1'] },
  'loop-a.chain.test': { CNAME: 'loop-b.chain.test' },
  'loop-b.chain.test': { CNAME: 'loop-a.chain.test' },
};

const host = (i: number, row: Row): string => `r${i}.${ZONE[row.cred]}`;
const same = (a: unknown, b: string): boolean =>
  typeof a === 'string' && ipaddr.parse(a).toNormalizedString() === ipaddr.parse(b).toNormalizedString();

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown; address?: string; reason?: string; judged_as?: string };
}

t.test('hostile DNS answers through the real daemon', async (t) => {
  const records: Record<string, Answer | ((type: string, count: number) => Answer)> = {
    ...CHAIN,
    'drop.loop.test': { drop: true },
  };
  ROWS.forEach((row, i) => (records[host(i, row)] = row.answer));
  const s: Stack = await startStack({ names: ['*.loop.test'], records });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  const rule = (zone: string): string => `[[allow]]\nhost = "*.${zone}"\nports = [${P}]\n`;
  const inject = `[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n`;
  s.addCredential('strict', `name = "strict"\nkind = "http"\n${inject}${rule(ZONE.strict)}`, secret);
  s.addCredential(
    'loop',
    `name = "loop"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n${inject}${rule(ZONE.loop)}`,
    secret,
  );
  s.addCredential(
    'meta',
    `name = "meta"\nkind = "http"\nallow_addresses = ["169.254.0.0/16", "100.64.0.0/10", "fd00::/8", "192.0.0.0/24"]\n${inject}${rule(ZONE.meta)}`,
    secret,
  );
  s.addCredential(
    'wide',
    `name = "wide"\nkind = "http"\nallow_addresses = ["0.0.0.0/0", "::/0"]\n${inject}${rule(ZONE.wide)}`,
    secret,
  );

  // The second fence: only loopback is ever approved.
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    const address = String(card.action['address']);
    return address === '127.0.0.1' || address === '::ffff:127.0.0.1'
      ? { decision: 'session', root_key: card.process.key }
      : { decision: 'deny' };
  });

  const texts: string[] = [];
  let lastSeq = 0;
  const run = async (t: Test, cred: Cred, name: string, expect: Expect): Promise<void> => {
    const before = { requests: s.up.requests.length, connections: s.up.connections() };
    const r = await s.request({ credential: cred, method: 'GET', url: s.url(name, '/x') });
    texts.push(r.text);
    t.same(findCanary(r.text, secret), [], 'no form of the secret in the reply');
    if (expect.kind === 'ok') {
      t.equal(r.status, 200, r.text);
      const ok = r.json as { status: number; target: { address: string; host: string } };
      t.equal(ok.status, 200, 'the upstream answered');
      t.ok(same(ok.target.address, expect.address), `served from ${expect.address}`);
      t.equal(s.up.requests.length, before.requests + 1, 'the upstream saw exactly one request');
      t.equal(s.up.requests.at(-1)!.headers['host'], `${name}:${P}`, 'Host keeps the name');
      t.equal(s.up.requests.at(-1)!.headers['authorization'], `Bearer ${secret}`, 'the secret was injected');
      return;
    }
    const err = (r.json as ErrorBody | null)?.error;
    if (!err) return void t.fail(`no error body: ${r.status} ${r.text}`);
    if (expect.kind === 'dns_error') {
      t.equal(r.status, 502, r.text);
      t.equal(err.code, 'dns_error');
      if (expect.message) t.match(err.message, expect.message);
    } else {
      t.equal(r.status, 403, r.text);
      t.equal(err.code, 'denied_address');
      t.ok(same(err.address, expect.address), `names ${expect.address} (got ${err.address})`);
      t.equal(err.reason, expect.reason);
      if (expect.judgedAs) t.equal(err.judged_as, expect.judgedAs);
      if (expect.message) t.match(err.message, expect.message);
      t.match(err.message, /allow_addresses/, 'the message says what could open it');
    }
    t.type(err.audit_seq, 'number', 'the refusal is journaled');
    t.ok((err.audit_seq as number) > lastSeq, 'with a new journal entry');
    lastSeq = err.audit_seq as number;
    t.equal(s.up.requests.length, before.requests, 'the upstream saw no request');
    t.equal(s.up.connections(), before.connections, 'no connection was made');
  };

  for (const [i, row] of ROWS.entries()) {
    await t.test(`${row.cred}: ${row.what}`, (t) => run(t, row.cred, host(i, row), row.expect));
  }
  t.comment(`${ROWS.length + 1} rows`);

  // Last, alone: a server that never answers costs the resolver's timeout.
  await t.test('loop: a DNS server that never answers is a timeout', (t) =>
    run(t, 'loop', 'drop.loop.test', { kind: 'dns_error', message: /no answer within/ }),
  );

  t.ok(
    cards.every((c) => c.action['address'] === '127.0.0.1' || c.action['address'] === '::ffff:127.0.0.1'),
    'no card ever showed another address',
  );
  t.equal(cards.length, 1, 'one session approval covered every request of the loop credential');

  await s.d.stop();
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
});
