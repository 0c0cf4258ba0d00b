// Descriptor exhaustion of `postern run` (run under prlimit --nofile=128)
// by connections that never send a head. Any local process can open them:
// no token is needed to be held HEAD_TIMEOUT_MS (10 s) + LINGER_MS (5 s).
import t from 'tap';
import net from 'node:net';
import { startRelayStack } from '../helpers/relay-cmd';

function flood(port: number, n: number): net.Socket[] {
  const out: net.Socket[] = [];
  for (let i = 0; i < n; i++) {
    const c = net.connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    out.push(c);
  }
  return out;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// CMD's own request: CONNECT, TLS, GET with the placeholder; the status line
// it got (or the error).
const cmdRequest = (target: string): string => `
  const proxy = new URL(env.HTTPS_PROXY);
  const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
  return await new Promise((resolve) => {
    const c = net.connect(Number(proxy.port), '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { c.destroy(); resolve('timeout: ' + got); }, 20000);
    const t0 = Date.now();
    c.on('error', (e) => { clearTimeout(timer); resolve('error: ' + e.code + ' after ' + (Date.now() - t0) + ' ms ' + got); });
    c.on('close', () => { clearTimeout(timer); resolve('closed without an answer after ' + (Date.now() - t0) + ' ms: ' + got); });
    c.on('connect', () => c.write('CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n'));
    const onData = (d) => {
      got += d;
      if (!got.includes('\\r\\n\\r\\n')) return;
      c.off('data', onData);
      c.removeAllListeners('close');
      if (!got.startsWith('HTTP/1.1 200')) { clearTimeout(timer); c.destroy(); resolve('refused: ' + got.slice(0, 600)); return; }
      const s = tls.connect({ socket: c, servername: 'api.example.test', ca: fs.readFileSync(env.SSL_CERT_FILE) });
      let resp = '';
      s.on('secureConnect', () => s.write('GET /v1/x HTTP/1.1\\r\\nHost: ${target}\\r\\nAuthorization: Bearer ' + env.GH_TOKEN + '\\r\\nConnection: close\\r\\n\\r\\n'));
      s.on('data', (x) => (resp += x));
      s.on('error', (e) => { clearTimeout(timer); resolve('tls error: ' + e.code); });
      s.on('close', () => { clearTimeout(timer); resolve('inner: ' + resp.split('\\r\\n')[0]); });
    };
    c.on('data', onData);
  });
`;

// Row "CMD's own connection while outsiders hold idle connections": FAILS
// when a defect is present. Expected: CMD's request is still served (or at
// worst refused with a clear x-postern-error), and `postern run` survives.
t.test('idle connections from an outsider do not starve CMD', async (t) => {
  const p = await startRelayStack({ nofile: 128 });
  t.teardown(() => p.close());
  const target = `api.example.test:${p.s.up.port}`;
  t.match(
    await p.inCmd<string>(cmdRequest(target)),
    /^inner: HTTP\/1.1 200/,
    'control: CMD is served before the flood',
  );
  const held = flood(p.port, 300);
  t.teardown(() => held.forEach((c) => c.destroy()));
  await sleep(1000);
  const r = await p.inCmd<string>(cmdRequest(target));
  t.comment(`CMD during the flood: ${r}`);
  t.match(r, /^inner: HTTP\/1.1 200/, `CMD is still served while outsiders hold idle connections; got: ${r}`);
  t.equal(p.exited(), null, `postern run still running; stderr: ${p.stderr().slice(-1500)}`);
  t.comment(`postern run stderr: ${p.stderr().slice(-800)}`);
});

// Row "crash on a cached socket table at EMFILE": FAILS when a defect is
// present. CMD opens two connections (both accepted), sends its head on the
// first (its lookup reads /proc/net/tcp, covering both), an outsider then
// fills the descriptor table with idle connections, and CMD sends its head
// on the second: its lookup uses the cached table and goes on to
// descendants(), whose readdirSync('/proc') is not guarded. Expected:
// `postern run` keeps running and answers the second connection.
t.test('a lookup while out of descriptors does not end postern run', async (t) => {
  const p = await startRelayStack({ nofile: 128 });
  t.teardown(() => p.close());
  const target = `api.example.test:${p.s.up.port}`;
  await p.inCmd(`
    const proxy = new URL(env.HTTPS_PROXY);
    state.auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
    state.c1 = net.connect(Number(proxy.port), '127.0.0.1');
    state.c2 = net.connect(Number(proxy.port), '127.0.0.1');
    state.c2got = '';
    state.c2.on('data', (d) => (state.c2got += d));
    state.c2.on('error', (e) => (state.c2err = e.code));
    state.c2.on('close', () => (state.c2closed = true));
    await Promise.all([state.c1, state.c2].map((c) => new Promise((r) => c.on('connect', r))));
    await new Promise((r) => setTimeout(r, 200));
    state.c1.write('CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\nProxy-Authorization: Basic ' + state.auth + '\\r\\n\\r\\n');
    const head = await new Promise((r) => { let b = ''; state.c1.on('data', (d) => { b += d; if (b.includes('\\r\\n\\r\\n')) r(b); }); });
    return head.split('\\r\\n')[0];
  `);
  const held = flood(p.port, 300);
  t.teardown(() => held.forEach((c) => c.destroy()));
  await sleep(1000);
  await p.inCmd(`
    state.c2.write('CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\nProxy-Authorization: Basic ' + state.auth + '\\r\\n\\r\\n');
  `);
  const exit = await p.waitExit(3000);
  const c2 = await p
    .inCmd<{ got: string; err?: string; closed?: boolean }>(
      `return { got: state.c2got, err: state.c2err, closed: state.c2closed };`,
    )
    .catch((e) => ({ got: '', err: String(e) }));
  t.comment(`second connection got: ${JSON.stringify(c2).slice(0, 600)}`);
  t.equal(exit, null, `postern run must not exit; exited ${JSON.stringify(exit)}; stderr: ${p.stderr().slice(-2500)}`);
});
