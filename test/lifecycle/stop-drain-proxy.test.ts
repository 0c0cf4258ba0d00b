// The stop's drain through the proxy front door: SIGTERM while a
// proxied response streams to a client that does not read, with an idle
// TLS tunnel beside it; and while an upstream has sent half a body and
// stalls. The daemon must exit 0 within ~6 s, the journal verify.
import t, { type Test } from 'tap';
import type { ServerResponse } from 'node:http';
import { startRelayStack, type RelayStack } from '../helpers/relay-cmd';
import { cli } from '../helpers/postern';
import { auditList } from '../helpers/stack';
import { echo } from '../helpers/https-upstream';

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

// SIGTERM: the daemon exits 0 within ~6 s and its journal verifies.
async function stopsWithin6s(t: Test, r: RelayStack): Promise<void> {
  const started = Date.now();
  r.s.d.proc.kill('SIGTERM');
  const exit = await Promise.race([r.s.d.exited, new Promise((res) => setTimeout(() => res('hung'), 15_000))]);
  const took = Date.now() - started;
  t.equal(exit, 0, 'exit 0');
  t.ok(took <= 6000, `exited within 6 s (took ${took} ms)`);
  const v = cli(r.s.h, ['audit', 'verify']);
  t.equal(v.code, 0, v.stdout + v.stderr);
}

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
  await stopsWithin6s(t, r);
  const states = await r.inCmd<{ idle: boolean; big: boolean }>(
    `state.bigS.removeAllListeners('data'); state.bigS.on('data', () => undefined); state.bigS.resume(); for (let i = 0; i < 150 && !(state.idle.st.closed && state.big.closed); i++) await new Promise((res) => setTimeout(res, 20)); return { idle: state.idle.st.closed, big: state.big.closed };`,
  );
  t.same(states, { idle: true, big: true }, 'both tunnels closed by the stop (the paused one once read)');
});

t.test(
  'SIGTERM while an upstream has sent half a body and stalls: the outcome is journaled, the client sees a cut',
  async (t) => {
    const stalled: ServerResponse[] = [];
    const r = await startRelayStack({
      handler: (req, body, res) => {
        if (req.url !== '/stall') return echo(req, body, res);
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100000' });
        res.write('x'.repeat(1000));
        stalled.push(res); // the other 99,000 bytes never come
      },
    });
    t.teardown(async () => {
      for (const x of stalled) x.destroy();
      await r.close();
    });
    await r.inCmd(OPEN);
    const A = `api.example.test:${r.s.up.port}`;
    await r.inCmd(
      `const { s, st } = await state.tls(${JSON.stringify(A)});
     state.st = st; st.text = '';
     s.on('data', (d) => { st.text += d.toString('latin1'); });
     s.write('GET /stall HTTP/1.1\\r\\nhost: ${A}\\r\\nauthorization: Bearer ' + env.GH_TOKEN + '\\r\\n\\r\\n');
     return true;`,
    );
    const got = async (): Promise<{ closed: boolean; text: string }> =>
      r.inCmd(`return { closed: state.st.closed, text: state.st.text };`);
    let seen = await got();
    for (let i = 0; i < 300 && !/x{900}/.test(seen.text); i++) {
      await new Promise((res) => setTimeout(res, 20));
      seen = await got();
    }
    t.match(seen.text, /^HTTP\/1\.1 200 /, 'the head reached the client');
    t.match(seen.text, /x{900}/, 'with the body so far (redaction may hold back its tail)');
    t.equal(stalled.length, 1, 'the upstream is stalled mid-body');

    await stopsWithin6s(t, r);
    for (let i = 0; i < 150 && !seen.closed; i++) {
      await new Promise((res) => setTimeout(res, 20));
      seen = await got();
    }
    t.ok(seen.closed, 'the tunnel is closed');
    const body = seen.text.slice(seen.text.indexOf('\r\n\r\n') + 4);
    t.ok(body.length < 100000, `the client got less than declared (${body.length} bytes)`);
    t.notMatch(seen.text, /\r\n0\r\n\r\n$/, 'and no last chunk: a cut it can see');
    const entries = auditList<{ kind: string; error?: string; maybe_executed?: boolean }>(r.s);
    const outcomes = entries.filter((e) => e.kind === 'http_outcome');
    t.equal(entries.filter((e) => e.kind === 'http_intent').length, 1, 'one intent');
    t.equal(outcomes.length, 1, 'and its outcome');
    t.match(outcomes[0], { error: 'vault_locked', maybe_executed: true }, 'the stop named in it');
  },
);
