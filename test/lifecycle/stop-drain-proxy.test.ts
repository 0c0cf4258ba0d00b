// The stop's drain through the proxy front door: SIGTERM while a
// proxied response streams to a client that does not read, with an idle
// TLS tunnel beside it. The daemon must exit 0 within ~6 s, the journal verify.
import t from 'tap';
import { startRelayStack } from '../helpers/relay-cmd';
import { cli } from '../helpers/postern';

const OPEN = String.raw`
state.tls = async (authority) => {
  const proxy = new URL(env.HTTPS_PROXY);
  const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
  const sock = net.connect(Number(proxy.port), proxy.hostname);
  await new Promise((r) => sock.once('connect', r));
  sock.write('CONNECT ' + authority + ' HTTP/1.1\r\nhost: ' + authority + '\r\nproxy-authorization: Basic ' + auth + '\r\n\r\n');
  await new Promise((r) => { let h = ''; const on = (d) => { h += d.toString('latin1'); if (h.includes('\r\n\r\n')) { sock.off('data', on); r(); } }; sock.on('data', on); });
  const s = tls.connect({ socket: sock, servername: 'api.example.test', ca: fs.readFileSync(env.SSL_CERT_FILE) });
  s.on('error', () => undefined);
  await new Promise((r) => s.once('secureConnect', r));
  const st = { closed: false, got: 0 };
  s.on('close', () => { st.closed = true; });
  return { s, st };
};
return true;
`;

t.test('SIGTERM while a proxied response streams to a client that does not read', async (t) => {
  const r = await startRelayStack();
  t.teardown(() => r.close());
  await r.inCmd(OPEN);
  const A = `api.example.test:${r.s.up.port}`;
  // An idle tunnel, TLS up, no request.
  await r.inCmd(`state.idle = await state.tls(${JSON.stringify(A)}); return true;`);
  // A POST whose echo is ~5 MiB (900 KiB of \x01, JSON-escaped six-fold); never read.
  await r.inCmd(
    `const { s, st } = await state.tls(${JSON.stringify(A)});
     state.big = st; state.bigS = s;
     const body = Buffer.alloc(900 * 1024, 1);
     s.write('POST /big HTTP/1.1\\r\\nhost: ${A}\\r\\nauthorization: Bearer ' + env.GH_TOKEN + '\\r\\ncontent-type: application/octet-stream\\r\\ncontent-length: ' + body.length + '\\r\\n\\r\\n');
     s.write(body);
     s.once('data', (d) => { st.got += d.length; s.pause(); });
     return true;`,
  );
  for (let i = 0; i < 300 && !r.s.up.requests.some((x) => x.url === '/big'); i++)
    await new Promise((res) => setTimeout(res, 20));
  t.ok(
    r.s.up.requests.some((x) => x.url === '/big'),
    'the upstream got the request',
  );
  await new Promise((res) => setTimeout(res, 800));
  const started = Date.now();
  r.s.d.proc.kill('SIGTERM');
  const exit = await Promise.race([r.s.d.exited, new Promise((res) => setTimeout(() => res('hung'), 15_000))]);
  const took = Date.now() - started;
  t.equal(exit, 0, 'exit 0');
  t.ok(took <= 6000, `exited within 6 s (took ${took} ms)`);
  const v = cli(r.s.h, ['audit', 'verify']);
  t.equal(v.code, 0, v.stdout + v.stderr);
  const states = await r.inCmd<{ idle: boolean; big: boolean }>(
    `state.bigS.removeAllListeners('data'); state.bigS.on('data', () => undefined); state.bigS.resume(); for (let i = 0; i < 150 && !(state.idle.st.closed && state.big.closed); i++) await new Promise((res) => setTimeout(res, 20)); return { idle: state.idle.st.closed, big: state.big.closed };`,
  );
  t.same(states, { idle: true, big: true }, 'both tunnels closed by the stop (the paused one once read)');
});
