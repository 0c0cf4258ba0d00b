// One resolution per request (SPEC §6.2), through a real UDP DNS server on
// loopback: what comes back, how many queries it took, and how failures
// become dns_error.
import t, { Test } from 'tap';
import { resolveTarget, ResolveOptions } from '../../daemon/pipeline/resolve';
import { assertAllAllowed } from '../../daemon/pipeline/classify';
import { Refusal } from '../../shared/errors';
import { startDnsServer, zone, AnswerFn, DnsServerHandle } from '../helpers/dns-server';

async function server(t: Test, answer: AnswerFn): Promise<{ dns: DnsServerHandle; opts: ResolveOptions }> {
  const dns = await startDnsServer(answer);
  t.teardown(() => dns.close());
  return { dns, opts: { dnsServers: [{ address: dns.address, port: dns.port, family: 4 }], timeoutMs: 2000 } };
}

function asked(dns: DnsServerHandle): string[] {
  return dns.queries.map((q) => `${q.name} ${q.type}`).sort();
}

async function refusal(t: Test, p: Promise<unknown>, label: string): Promise<Refusal> {
  try {
    await p;
  } catch (e) {
    t.ok(e instanceof Refusal, `${label}: a Refusal`);
    return e as Refusal;
  }
  t.fail(`${label}: should have been refused`);
  return new Refusal('internal_error', 'not refused');
}

t.test('A only, AAAA only, both: one A and one AAAA query each', async (t) => {
  const { dns, opts } = await server(
    t,
    zone({
      'v4.test': { A: ['93.184.216.34'], ttl: 120 },
      'v6.test': { AAAA: ['2606:2800:220:1::1'], ttl: 30 },
      'both.test': { A: ['93.184.216.34', '93.184.216.35'], AAAA: ['2606:2800:220:1::1'], ttl: 90 },
    }),
  );

  t.same(await resolveTarget('v4.test', 'name', opts), {
    addresses: [{ address: '93.184.216.34', family: 4 }],
    ttl: 120,
    source: 'dns',
  });
  t.same(asked(dns), ['v4.test A', 'v4.test AAAA']);

  dns.queries.length = 0;
  t.same(await resolveTarget('v6.test', 'name', opts), {
    addresses: [{ address: '2606:2800:220:1::1', family: 6 }],
    ttl: 30,
    source: 'dns',
  });
  t.same(asked(dns), ['v6.test A', 'v6.test AAAA']);

  dns.queries.length = 0;
  t.same(
    await resolveTarget('both.test', 'name', opts),
    {
      addresses: [
        { address: '93.184.216.34', family: 4 },
        { address: '93.184.216.35', family: 4 },
        { address: '2606:2800:220:1::1', family: 6 },
      ],
      ttl: 90,
      source: 'dns',
    },
    'A first, then AAAA, in answer order',
  );
  t.same(asked(dns), ['both.test A', 'both.test AAAA']);
});

t.test('a slow answer within the timeout is used', async (t) => {
  const { opts } = await server(t, zone({ 'slow.test': { A: ['93.184.216.34'], delayMs: 150 } }));
  const start = Date.now();
  t.same((await resolveTarget('slow.test', 'name', opts)).addresses, [{ address: '93.184.216.34', family: 4 }]);
  t.ok(Date.now() - start >= 140, 'the server did wait');
});

t.test('duplicates are removed, order kept, the smallest TTL reported', async (t) => {
  const { opts } = await server(t, (name, type) =>
    name === 'dup.test' && type === 'A'
      ? { A: ['198.51.100.7', '93.184.216.34', '198.51.100.7'], ttl: 15 }
      : name === 'dup.test'
        ? { AAAA: ['2001:db8::1', '2001:db8::1'], ttl: 5 }
        : { rcode: 'NXDOMAIN' },
  );
  const r = await resolveTarget('dup.test', 'name', opts);
  t.same(r.addresses, [
    { address: '198.51.100.7', family: 4 },
    { address: '93.184.216.34', family: 4 },
    { address: '2001:db8::1', family: 6 },
  ]);
  t.equal(r.ttl, 5);
});

t.test('a CNAME chain to a private address: the addresses come back for the caller to classify', async (t) => {
  const { dns, opts } = await server(
    t,
    zone({
      'alias.test': { CNAME: 'mid.test' },
      'mid.test': { CNAME: 'internal.test' },
      'internal.test': { A: ['10.0.0.5'], AAAA: ['fd00::5'] },
    }),
  );
  const r = await resolveTarget('alias.test', 'name', opts);
  t.same(r.addresses, [
    { address: '10.0.0.5', family: 4 },
    { address: 'fd00::5', family: 6 },
  ]);
  t.same(asked(dns), ['alias.test A', 'alias.test AAAA'], 'the chain came in the answer: no query for the targets');
  t.throws(
    () =>
      assertAllAllowed(
        'alias.test',
        r.addresses.map((a) => a.address),
        [],
      ),
    { code: 'denied_address', message: /alias\.test resolves to 10\.0\.0\.5, fd00::5.*address 10\.0\.0\.5 is private/ },
  );
});

