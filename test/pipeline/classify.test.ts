// Address classification (SPEC §6.2): boundary addresses on both sides of
// every blocked range, every IPv6 form that embeds an IPv4 address, cloud
// metadata that no allow_addresses opens, and the request-level refusal.
// The hand-written table is the SPEC's truth; the generated checks at the
// end walk ADDRESS_TABLE itself so that no row is left untested.
import t, { Test } from 'tap';
import ipaddr from 'ipaddr.js';
import {
  ADDRESS_TABLE,
  BlockReason,
  classifyAddress,
  classifyAll,
  assertAllAllowed,
} from '../../daemon/pipeline/classify';
import { Refusal } from '../../shared/errors';

type Expect = 'public' | 'allowed_by_credential' | BlockReason;
// [address, allow_addresses, expected reason, judgedAs (defaults to the address)]
type Row = [string, string[], Expect, string?];

const NONE: string[] = [];
const EVERYTHING = ['0.0.0.0/0', '::/0'];

function check(t: Test, rows: readonly Row[]): void {
  for (const [address, allow, expected, judgedAs] of rows) {
    const v = classifyAddress(address, allow);
    const label = `${address} allow=${JSON.stringify(allow)}`;
    t.equal(v.reason, expected, label);
    t.equal(v.allowed, expected === 'public' || expected === 'allowed_by_credential', `${label}: allowed`);
    t.equal(v.judgedAs, judgedAs ?? address, `${label}: judgedAs`);
    if (!v.allowed) t.match(v.message, address, `${label}: the message names the address`);
  }
}

t.test('IPv4 boundaries: both sides of every blocked range', async (t) => {
  check(t, [
    ['0.0.0.0', NONE, 'unspecified'],
    ['0.0.0.1', NONE, 'this_network'],
    ['0.255.255.255', NONE, 'this_network'],
    ['1.0.0.0', NONE, 'public'],
    ['9.255.255.255', NONE, 'public'],
    ['10.0.0.0', NONE, 'private'],
    ['10.255.255.255', NONE, 'private'],
    ['11.0.0.0', NONE, 'public'],
    ['100.63.255.255', NONE, 'public'],
    ['100.64.0.0', NONE, 'cgnat'],
    ['100.127.255.255', NONE, 'cgnat'],
    ['100.128.0.0', NONE, 'public'],
    ['126.255.255.255', NONE, 'public'],
    ['127.0.0.0', NONE, 'loopback'],
    ['127.0.0.1', NONE, 'loopback'],
    ['127.255.255.255', NONE, 'loopback'],
    ['128.0.0.0', NONE, 'public'],
    ['169.253.255.255', NONE, 'public'],
    ['169.254.0.0', NONE, 'link_local'],
    ['169.254.255.255', NONE, 'link_local'],
    ['169.255.0.0', NONE, 'public'],
    ['172.15.255.255', NONE, 'public'],
    ['172.16.0.0', NONE, 'private'],
    ['172.31.255.255', NONE, 'private'],
    ['172.32.0.0', NONE, 'public'],
    ['191.255.255.255', NONE, 'public'],
    ['192.0.0.0', NONE, 'ietf_protocol'],
    ['192.0.0.255', NONE, 'ietf_protocol'],
    ['192.0.1.0', NONE, 'public'],
    ['192.0.1.255', NONE, 'public'],
    ['192.0.2.0', NONE, 'documentation'],
    ['192.0.2.255', NONE, 'documentation'],
    ['192.0.3.0', NONE, 'public'],
    ['192.167.255.255', NONE, 'public'],
    ['192.168.0.0', NONE, 'private'],
    ['192.168.255.255', NONE, 'private'],
    ['192.169.0.0', NONE, 'public'],
    ['198.17.255.255', NONE, 'public'],
    ['198.18.0.0', NONE, 'benchmarking'],
    ['198.19.255.255', NONE, 'benchmarking'],
    ['198.20.0.0', NONE, 'public'],
    ['198.51.99.255', NONE, 'public'],
    ['198.51.100.0', NONE, 'documentation'],
    ['198.51.100.255', NONE, 'documentation'],
    ['198.51.101.0', NONE, 'public'],
    ['203.0.112.255', NONE, 'public'],
    ['203.0.113.0', NONE, 'documentation'],
    ['203.0.113.255', NONE, 'documentation'],
    ['203.0.114.0', NONE, 'public'],
    ['223.255.255.255', NONE, 'public'],
    ['224.0.0.0', NONE, 'multicast'],
    ['239.255.255.255', NONE, 'multicast'],
    ['240.0.0.0', NONE, 'reserved'],
    ['255.255.255.254', NONE, 'reserved'],
    ['255.255.255.255', NONE, 'broadcast'],
    ['8.8.8.8', NONE, 'public'],
    ['93.184.216.34', NONE, 'public'],
  ]);
});

