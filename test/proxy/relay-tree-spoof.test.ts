// `postern run` serves a connection only from a process of CMD's tree,
// found through /proc/net/tcp (client-pid.ts). It matched the connection to
// a row by its ports alone: a process outside the tree that read the run's
// token (CMD's /proc/<pid>/environ, to its own uid) and the port of one of
// CMD's connections to the relay (/proc/net/tcp is world-readable) could
// connect from 127.0.0.N with that port (another 4-tuple, which the kernel
// allows) and be served as CMD, the secret injected. Every such connection
// is refused 403 denied_peer.
import t from 'tap';
import net from 'node:net';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { startRelayStack, basic } from '../helpers/relay-cmd';

t.test('an outsider reusing an in-tree connection port from another loopback address is refused', async (t) => {
  const p = await startRelayStack();
  t.teardown(() => p.close());
  const target = `api.example.test:${p.s.up.port}`;
  // CMD opens a CONNECT tunnel through the relay and keeps it open.
  const local = await p.inCmd<number>(`
    const proxy = new URL(env.HTTPS_PROXY);
    const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
    const c = net.connect(Number(proxy.port), '127.0.0.1');
    state.held = c;
    await new Promise((r) => c.on('connect', r));
    c.write('CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n');
    const head = await new Promise((r) => { let b = ''; c.on('data', (d) => { b += d; if (b.includes('\\r\\n\\r\\n')) r(b); }); });
    if (!head.startsWith('HTTP/1.1 200')) throw new Error('tunnel refused: ' + head);
    return c.localPort;
  `);
  t.ok(local > 0, `CMD holds a tunnel from local port ${local}`);
  // The outsider finds the port the same way any process can.
  const rows = readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .filter((l) => l.includes(`:${p.port.toString(16).toUpperCase().padStart(4, '0')} `));
  t.ok(rows.length > 0, 'the relay connection is visible in /proc/net/tcp');

  const results: string[] = [];
  let served = 0;
  let servedBody = '';
  for (let n = 2; n <= 25; n++) {
    const r = await new Promise<{ status: string; body: string }>((resolve) => {
      const c = net.connect({ port: p.port, host: '127.0.0.1', localAddress: `127.0.0.${n}`, localPort: local });
      let got = '';
      const timer = setTimeout(() => {
        c.destroy();
        resolve({ status: 'timeout', body: got });
      }, 8000);
      c.on('error', (e) => {
        clearTimeout(timer);
        resolve({ status: 'error ' + String(e), body: got });
      });
      c.on('connect', () =>
        c.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: ${basic(p.token)}\r\n\r\n`),
      );
      const onData = (d: Buffer): void => {
        got += d.toString('latin1');
        if (!got.includes('\r\n\r\n')) return;
        c.off('data', onData);
        if (!got.startsWith('HTTP/1.1 200')) {
          clearTimeout(timer);
          c.destroy();
          resolve({ status: got.split('\r\n')[0]!, body: got });
          return;
        }
        // Tunnel granted to an outsider: use the placeholder through it.
        const s = tls.connect({ socket: c, servername: 'api.example.test', ca: readFileSync(p.env['SSL_CERT_FILE']!) });
        let resp = '';
        s.on('secureConnect', () =>
          s.write(
            `GET /v1/x HTTP/1.1\r\nHost: ${target}\r\nAuthorization: Bearer ${p.placeholder}\r\nConnection: close\r\n\r\n`,
          ),
        );
        s.on('data', (x: Buffer) => (resp += x.toString('latin1')));
        s.on('error', () => undefined);
        s.on('close', () => {
          clearTimeout(timer);
          resolve({ status: 'tunnel 200; inner: ' + resp.split('\r\n')[0], body: resp });
        });
      };
      c.on('data', onData);
    });
    results.push(`127.0.0.${n}:${local} -> ${r.status}`);
    if (r.status.startsWith('tunnel')) {
      served++;
      servedBody = r.body;
    }
  }
  t.comment(results.join('\n'));
  t.equal(
    served,
    0,
    `no outsider connection may be served (served ${served}/24); one inner answer: ${servedBody.slice(0, 600)}`,
  );
  t.notOk(servedBody.includes(p.s.secret), 'the secret never reaches the outsider');
});