t.test('NXDOMAIN, SERVFAIL, REFUSED, no records: dns_error naming the host', async (t) => {
  const { dns, opts } = await server(
    t,
    zone({
      'broken.test': { rcode: 'SERVFAIL' },
      'refused.test': { rcode: 'REFUSED' },
      'empty.test': {}, // exists, no A or AAAA (NODATA for both)
      'split.test': (type) => (type === 'A' ? { rcode: 'NXDOMAIN' } : { AAAA: ['2606:2800:220:1::1'] }),
      'dangling.test': { CNAME: 'gone.test' },
    }),
  );
  const cases: [string, RegExp, string][] = [
    [
      'nope.test',
      /^could not resolve nope\.test: the name does not exist \(NXDOMAIN\); check the host name in the URL$/,
      'ENOTFOUND',
    ],
    ['broken.test', /^could not resolve broken\.test: the DNS server reported a failure \(SERVFAIL\)/, 'ESERVFAIL'],
    [
      'refused.test',
      /^could not resolve refused\.test: the DNS server refused the query; check http\.dns_servers/,
      'EREFUSED',
    ],
    ['empty.test', /^could not resolve empty\.test: the name has no A or AAAA records/, 'ENODATA'],
    // One family says the name does not exist, the other has an address:
    // contradictory answers are refused, not half-believed.
    ['split.test', /^could not resolve split\.test: the name does not exist \(NXDOMAIN\)/, 'ENOTFOUND'],
    ['dangling.test', /^could not resolve dangling\.test: the name does not exist \(NXDOMAIN\)/, 'ENOTFOUND'],
  ];
  for (const [host, message, code] of cases) {
    dns.queries.length = 0;
    const r = await refusal(t, resolveTarget(host, 'name', opts), host);
    t.equal(r.code, 'dns_error', host);
    t.equal(r.status, 502, host);
    t.match(r.message, message, host);
    t.same(r.detail, { host, dns_code: code }, host);
    t.same(asked(dns), [`${host} A`, `${host} AAAA`], `${host}: one query per type, no retry`);
  }
});

t.test('a silent server: dns_error within the timeout, after one query per type', async (t) => {
  const { dns, opts } = await server(t, zone({ 'silent.test': { drop: true } }));
  const start = Date.now();
  const r = await refusal(t, resolveTarget('silent.test', 'name', { ...opts, timeoutMs: 300 }), 'silent');
  const elapsed = Date.now() - start;
  t.equal(r.code, 'dns_error');
  t.match(
    r.message,
    /^could not resolve silent\.test: no answer within 300 ms from DNS server 127\.0\.0\.1:\d+; check the network and http\.dns_servers/,
  );
  t.ok(elapsed >= 280, `waited for the timeout (${elapsed} ms)`);
  t.ok(elapsed < 300 + 250, `and not much longer (${elapsed} ms)`);
  await new Promise((r) => setTimeout(r, 400));
  t.same(asked(dns), ['silent.test A', 'silent.test AAAA'], 'one query per type, none sent after giving up');
});

t.test('the timeout bounds the whole resolution, however many servers are listed', async (t) => {
  // c-ares alone would give each silent server the full timeout in turn
  // (about 1 s here); the resolution gives up at timeoutMs.
  const one = await server(t, zone({ 'silent.test': { drop: true } }));
  const two = await server(t, zone({ 'silent.test': { drop: true } }));
  const start = Date.now();
  const r = await refusal(
    t,
    resolveTarget('silent.test', 'name', {
      dnsServers: [...one.opts.dnsServers, ...two.opts.dnsServers],
      timeoutMs: 400,
    }),
    'two silent servers',
  );
  const elapsed = Date.now() - start;
  t.equal(r.code, 'dns_error');
  t.match(r.message, /no answer within 400 ms from DNS server 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+;/);
  t.ok(elapsed >= 380 && elapsed < 400 + 250, `gave up at the timeout (${elapsed} ms)`);
  t.same(asked(one.dns), ['silent.test A', 'silent.test AAAA']);
  t.same(asked(two.dns), [], 'the second server was not reached within the budget');
});