t.test('cloud metadata: blocked, and its neighbours are judged by their range', async (t) => {
  check(t, [
    ['169.254.169.253', NONE, 'link_local'],
    ['169.254.169.254', NONE, 'metadata'],
    ['169.254.169.255', NONE, 'link_local'],
    ['169.254.170.2', NONE, 'metadata'],
    ['169.254.170.23', NONE, 'metadata'],
    ['100.100.100.199', NONE, 'cgnat'],
    ['100.100.100.200', NONE, 'metadata'],
    ['100.100.100.201', NONE, 'cgnat'],
    ['192.0.0.192', NONE, 'metadata'],
    ['168.63.129.15', NONE, 'public'],
    ['168.63.129.16', NONE, 'metadata'],
    ['168.63.129.17', NONE, 'public'],
    ['fd00:ec2::253', NONE, 'unique_local'],
    ['fd00:ec2::254', NONE, 'metadata'],
    ['fd00:ec2::23', NONE, 'metadata'],
    // allow_addresses cannot open them, however wide.
    ['169.254.169.254', EVERYTHING, 'metadata'],
    ['169.254.169.254', ['169.254.169.254/32'], 'metadata'],
    ['169.254.169.254', ['169.254.0.0/16'], 'metadata'],
    ['169.254.170.2', EVERYTHING, 'metadata'],
    ['100.100.100.200', ['100.64.0.0/10'], 'metadata'],
    ['168.63.129.16', EVERYTHING, 'metadata'],
    ['fd00:ec2::254', EVERYTHING, 'metadata'],
    ['fd00:ec2::254', ['fd00::/8'], 'metadata'],
    ['::ffff:169.254.169.254', EVERYTHING, 'metadata', '169.254.169.254'],
    ['::ffff:a9fe:a9fe', EVERYTHING, 'metadata', '169.254.169.254'],
    ['64:ff9b::169.254.169.254', EVERYTHING, 'metadata', '169.254.169.254'],
    ['::ffff:100.100.100.200', EVERYTHING, 'metadata', '100.100.100.200'],
    // All of link-local stays shut (SPEC §6.2); a ULA range around a
    // metadata address still opens.
    ['169.254.1.1', ['169.254.0.0/16'], 'link_local'],
    ['fd00::1', ['fd00::/8'], 'allowed_by_credential'],
  ]);
  const v = classifyAddress('169.254.169.254', EVERYTHING);
  t.match(v, { allowed: false, range: '169.254.169.254/32' });
  if (!v.allowed) t.match(v.message, /blocked for every credential, even when allow_addresses covers it/);
});

