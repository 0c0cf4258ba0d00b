// Upstream connection pooling through the real daemon (SPEC §6.2):
// connections are HTTP/1.1 and pooled per (credential, requester, origin,
// checked address). Sequential requests with one credential reuse one connection;
// two credentials never share one, even under concurrency; a name that now
// resolves to another address gets a new connection to that address; a lock
// closes every connection, and a credential update closes that
// credential's connections and no other's. Counted at a real HTTPS upstream
// that listens on every loopback address and offers h2 as well.
import t from 'tap';
import net from 'node:net';
import tls from 'node:tls';
import { createServer as createHttpsServer } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startStack } from '../helpers/stack';
import { cli, eventually } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

interface Conn {
  remotePort: number;
  localAddress: string;
  alpn: string | false | null;
  closed: boolean;
}

interface Seen {
  url: string;
  remotePort: number;
  localAddress: string;
  httpVersion: string;
  authorization: string;
}

async function loopbackUpstream(
  key: string,
  cert: string,
): Promise<{ port: number; conns: Map<number, Conn>; seen: Seen[]; close(): Promise<void> }> {
  const server = createHttpsServer({ key, cert, ALPNProtocols: ['h2', 'http/1.1'] });
  server.keepAliveTimeout = 60_000; // idle connections stay for the whole test
  const conns = new Map<number, Conn>();
  const sockets = new Set<net.Socket>();
  const seen: Seen[] = [];
  server.on('secureConnection', (s: tls.TLSSocket) => {
    const c: Conn = { remotePort: s.remotePort!, localAddress: s.localAddress!, alpn: s.alpnProtocol, closed: false };
    conns.set(c.remotePort, c);
    sockets.add(s);
    s.on('close', () => {
      c.closed = true;
      sockets.delete(s);
    });
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      seen.push({
        url: req.url ?? '',
        remotePort: req.socket.remotePort!,
        localAddress: req.socket.localAddress!,
        httpVersion: req.httpVersion,
        authorization: String(req.headers['authorization']),
      });
      const reply = (): void => {
        const text = JSON.stringify({ port: req.socket.remotePort });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (req.url?.startsWith('/slow')) setTimeout(reply, 300);
      else reply();
    });
  });
  await new Promise<void>((r) => server.listen(0, '0.0.0.0', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    conns,
    seen,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

t.test('connections: HTTP/1.1, per credential and address, closed on lock and update', async (t) => {
  let address = '127.0.0.1';
  const s = await startStack({ records: { 'api.example.test': () => ({ A: [address] }) } });
  t.teardown(() => s.close());
  const up = await loopbackUpstream(s.ca.key, s.ca.cert);
  t.teardown(() => up.close());
  const secretA = makeCanary('ALPHA');
  const secretB = makeCanary('BETA');
  const def = (name: string): string =>
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.0/8"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${up.port}]\n`;
  s.addCredential('alpha', def('alpha'), secretA);
  s.addCredential('beta', def('beta'), secretB);
  await s.approver();

  const authOf = { alpha: `Bearer ${secretA}`, beta: `Bearer ${secretB}` };
  const texts: string[] = [];
  const get = async (
    credential: 'alpha' | 'beta',
    path: string,
  ): Promise<{ status: number; address: string; port: number }> => {
    const r = await s.request({ credential, method: 'GET', url: `https://api.example.test:${up.port}${path}` });
    texts.push(r.text);
    if (r.status !== 200) throw new Error(`${credential} ${path}: ${r.text}`);
    const j = r.json as { status: number; body: string; target: { address: string } };
    return { status: j.status, address: j.target.address, port: (JSON.parse(j.body) as { port: number }).port };
  };
  const portsOf = (credential: 'alpha' | 'beta'): Set<number> =>
    new Set(up.seen.filter((x) => x.authorization === authOf[credential]).map((x) => x.remotePort));
  const openOf = (credential: 'alpha' | 'beta'): number[] =>
    [...portsOf(credential)].filter((p) => up.conns.get(p)?.closed === false);
  // The connections accepted so far, as objects: the kernel may give a new
  // connection the port of one that was reset, so a port alone does not
  // tell an old connection from a new one.
  const accepted = (): Set<Conn> => new Set(up.conns.values());

  await t.test('sequential requests with one credential reuse one connection', async (t) => {
    const ports = new Set<number>();
    for (let i = 0; i < 5; i++) ports.add((await get('alpha', `/a/${i}`)).port);
    t.equal(ports.size, 1, 'one connection carried all five');
    t.equal(up.conns.size, 1, 'the upstream accepted one connection');
  });

  await t.test('two credentials to the same origin never share a connection', async (t) => {
    for (let i = 0; i < 3; i++) {
      await get('beta', `/b/${i}`);
      await get('alpha', `/a2/${i}`);
    }
    t.equal(portsOf('alpha').size, 1, 'alpha kept its connection');
    t.equal(portsOf('beta').size, 1, 'beta has its own');
    t.notOk(
      [...portsOf('beta')].some((p) => portsOf('alpha').has(p)),
      'no connection carried both',
    );
    t.equal(up.conns.size, 2);
    // Concurrent: several connections per credential, still never shared.
    await Promise.all([0, 1, 2].flatMap((i) => [get('alpha', `/slow/a${i}`), get('beta', `/slow/b${i}`)]));
    t.ok(portsOf('alpha').size >= 2 && portsOf('beta').size >= 2, 'concurrency opened more connections');
    t.notOk(
      [...portsOf('beta')].some((p) => portsOf('alpha').has(p)),
      'still no connection carried both',
    );
  });

  await t.test('a new address for the name: a new connection, to that address', async (t) => {
    const before = accepted();
    address = '127.0.0.2';
    const r = await get('alpha', '/moved');
    t.equal(r.address, '127.0.0.2', 'the reply names the new checked address');
    const seen = up.seen.at(-1)!;
    t.equal(seen.localAddress, '127.0.0.2', 'the connection went to the new address');
    t.notOk(before.has(up.conns.get(seen.remotePort)!), 'not an old connection');
    const again = await get('alpha', '/moved2');
    t.equal(again.port, r.port, 'the new address has its own reused connection');
    address = '127.0.0.1';
    await get('alpha', '/back');
    t.equal(up.seen.at(-1)!.localAddress, '127.0.0.1', 'back to the first address');
  });

  await t.test('lock closes every connection; after unlock new ones are opened', async (t) => {
    const open = [...up.conns.values()].filter((c) => !c.closed);
    t.ok(open.length >= 2, `${open.length} connections open before the lock`);
    t.equal(cli(s.h, ['lock']).code, 0);
    t.ok(await eventually(() => open.every((c) => c.closed), 5000), 'all closed by the lock');
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    t.equal(u.code, 0, u.stderr);
    const known = accepted();
    const r = await get('alpha', '/after-lock');
    t.notOk(known.has(up.conns.get(r.port)!), 'a new connection after unlock');
  });

  await t.test("a credential update closes that credential's connections only", async (t) => {
    await get('alpha', '/pre-a');
    const betaPort = (await get('beta', '/pre-b')).port;
    const alphaOpen = openOf('alpha');
    t.ok(alphaOpen.length >= 1, 'alpha has an open connection');
    t.ok(openOf('beta').includes(betaPort), 'beta has an open connection');
    const u = cli(s.h, [
      'cred',
      'update',
      'alpha',
      '--file',
      s.h.file('alpha2.toml', def('alpha')),
      '--passphrase-file',
      s.h.passFile,
    ]);
    t.equal(u.code, 0, u.stderr);
    t.ok(
      await eventually(() => alphaOpen.every((p) => up.conns.get(p)!.closed), 5000),
      "alpha's connections were closed",
    );
    t.equal(up.conns.get(betaPort)!.closed, false, "beta's connection is still open");
    const known = accepted();
    const a = await get('alpha', '/post-a');
    t.notOk(known.has(up.conns.get(a.port)!), 'alpha opens a new connection');
    const b = await get('beta', '/post-b');
    t.equal(b.port, betaPort, 'beta reuses its connection');
  });

  await t.test('every connection is HTTP/1.1 and carries one credential', async (t) => {
    t.ok(up.seen.length >= 25, `${up.seen.length} requests`);
    t.same([...new Set(up.seen.map((x) => x.httpVersion))], ['1.1']);
    t.notOk(
      [...up.conns.values()].some((c) => c.alpn === 'h2'),
      'h2 was offered and never chosen',
    );
    const creds = new Map<number, Set<string>>();
    for (const x of up.seen) creds.set(x.remotePort, (creds.get(x.remotePort) ?? new Set()).add(x.authorization));
    t.ok(
      [...creds.values()].every((v) => v.size === 1),
      'no connection carried two credentials',
    );
    t.ok(
      [...creds.values()].every((v) => v.has(authOf.alpha) || v.has(authOf.beta)),
      'and each carried a known one',
    );
  });

  await s.d.stop();
  for (const secret of [secretA, secretB]) {
    t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries a secret');
    t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of a secret');
    t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of a secret');
    t.same(findCanary(await journalText(s.h), secret), [], 'nor does any decrypted entry');
  }
});
