// A CONNECT tunnel that relays (SPEC §11, §6.2), without leaving the
// machine: a network namespace where 11.0.0.1, an address §6.2's table does
// not block, sits on `lo` and serves TLS with a certificate of a throwaway
// CA; the namespace's DNS server answers tunnelled.example.test with it.
// The daemon, `postern run` and curl all run inside the namespace. With no
// credential for the host and `proxy.other_hosts = "tunnel"` (the default),
// curl, trusting the throwaway CA only, gets the upstream's own answer and
// certificate (postern's CA would fail the handshake); the journal holds one
// `proxy_tunnel` entry with the host, port, address and bytes each way; no
// approval was asked (no approver is attached). A name resolving to
// 127.0.0.1 in the same namespace is refused 403 denied_address.
import t from 'tap';
import { spawn } from 'node:child_process';
import { CLI } from '../helpers/postern';
import { journalEntriesWhen } from '../helpers/canary';
import { makeTestCa } from '../helpers/https-upstream';
import { netnsOf, startOfflineNetwork, unlockedDaemonInNetns } from '../helpers/netns';

const PUBLIC = '11.0.0.1';

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

t.test('a tunnel to a public address relays the upstream, byte for byte', async (t) => {
  const ca = makeTestCa(['tunnelled.example.test']);
  t.teardown(() => ca.cleanup());
  const n = await startOfflineNetwork({
    addresses: [`${PUBLIC}/32`],
    peers: [
      { name: 'public', behaviour: 'echo', host: PUBLIC, tls: { key: ca.key, cert: ca.cert } },
      { name: 'local', behaviour: 'echo', tls: { key: ca.key, cert: ca.cert } },
    ],
    records: {
      'tunnelled.example.test': { A: [PUBLIC] },
      'loopback.example.test': { A: ['127.0.0.1'] },
    },
  });
  t.teardown(() => n.close());
  t.equal(await n.probe(PUBLIC, n.ports['public']!), 'connected', 'the public address answers inside the namespace');

  const { h, d } = await unlockedDaemonInNetns(
    t,
    n,
    () => `[daemon]\n[http]\ndns_servers = ["127.0.0.1:${n.dnsPort}"]\ntimeout = "20s"\n`,
  );
  t.equal(netnsOf(d.proc.pid!), netnsOf(n.pid), 'the daemon is in the namespace');

  // `postern run -- curl …` inside the namespace, where the daemon's
  // loopback proxy listener is.
  const run = (url: string): Promise<Ran> =>
    new Promise((resolve) => {
      const argv = n.inNs([
        '/usr/bin/env',
        '-u',
        'NODE_OPTIONS',
        process.execPath,
        CLI,
        'run',
        '--',
        'curl',
        '-sS',
        '-v',
        '--max-time',
        '20',
        '--cacert',
        ca.caFile,
        '-D',
        '-',
        url,
      ]);
      const p = spawn(argv[0]!, argv.slice(1), { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      p.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  const port = n.ports['public']!;
  const a = await run(`https://tunnelled.example.test:${port}/through/the/tunnel?q=1`);
  const what = `${a.stdout}\n${a.stderr}`;
  t.equal(a.code, 0, `postern run -- curl exits 0: ${what}`);
  t.match(a.stdout, /^HTTP\/1\.1 200 Connection Established\r\n/, 'the proxy opened the tunnel');
  t.match(a.stdout, /\r\n\r\nHTTP\/1\.1 200 OK\r\n/, "then the upstream's own 200");
  const body = a.stdout.slice(a.stdout.lastIndexOf('\r\n\r\n') + 4);
  t.same(
    JSON.parse(body),
    { peer: 'public', method: 'GET', url: '/through/the/tunnel?q=1', authorized: false },
    "the upstream's answer, unchanged and with no credential added",
  );
  t.match(a.stderr, /issuer: CN=postern test CA/, "the certificate curl checked is the upstream's own");
  t.notMatch(a.stderr, /x-postern/i, 'nothing of postern inside the tunnel');
  const stats = await n.stats();
  t.same(stats['public'], { connections: 1, requests: 1 }, 'the upstream saw one connection and one request');

  const refused = await run(`https://loopback.example.test:${n.ports['local']}/`);
  t.not(refused.code, 0, 'curl fails on the refused CONNECT');
  t.match(refused.stdout, /^HTTP\/1\.1 403 /, `a name resolving to 127.0.0.1 is refused 403: ${refused.stdout}`);
  t.match(refused.stdout, /\r\nx-postern-error: denied_address\r\n/i, 'as denied_address');
  t.same((await n.stats())['local'], { connections: 0, requests: 0 }, 'the loopback peer saw nothing');

  // The tunnel is journaled when it closes, which may follow curl's exit.
  const entries = await journalEntriesWhen(h, (all) => all.some((e) => e['kind'] === 'proxy_tunnel'));
  const tunnels = entries.filter((e) => e['kind'] === 'proxy_tunnel');
  t.equal(tunnels.length, 1, 'one proxy_tunnel entry: the refused CONNECT opened none');
  const tunnel = tunnels[0]!;
  t.match(tunnel, { host: 'tunnelled.example.test', port, address: PUBLIC }, 'host, port and address');
  t.ok((tunnel['bytes_up'] as number) > 0, `bytes up counted (${String(tunnel['bytes_up'])})`);
  t.ok((tunnel['bytes_down'] as number) > 0, `bytes down counted (${String(tunnel['bytes_down'])})`);
  t.notOk(
    entries.some((e) => e['kind'] === 'approver_attach' || e['kind'] === 'http_intent'),
    'no approver was attached and no request was judged: nothing asked for approval',
  );
  t.ok(
    entries.some(
      (e) =>
        e['kind'] === 'agent_refused' &&
        e['code'] === 'denied_address' &&
        e['endpoint'] === `CONNECT loopback.example.test:${n.ports['local']}`,
    ),
    'the refused CONNECT is journaled as denied_address',
  );
});