t.test('IPv6 boundaries', async (t) => {
  check(t, [
    ['::', NONE, 'unspecified'],
    ['::1', NONE, 'loopback'],
    ['::2', NONE, 'this_network', '0.0.0.2'], // IPv4-compatible 0.0.0.2
    ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'unique_local'],
    ['fc00::', NONE, 'unique_local'],
    ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'not_global_unicast'],
    ['fe00::', NONE, 'not_global_unicast'],
    ['fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'not_global_unicast'],
    ['fe80::', NONE, 'link_local'],
    ['fe80::1', NONE, 'link_local'],
    ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'link_local'],
    ['fec0::', NONE, 'site_local'],
    ['feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'site_local'],
    ['ff00::', NONE, 'multicast'],
    ['ff02::1', NONE, 'multicast'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'multicast'],
    ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'not_global_unicast'],
    ['2000::', NONE, 'public'],
    ['3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'public'],
    ['4000::', NONE, 'not_global_unicast'],
    ['2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'public'],
    ['2001:db8::', NONE, 'documentation'],
    ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'documentation'],
    ['2001:db9::', NONE, 'public'],
    ['3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'public'],
    ['3fff::', NONE, 'documentation'],
    ['3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'documentation'],
    ['3fff:1000::', NONE, 'public'],
    ['2001:1::1', NONE, 'ietf_protocol'],
    ['2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', NONE, 'ietf_protocol'],
    ['2001:200::', NONE, 'public'],
    ['2001:2::', NONE, 'benchmarking'],
    ['2001:2:0:ffff:ffff:ffff:ffff:ffff', NONE, 'benchmarking'],
    ['2001:2:1::', NONE, 'ietf_protocol'],
    ['64:ff9b:1::', NONE, 'nat64_local'],
    ['64:ff9b:1:ffff:ffff:ffff:ffff:ffff', NONE, 'nat64_local'],
    ['64:ff9b:1::808:808', NONE, 'nat64_local'], // blocked whole, whatever it embeds
    ['64:ff9b:0:ffff:ffff:ffff:ffff:ffff', NONE, 'not_global_unicast'],
    ['64:ff9b:2::', NONE, 'not_global_unicast'],
    ['100::', NONE, 'discard'],
    ['100::ffff:ffff:ffff:ffff', NONE, 'discard'],
    ['100:0:0:1::', NONE, 'not_global_unicast'],
    ['5f00::1', NONE, 'reserved'],
    ['2606:4700:4700::1111', NONE, 'public'],
    ['2a00:1450:4001:80b::200e', NONE, 'public'],
    // Normalised to RFC 5952 in judgedAs.
    ['FC00:0:0:0:0:0:0:0001', NONE, 'unique_local', 'fc00::1'],
    ['2001:DB8:0:0:0:0:0:1', NONE, 'documentation', '2001:db8::1'],
  ]);
});

// The IPv6 spellings of one IPv4 address, built independently of the
// module under test (Teredo's client is stored with every bit inverted).
function embeddedForms(v4: string): [string, string][] {
  const o = ipaddr.IPv4.parse(v4).octets;
  const hex = (a: number, b: number) => ((a << 8) | b).toString(16);
  const teredo = o.map((x) => x ^ 0xff);
  return [
    ['IPv4-mapped', `::ffff:${v4}`],
    ['IPv4-mapped, hex', `::ffff:${hex(o[0]!, o[1]!)}:${hex(o[2]!, o[3]!)}`],
    ['IPv4-compatible', `::${v4}`],
    ['IPv4-translated', `::ffff:0:${v4}`],
    ['NAT64', `64:ff9b::${v4}`],
    ['6to4', `2002:${hex(o[0]!, o[1]!)}:${hex(o[2]!, o[3]!)}:1::1`],
    ['Teredo', `2001:0:4136:e378:8000:63bf:${hex(teredo[0]!, teredo[1]!)}:${hex(teredo[2]!, teredo[3]!)}`],
    ['ISATAP', `2600:1f18:1:2:0:5efe:${v4}`],
    ['ISATAP, universal', `2600:1f18:1:2:200:5efe:${v4}`],
  ];
}

t.test('every embedded-IPv4 form is judged as the IPv4 address', async (t) => {
  const cases: [string, Expect][] = [
    ['127.0.0.1', 'loopback'],
    ['10.0.0.5', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
  ];
  for (const [v4, expected] of cases) {
    for (const [form, v6] of embeddedForms(v4)) {
      const v = classifyAddress(v6, NONE);
      t.equal(v.reason, expected, `${form} ${v6} of ${v4}`);
      t.equal(v.judgedAs, v4, `${form} ${v6}: judgedAs`);
      if (!v.allowed) t.match(v.message, `judged as ${v4}`, `${form}: the message says what it was judged as`);
    }
  }
});

t.test('allow_addresses over IPv4 covers the IPv6 forms that embed it', async (t) => {
  for (const [form, v6] of embeddedForms('127.0.0.1')) {
    t.equal(classifyAddress(v6, ['127.0.0.1/32']).reason, 'allowed_by_credential', `${form} ${v6}`);
  }
  for (const [form, v6] of embeddedForms('10.1.2.3')) {
    t.equal(classifyAddress(v6, ['10.0.0.0/8']).reason, 'allowed_by_credential', `${form} ${v6}`);
    t.equal(classifyAddress(v6, ['10.1.2.4/32']).reason, 'private', `${form} ${v6} with a neighbour allowed`);
  }
  check(t, [
    ['127.0.0.1', ['127.0.0.1/32'], 'allowed_by_credential'],
    ['::ffff:127.0.0.1', ['127.0.0.1/32'], 'allowed_by_credential', '127.0.0.1'],
    ['127.0.0.2', ['127.0.0.1/32'], 'loopback'],
    ['::ffff:127.0.0.2', ['127.0.0.1/32'], 'loopback', '127.0.0.2'],
    // ::1 is IPv6 loopback, not an IPv4 spelling: 127.0.0.1/32 does not open it.
    ['::1', ['127.0.0.1/32'], 'loopback'],
    ['::1', ['::1/128'], 'allowed_by_credential'],
    // An allow entry written as an IPv4-mapped range is that IPv4 range.
    ['127.0.0.1', ['::ffff:127.0.0.0/104'], 'allowed_by_credential'],
    ['::ffff:127.0.0.1', ['::ffff:127.0.0.0/104'], 'allowed_by_credential', '127.0.0.1'],
    // IPv6 entries never open an embedded IPv4 address: it is judged as IPv4.
    ['::ffff:10.0.0.5', ['::/0'], 'private', '10.0.0.5'],
    ['2002:a00:5::1', ['2002::/16'], 'private', '10.0.0.5'],
    ['fc00::1', ['::/0'], 'allowed_by_credential'],
    ['10.0.0.5', ['0.0.0.0/0'], 'allowed_by_credential'],
    // Public addresses stay "public" whatever the allow list says.
    ['8.8.8.8', ['10.0.0.0/8'], 'public'],
    ['::ffff:8.8.8.8', EVERYTHING, 'public', '8.8.8.8'],
    // NAT64 local-use is blocked whole, whatever allow_addresses says.
    ['64:ff9b:1::1', ['64:ff9b:1::/48'], 'nat64_local'],
  ]);
});

t.test('Teredo, ISATAP and combined forms', async (t) => {
  check(t, [
    // 127.0.0.1 obfuscated: 0x7f000001 ^ 0xffffffff = 0x80fffffe.
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', NONE, 'loopback', '127.0.0.1'],
    // The same bits NOT inverted are the client 128.255.255.254: public.
    ['2001:0:4136:e378:8000:63bf:7f00:1', NONE, 'public', '128.255.255.254'],
    // RFC 4380's own example: client 192.0.2.45 (documentation).
    ['2001:0000:4136:e378:8000:63bf:3fff:fdd2', NONE, 'documentation', '192.0.2.45'],
    // ISATAP under a public prefix, either interface id.
    ['2600::5efe:10.0.0.1', NONE, 'private', '10.0.0.1'],
    ['2600::200:5efe:127.0.0.1', NONE, 'loopback', '127.0.0.1'],
    ['2600::200:5efe:8.8.8.8', NONE, 'public', '8.8.8.8'],
    // ISATAP under a blocked prefix: the prefix is judged too.
    ['fe80::5efe:8.8.8.8', NONE, 'link_local', 'fe80::5efe:808:808'],
    ['fe80::5efe:8.8.8.8', ['fe80::/10'], 'link_local', 'fe80::5efe:808:808'],
    ['fe80::5efe:10.0.0.1', ['fe80::/10'], 'link_local', 'fe80::5efe:a00:1'],
    ['fd00::200:5efe:8.8.8.8', NONE, 'unique_local', 'fd00::200:5efe:808:808'],
    // Two embedded addresses (6to4 prefix + ISATAP id): both are judged.
    ['2002:808:808::5efe:10.0.0.1', NONE, 'private', '10.0.0.1'],
    ['2002:a00:1::5efe:8.8.8.8', NONE, 'private', '10.0.0.1'],
    ['2002:808:808::5efe:8.8.4.4', NONE, 'public', '8.8.8.8'],
    // Teredo prefix whose flags/port bits look like an ISATAP id.
    ['2001:0:4136:e378:0:5efe:80ff:fffe', NONE, 'loopback', '127.0.0.1'],
  ]);
});

t.test('classify refuses what is not an address (a programming error)', async (t) => {
  for (const bad of [
    '127.1',
    '2130706433',
    '0x7f.0.0.1',
    '010.0.0.1',
    '1.2.3.256',
    ' 1.2.3.4',
    '',
    'localhost',
    'fe80::1%eth0',
    '[::1]',
    '::ffff:0x7f.0.0.1',
    '1:2:3:4:5:6:7:8:9',
    '10.0.0.0/8',
  ]) {
    t.throws(() => classifyAddress(bad, NONE), TypeError, JSON.stringify(bad));
  }
  t.throws(() => classifyAddress('8.8.8.8', ['10.0.0.0']), 'an allow entry without a prefix length');
});

t.test('classifyAll judges every address and reports the first blocked one', async (t) => {
  const all = classifyAll(['8.8.8.8', '10.0.0.5', '::1', '2606:4700::1'], NONE);
  t.equal(all.allowed, false);
  t.equal(all.verdicts.length, 4, 'no address is skipped');
  t.same(
    all.verdicts.map((v) => v.reason),
    ['public', 'private', 'loopback', 'public'],
  );
  if (!all.allowed) t.match(all.blocked, { address: '10.0.0.5', reason: 'private', range: '10.0.0.0/8' });

  const ok = classifyAll(['8.8.8.8', '::ffff:10.0.0.5'], ['10.0.0.0/8']);
  t.same(ok, {
    allowed: true,
    verdicts: [
      { allowed: true, reason: 'public', judgedAs: '8.8.8.8' },
      { allowed: true, reason: 'allowed_by_credential', judgedAs: '10.0.0.5' },
    ],
  });
});

t.test('assertAllAllowed: one blocked address refuses the request', async (t) => {
  t.same(
    assertAllAllowed('example.com', ['93.184.216.34', '2606:2800:220:1::1'], NONE).map((v) => v.reason),
    ['public', 'public'],
  );

  const refusals: [string, string[], string[], RegExp, Record<string, unknown>][] = [
    [
      'app.test',
      ['93.184.216.34', '10.0.0.5'],
      NONE,
      /^app\.test resolves to 93\.184\.216\.34, 10\.0\.0\.5, and every address must be allowed: address 10\.0\.0\.5 is private \(RFC 1918, 10\.0\.0\.0\/8\); a credential may reach it only if allow_addresses covers it$/,
      { host: 'app.test', address: '10.0.0.5', range: '10.0.0.0/8', reason: 'private', judged_as: '10.0.0.5' },
    ],
    ['app.test', ['10.0.0.5', '93.184.216.34'], NONE, /address 10\.0\.0\.5 is private/, { address: '10.0.0.5' }],
    [
      'app.test',
      ['93.184.216.34', '::1', '127.0.0.1'],
      NONE,
      /\(2 of its 3 addresses are blocked\).*address ::1 is loopback \(RFC 4291, ::1\/128\)/,
      { address: '::1', reason: 'loopback' },
    ],
    ['app.test', ['127.0.0.1', '::1'], ['127.0.0.1/32'], /address ::1 is loopback/, { address: '::1' }],
    [
      'meta.test',
      ['93.184.216.34', '::ffff:169.254.169.254'],
      EVERYTHING,
      /address ::ffff:169\.254\.169\.254 \(IPv4-mapped, judged as 169\.254\.169\.254\) is a cloud metadata endpoint .*169\.254\.169\.254\/32\); it is blocked for every credential, even when allow_addresses covers it/,
      { address: '::ffff:169.254.169.254', judged_as: '169.254.169.254', reason: 'metadata' },
    ],
    [
      '10.0.0.5',
      ['10.0.0.5'],
      NONE,
      /^address 10\.0\.0\.5 is private \(RFC 1918, 10\.0\.0\.0\/8\); a credential may reach it only if allow_addresses covers it$/,
      {},
    ],
    [
      '[::ffff:7f00:1]',
      ['::ffff:7f00:1'],
      NONE,
      /^address ::ffff:7f00:1 \(IPv4-mapped, judged as 127\.0\.0\.1\) is loopback/,
      {},
    ],
  ];
  for (const [host, addresses, allow, message, detail] of refusals) {
    const label = `${host} ${addresses.join(' ')}`;
    try {
      assertAllAllowed(host, addresses, allow);
      t.fail(`${label}: should be refused`);
    } catch (e) {
      t.ok(e instanceof Refusal, label);
      const r = e as Refusal;
      t.equal(r.code, 'denied_address', label);
      t.equal(r.status, 403, label);
      t.match(r.message, message, label);
      t.match(r.detail, detail, label);
    }
  }

  // A long answer is shortened in the message, not left out of the check.
  const many = Array.from({ length: 20 }, (_, i) => `93.184.216.${i + 1}`).concat(['192.168.0.1']);
  t.throws(() => assertAllAllowed('big.test', many, NONE), {
    code: 'denied_address',
    message: /, \.\.\., and every.*192\.168\.0\.1 is private/,
  });

  t.throws(() => assertAllAllowed('app.test', [], NONE), /no addresses to check/, 'an empty list is a caller bug');
  t.notOk(
    (() => {
      try {
        assertAllAllowed('app.test', [], NONE);
      } catch (e) {
        return e instanceof Refusal;
      }
      return true;
    })(),
    'and not a Refusal the agent would see as a decision',
  );
});

// ---------------------------------------------------------------- generated from ADDRESS_TABLE

function neighbour(addr: ipaddr.IPv4 | ipaddr.IPv6, delta: 1 | -1): string | null {
  const bytes = addr.toByteArray();
  for (let i = bytes.length - 1; i >= 0; i--) {
    const b = bytes[i]! + delta;
    if (b >= 0 && b <= 255) {
      bytes[i] = b;
      const n = ipaddr.fromByteArray(bytes);
      return n.kind() === 'ipv4' ? n.toString() : (n as ipaddr.IPv6).toRFC5952String();
    }
    bytes[i] = delta === 1 ? 0 : 255;
  }
  return null; // wrapped around the address space
}

function ends(cidr: string): [ipaddr.IPv4 | ipaddr.IPv6, ipaddr.IPv4 | ipaddr.IPv6] {
  const [a] = ipaddr.parseCIDR(cidr);
  return a.kind() === 'ipv4'
    ? [ipaddr.IPv4.networkAddressFromCIDR(cidr), ipaddr.IPv4.broadcastAddressFromCIDR(cidr)]
    : [ipaddr.IPv6.networkAddressFromCIDR(cidr), ipaddr.IPv6.broadcastAddressFromCIDR(cidr)];
}

const text = (a: ipaddr.IPv4 | ipaddr.IPv6) =>
  a.kind() === 'ipv4' ? a.toString() : (a as ipaddr.IPv6).toRFC5952String();

t.test('every table row: its ends are blocked, its outside neighbours are not judged by it', async (t) => {
  t.ok(ADDRESS_TABLE.length >= 40, 'the table is populated');
  const seen = new Set<string>();
  for (const row of ADDRESS_TABLE) {
    t.notOk(seen.has(row.cidr), `${row.cidr} appears once`);
    seen.add(row.cidr);
    t.ok(row.note.length > 0, `${row.cidr} has a note`);
    const [first, last] = ends(row.cidr);
    for (const a of [first, last]) {
      const v = classifyAddress(text(a), NONE);
      t.equal(v.allowed, false, `${text(a)} (end of ${row.cidr}) is blocked`);
    }
    for (const n of [neighbour(first, -1), neighbour(last, 1)]) {
      if (n === null) continue;
      const v = classifyAddress(n, NONE);
      t.not(v.allowed ? null : v.range, row.cidr, `${n} (outside ${row.cidr}) is not judged by it`);
    }
  }
});

t.test(
  'every overridable row opens with allow_addresses; link-local, NAT64 local-use and metadata rows never do',
  async (t) => {
    const WIDE = ['0.0.0.0/0', '::/0'];
    for (const row of ADDRESS_TABLE) {
      const [first, last] = ends(row.cidr);
      for (const a of [first, last]) {
        for (const allow of [[row.cidr], WIDE]) {
          const v = classifyAddress(text(a), allow);
          // 2001:: (start of 2001::/23) is Teredo: judged by its client, not the row.
          if (v.judgedAs !== text(a)) continue;
          if (row.overridable)
            t.equal(v.reason, 'allowed_by_credential', `${text(a)} with ${allow.join(', ')} allowed`);
          else
            t.match(
              v,
              { allowed: false, reason: mostSpecificReason(text(a)) },
              `${text(a)} stays blocked with ${allow.join(', ')} allowed`,
            );
        }
      }
    }
    t.same(
      [...new Set(ADDRESS_TABLE.filter((r) => !r.overridable).map((r) => r.reason))].sort(),
      ['link_local', 'metadata', 'nat64_local'],
      'only link-local, NAT64 local-use and metadata rows are not overridable',
    );
    // Every address of link-local, whatever allow_addresses says.
    for (const a of [
      '169.254.0.1',
      '169.254.0.23',
      '169.254.42.42',
      '169.254.170.23',
      '169.254.254.254',
      'fe80::1',
      'fe80::a9fe:a9fe',
      'febf::1',
      '64:ff9b:1::a9fe:a9fe',
      '64:ff9b:1:abcd::1',
      'fd20:ce::254',
    ]) {
      t.equal(classifyAddress(a, WIDE).allowed, false, `${a} is blocked with every address allowed`);
    }
  },
);

// The reason the most specific row gives an address (no allow list).
function mostSpecificReason(a: string): string {
  const v = classifyAddress(a, NONE);
  return v.allowed ? 'public' : v.reason;
}

t.test('IPv6: only global unicast 2000::/3 is public', async (t) => {
  // One address in each /16; none of these second hextets is special.
  let wrong = 0;
  for (let h = 0; h <= 0xffff; h++) {
    const address = `${h.toString(16)}:1234::1`;
    const expected = h >= 0x2000 && h <= 0x3fff;
    if (classifyAddress(address, NONE).allowed !== expected) {
      wrong += 1;
      if (wrong < 10) t.fail(`${address}: expected ${expected ? 'public' : 'blocked'}`);
    }
  }
  t.equal(wrong, 0);
});

t.test('allow_addresses parsed once per list, and again when the list changed in place', async (t) => {
  const allow = ['10.0.0.0/8'];
  t.equal(classifyAddress('10.1.2.3', allow).allowed, true, 'covered');
  t.equal(classifyAddress('10.1.2.3', allow).allowed, true, 'covered, from the parsed list');
  allow[0] = '192.168.0.0/16';
  t.equal(classifyAddress('10.1.2.3', allow).allowed, false, 'no longer covered once the entry changed');
  t.equal(classifyAddress('192.168.4.5', allow).allowed, true, 'the new entry covers');
  allow.push('10.1.0.0/16');
  t.equal(classifyAddress('10.1.2.3', allow).allowed, true, 'an entry added in place is seen');
  t.equal(classifyAddress('10.1.2.3', ['10.1.0.0/16']).allowed, true, 'another array with the same text');
  t.equal(classifyAddress('10.1.2.3', []).allowed, false, 'an empty list covers nothing');
});