t.test('one family failing while the other answers: the answered addresses are used', async (t) => {
  const { dns, opts } = await server(
    t,
    zone({
      'v6slow.test': (type) => (type === 'A' ? { A: ['93.184.216.34'] } : { drop: true }),
      'v6fail.test': (type) => (type === 'A' ? { A: ['93.184.216.34'] } : { rcode: 'SERVFAIL' }),
      'v4fail.test': (type) => (type === 'A' ? { rcode: 'SERVFAIL' } : { AAAA: ['2606:2800:220:1::1'] }),
      'v4nodata.test': { AAAA: ['2606:2800:220:1::1'] },
    }),
  );
  const start = Date.now();
  const slow = await resolveTarget('v6slow.test', 'name', { ...opts, timeoutMs: 300 });
  t.ok(Date.now() - start < 300 + 250, 'bounded by the timeout');
  t.same(slow.addresses, [{ address: '93.184.216.34', family: 4 }]);
  t.same(slow.unanswered, [{ family: 6, code: 'ETIMEOUT' }]);

  t.same((await resolveTarget('v6fail.test', 'name', opts)).unanswered, [{ family: 6, code: 'ESERVFAIL' }]);
  const v4fail = await resolveTarget('v4fail.test', 'name', opts);
  t.same(v4fail.addresses, [{ address: '2606:2800:220:1::1', family: 6 }]);
  t.same(v4fail.unanswered, [{ family: 4, code: 'ESERVFAIL' }]);
  t.equal(
    (await resolveTarget('v4nodata.test', 'name', opts)).unanswered,
    undefined,
    'NODATA is an answer, not a failure',
  );
  t.equal(dns.queries.length, 8, 'one A and one AAAA query per resolution');
});

t.test('every resolution asks once; a rebinding name is caught on the resolution that sees it', async (t) => {
  // Public first, then loopback, with TTL 0: the classic rebinding answer.
  const { dns, opts } = await server(
    t,
    zone({
      'rebind.test': (type, count) =>
        type === 'A' ? { A: [count === 1 ? '93.184.216.34' : '127.0.0.1'], ttl: 0 } : { ttl: 0 },
    }),
  );
  const first = await resolveTarget('rebind.test', 'name', opts);
  t.same(first.addresses, [{ address: '93.184.216.34', family: 4 }]);
  t.equal(first.ttl, 0);
  t.same(asked(dns), ['rebind.test A', 'rebind.test AAAA'], 'one resolution, one query per type');
  t.same(
    assertAllAllowed(
      'rebind.test',
      first.addresses.map((a) => a.address),
      [],
    ).map((v) => v.reason),
    ['public'],
  );

  const second = await resolveTarget('rebind.test', 'name', opts);
  t.same(
    second.addresses,
    [{ address: '127.0.0.1', family: 4 }],
    'nothing cached: the second request sees the new answer',
  );
  t.equal(dns.queries.length, 4);
  t.throws(
    () =>
      assertAllAllowed(
        'rebind.test',
        second.addresses.map((a) => a.address),
        [],
      ),
    { code: 'denied_address', message: /address 127\.0\.0\.1 is loopback/ },
  );
});

t.test('IP literals and localhost resolve to themselves without a query', async (t) => {
  const { dns, opts } = await server(t, zone({ localhost: { A: ['93.184.216.34'] } }));
  t.same(await resolveTarget('93.184.216.34', 'ipv4', opts), {
    addresses: [{ address: '93.184.216.34', family: 4 }],
    source: 'literal',
  });
  t.same(await resolveTarget('[2001:db8::1]', 'ipv6', opts), {
    addresses: [{ address: '2001:db8::1', family: 6 }],
    source: 'literal',
  });
  t.same(await resolveTarget('::ffff:127.0.0.1', 'ipv6', opts), {
    addresses: [{ address: '::ffff:127.0.0.1', family: 6 }],
    source: 'literal',
  });
  const loop = [
    { address: '127.0.0.1', family: 4 },
    { address: '::1', family: 6 },
  ];
  t.same(await resolveTarget('localhost', 'name', opts), { addresses: loop, source: 'localhost' });
  t.same(await resolveTarget('app.localhost', 'name', opts), { addresses: loop, source: 'localhost' });
  t.same(dns.queries, [], 'no query was sent');

  for (const [host, kind] of [
    ['example.com', 'ipv4'],
    ['127.1', 'ipv4'],
    ['::1', 'ipv4'],
    ['10.0.0.1', 'ipv6'],
    ['[fe80::1%eth0]', 'ipv6'],
    ['10.0.0.1', 'name'],
    ['[::1]', 'name'],
  ] as const) {
    await t.rejects(resolveTarget(host, kind, opts), TypeError, `${host} as ${kind} is a caller bug`);
  }
});

t.test('an unreachable DNS server, and falling back to the next listed one', async (t) => {
  const gone = await startDnsServer(zone({}));
  const port = gone.port;
  await gone.close(); // nothing listens there now: ICMP port unreachable
  const dead = { address: '127.0.0.1', port, family: 4 as const };

  const r = await refusal(t, resolveTarget('app.test', 'name', { dnsServers: [dead], timeoutMs: 2000 }), 'dead server');
  t.equal(r.code, 'dns_error');
  t.match(
    r.message,
    /^could not resolve app\.test: the DNS server could not be reached \(connection refused\); check http\.dns_servers/,
  );

  const { dns, opts } = await server(t, zone({ 'app.test': { A: ['93.184.216.34'] } }));
  const ok = await resolveTarget('app.test', 'name', { ...opts, dnsServers: [dead, ...opts.dnsServers] });
  t.same(ok.addresses, [{ address: '93.184.216.34', family: 4 }]);
  t.same(asked(dns), ['app.test A', 'app.test AAAA']);
});
