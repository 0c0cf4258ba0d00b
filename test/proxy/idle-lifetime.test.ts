// How long an idle or half-sent connection is held on the agent socket and
// on the proxy front door. docs/design-notes.md (daemon.agent_request_timeout):
// "headers that never come end the connection ... So a slow or idle client
// cannot hold one of max_concurrent's slots or a descriptor for long." With
// the setting at 2 s each connection below is ended by the daemon within a
// 20 s hang guard (no timing is asserted beyond that guard). A CONNECT
// answered and then silent, or half a ClientHello, was held for ever: the
// TLS handshake had no deadline.
import t from 'tap';
import net from 'node:net';
import { startStack } from '../helpers/stack';

const GUARD_MS = 20_000;

// Opens a connection, writes `first`, then nothing; resolves with whether
// the daemon closed it within the guard, and what it said.
function heldFor(sock: string, first: string | Buffer | null): Promise<{ closedByDaemon: boolean; said: string }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    let said = '';
    let done = false;
    const guard = setTimeout(() => {
      done = true;
      c.destroy();
      resolve({ closedByDaemon: false, said });
    }, GUARD_MS);
    c.on('connect', () => {
      if (first !== null) c.write(first);
    });
    c.on('data', (d: Buffer) => (said += d.toString('latin1')));
    c.on('error', () => undefined);
    c.on('close', () => {
      if (done) return;
      clearTimeout(guard);
      resolve({ closedByDaemon: true, said });
    });
  });
}

// The first 40 bytes of a TLS ClientHello record (the rest never sent).
const PARTIAL_CLIENT_HELLO = Buffer.from('16030100f4010000f00303' + '00'.repeat(29), 'hex');

t.test('idle and half-sent connections are ended (agent_request_timeout = 2s)', async (t) => {
  const s = await startStack({ config: 'agent_request_timeout = "2s"' });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\n`,
    'idle-lifetime-secret-0123456789',
  );
  const connect = `CONNECT api.example.test:${s.up.port} HTTP/1.1\r\nHost: api.example.test:${s.up.port}\r\n\r\n`;
  const cases: [string, string | Buffer | null][] = [
    ['agent socket: connected, nothing sent', null],
    ['agent socket: half a request head', 'POST /v1/http HTTP/1.1\r\nhost: postern\r\nx-slow: '],
    ['agent socket: half a CONNECT head', `CONNECT api.example.test:${s.up.port} HTTP/1.1\r\nHost: api`],
    ['proxy: CONNECT answered, then no TLS bytes at all', connect],
    [
      'proxy: CONNECT answered, then half a TLS ClientHello',
      Buffer.concat([Buffer.from(connect), PARTIAL_CLIENT_HELLO]),
    ],
  ];
  const results = await Promise.all(cases.map(([, first]) => heldFor(s.sock, first)));
  cases.forEach(([what], i) => {
    const r = results[i]!;
    t.ok(
      r.closedByDaemon,
      `${what}: ended by the daemon within ${GUARD_MS / 1000} s (it said: ${JSON.stringify(r.said.slice(0, 120))})`,
    );
  });
  t.ok(s.d.proc.exitCode === null, 'the daemon is running');
});
