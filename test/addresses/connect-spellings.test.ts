// Random spellings of IP addresses as the target of a CONNECT on the agent
// socket (SPEC §11, §6.2): with no credential for the host and
// `proxy.other_hosts = "tunnel"` (the default), the daemon resolves the host
// and tunnels to it only if §6.2's table allows the address. The spellings
// of host-spellings.test.ts (../helpers/address-spellings.ts), in a network
// namespace with only `lo`: 11.0.0.1 stands for a public address (an echo
// peer listens there), echo peers listen on 127.0.0.1 and ::1, every other
// address is unreachable. Invariants, against the readings of WHATWG URL,
// inet_aton and getaddrinfo:
// - a host some parser reads as an address the IANA oracle blocks is
//   refused (`403 denied_address` or `400 bad_request`), never tunnelled
//   and never tried (no 502: a try to 10.0.0.1 here fails as unreachable);
// - a tunnel (200) is opened only for a host read as 11.0.0.1, and it
//   reaches the public peer: the loopback peers see no connection, every
//   `proxy_tunnel` entry of the journal names 11.0.0.1;
// the same for absolute-form `http://` requests (every other case), which
// for a host no credential covers are sent as they are, journaled as
// `http_intent` with their address;
// - every CONNECT gets an answer; the daemon lives.
import t from 'tap';
import net from 'node:net';
import { journalEntriesWhen } from '../helpers/canary';
import { startOfflineNetwork, unlockedDaemonInNetns } from '../helpers/netns';
import { Gen, judge, prng, fuzzSeed } from '../helpers/address-oracle';
import { canon, makeCases, readings } from '../helpers/address-spellings';

const SEED = fuzzSeed();
const CASES = 400;
const PUBLIC = '11.0.0.1';
// The public address three times over, so enough of its spellings are read
// as it (most spellings are refused as not canonical).
const V4_TARGETS = ['127.0.0.1', '10.0.0.1', '169.254.169.254', '0.0.0.0', '192.168.0.1', '100.100.100.200'].concat(
  Array(3).fill(PUBLIC),
);
const V6_TARGETS = ['::1', '::ffff:7f00:1', 'fe80::1', 'fd00:ec2::254', '64:ff9b::a00:1'];

// The CONNECT's answer head: status and x-postern-error, or how it ended.
function ask(
  sock: string,
  authority: string,
  form: 'connect' | 'absolute',
): Promise<{ status: number | null; code: string | null }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    let got = Buffer.alloc(0);
    const done = (status: number | null, code: string | null): void => {
      clearTimeout(timer);
      c.destroy();
      resolve({ status, code });
    };
    const timer = setTimeout(() => done(null, 'no answer in 10 s'), 10_000);
    const line = form === 'connect' ? `CONNECT ${authority}` : `GET http://${authority}/spelled`;
    c.on('connect', () => c.write(`${line} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`, 'utf8'));
    c.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = got.subarray(0, end).toString('latin1');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? NaN);
      done(status, /\r\nx-postern-error: ([a-z_]+)/i.exec(head)?.[1] ?? null);
    });
    c.on('error', () => done(null, 'closed without an answer'));
    c.on('close', () => done(null, 'closed without an answer'));
  });
}

t.test(`random address spellings as CONNECT and absolute-form targets (seed ${SEED})`, async (t) => {
  const g = new Gen(prng(SEED));
  const cases = makeCases(g, CASES, V4_TARGETS, V6_TARGETS);
  const read = readings(cases.map((c) => c.host));

  const n = await startOfflineNetwork({
    addresses: [`${PUBLIC}/32`],
    peers: [
      { name: 'public', behaviour: 'echo', host: PUBLIC },
      { name: 'local', behaviour: 'echo', host: '127.0.0.1' },
      { name: 'local6', behaviour: 'echo', host: '::1' },
    ],
    records: {},
  });
  t.teardown(() => n.close());
  const { h, d, sock } = await unlockedDaemonInNetns(
    t,
    n,
    () => `[daemon]\n[http]\ndns_servers = ["127.0.0.1:${n.dnsPort}"]\ntimeout = "3s"\n`,
  );
  // The port a misdirected tunnel would find open.
  const portFor = (target: string): number =>
    target === '::1' ? n.ports['local6']! : target === PUBLIC ? n.ports['public']! : n.ports['local']!;

  const failures: unknown[] = [];
  const tally: Record<string, number> = {};
  let tunnels = 0; // CONNECTs answered 200
  let forwarded = 0; // absolute-form requests answered 200
  for (const [i, c] of cases.entries()) {
    const readings = read[i]!;
    const port = portFor(c.target);
    const form = i % 2 === 0 ? 'connect' : 'absolute';
    const { status, code } = await ask(sock, `${c.host}:${port}`, form);
    const outcome = `${form} ${status === 200 ? 'served' : (code ?? `status ${status}`)}`;
    tally[outcome] = (tally[outcome] ?? 0) + 1;
    const blocked = [...readings.values()].filter((a) => judge(a, []).verdict === 'must_block');
    const row = { seed: SEED, host: c.host, port, target: c.target, readings: [...readings.values()], status, code };
    if (status === null) failures.push({ ...row, why: 'no answer' });
    if (status === 200) {
      if (form === 'connect') tunnels += 1;
      else forwarded += 1;
      if (!readings.has(canon(PUBLIC))) failures.push({ ...row, why: 'served, but no parser reads 11.0.0.1' });
    }
    if (blocked.length > 0 && !(code === 'denied_address' || code === 'bad_request'))
      failures.push({ ...row, blocked, why: 'a host read as a blocked address was not refused before connecting' });
  }
  t.same(
    failures.slice(0, 20),
    [],
    `${failures.length} of ${cases.length} spellings break an invariant (seed ${SEED})`,
  );
  t.comment(`outcomes: ${JSON.stringify(tally)}`);
  const denied = (tally['connect denied_address'] ?? 0) + (tally['absolute denied_address'] ?? 0);
  t.ok(tunnels > 3 && forwarded > 3 && denied > 50, 'public and blocked literals both reached, by both forms');
  const stats = await n.stats();
  t.same(
    { local: stats['local']?.connections, local6: stats['local6']?.connections },
    { local: 0, local6: 0 },
    'the loopback peers saw no connection',
  );
  t.ok((stats['public']?.connections ?? 0) >= tunnels, 'each tunnel reached the public peer');
  t.equal(stats['public']?.requests, forwarded, 'each absolute-form request served reached the public peer');
  t.equal(d.proc.exitCode, null, 'the daemon is alive');

  // Tunnels are journaled as they close.
  const kinds = (all: Record<string, unknown>[], kind: string): Record<string, unknown>[] =>
    all.filter((e) => e['kind'] === kind);
  const entries = await journalEntriesWhen(h, (all) => kinds(all, 'proxy_tunnel').length >= tunnels);
  t.equal(kinds(entries, 'proxy_tunnel').length, tunnels, 'one proxy_tunnel entry a tunnel');
  t.equal(kinds(entries, 'http_intent').length, forwarded, 'one http_intent entry a request served');
  t.same(
    [...new Set([...kinds(entries, 'proxy_tunnel'), ...kinds(entries, 'http_intent')].map((e) => e['address']))],
    [PUBLIC],
    'every tunnel and request went to 11.0.0.1',
  );
});
