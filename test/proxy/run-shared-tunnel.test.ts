// A tunnel whose socket two processes of CMD's tree hold: CMD connected,
// then passed the socket to a child (as a forked worker inherits it)
// before sending its CONNECT, so the relay saw the child as the holder (the
// deepest one uses it, usually). The child exits; CMD goes on using the
// tunnel. Expected: served, since a process of CMD's tree still holds the
// connection. The other side of the rule (run-detached-tunnel): a holder
// that left the tree, with no process of the tree holding the connection,
// is refused.
import t from 'tap';
import { startRelayStack } from '../helpers/relay-cmd';

t.test('a tunnel shared with a child that exits is still served to CMD', async (t) => {
  const p = await startRelayStack();
  t.teardown(() => p.close());
  const target = `api.example.test:${p.s.up.port}`;
  const out = await p.inCmd<{ first: string; second: string; childGone: boolean }>(
    `
    const { spawn } = require('node:child_process');
    const proxy = new URL(env.HTTPS_PROXY);
    const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
    const c = net.connect(Number(proxy.port), '127.0.0.1');
    await new Promise((r) => c.once('connect', r));
    // The child holds the same socket (as fd 3) and exits after a second.
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 1000)'], { stdio: ['ignore', 'ignore', 'ignore', c._handle.fd] });
    const childExit = new Promise((r) => child.on('exit', r));
    c.write('CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n');
    let head = '';
    await new Promise((r) => { const on = (d) => { head += d; if (head.includes('\\r\\n\\r\\n')) { c.off('data', on); r(); } }; c.on('data', on); });
    const s = tls.connect({ socket: c, servername: 'api.example.test', ca: fs.readFileSync(env.SSL_CERT_FILE) });
    await new Promise((r) => s.once('secureConnect', r));
    let buf = '';
    let closed = false;
    s.on('data', (d) => (buf += d));
    s.on('close', () => (closed = true));
    const ask = async (path) => {
      buf = '';
      s.write('GET ' + path + ' HTTP/1.1\\r\\nHost: ${target}\\r\\nAuthorization: Bearer ' + env.GH_TOKEN + '\\r\\n\\r\\n');
      for (let i = 0; i < 100 && !closed && !/\\r\\n\\r\\n/.test(buf); i++) await new Promise((r) => setTimeout(r, 50));
      return closed && !buf ? 'CLOSED' : buf.split('\\r\\n')[0];
    };
    const first = await ask('/while-both-hold-it');
    await childExit;
    const second = await ask('/after-the-child-exited');
    s.destroy();
    return { first, second, childGone: child.exitCode !== null };
  `,
    30_000,
  );
  t.equal(out.first, 'HTTP/1.1 200 OK', 'served while both hold it');
  t.ok(out.childGone, 'control: the child has exited');
  t.equal(out.second, 'HTTP/1.1 200 OK', 'still served to CMD after the child exited');
  const seen = p.s.up.requests.map((r) => r.url);
  t.same(seen.slice(-2), ['/while-both-hold-it', '/after-the-child-exited']);
  t.notMatch(p.stderr(), /no longer a process CMD started/, 'run did not report the connection as left');
});
