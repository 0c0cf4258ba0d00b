// A tunnel's first bytes and targets through a real `postern run`: the first
// bytes of a CONNECT tunnel (front-door.ts firstBytes/terminate) and the
// absolute form inside it (proxied.ts tunnelPath). CMD (inside the run)
// speaks raw bytes to the run's proxy.
import t from 'tap';
import { startRelayStack } from '../helpers/relay-cmd';

const SETUP = String.raw`
state.open = async (authority) => {
  const proxy = new URL(env.HTTPS_PROXY);
  const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
  const sock = net.connect(Number(proxy.port), proxy.hostname);
  await new Promise((r, j) => { sock.once('connect', r); sock.once('error', j); });
  const got = { data: Buffer.alloc(0), closedAt: null, ended: false };
  sock.on('data', (d) => { got.data = Buffer.concat([got.data, d]); });
  sock.on('end', () => { got.ended = true; });
  sock.on('close', () => { got.closedAt = Date.now(); });
  sock.on('error', () => undefined);
  sock.write('CONNECT ' + authority + ' HTTP/1.1\r\nhost: ' + authority + '\r\nproxy-authorization: Basic ' + auth + '\r\n\r\n');
  const t0 = Date.now();
  while (got.data.indexOf('\r\n\r\n') < 0 && Date.now() - t0 < 5000 && got.closedAt === null) await new Promise((r) => setTimeout(r, 10));
  const head = got.data.toString('latin1');
  got.data = Buffer.alloc(0);
  return { sock, got, head };
};
state.wait = async (got, ms) => {
  const t0 = Date.now();
  while (got.closedAt === null && Date.now() - t0 < ms) await new Promise((r) => setTimeout(r, 20));
  return { closedAfter: got.closedAt === null ? null : got.closedAt - t0, data: got.data.toString('latin1') };
};
state.tlsRequest = async (authority, servername, request, split) => {
  const { sock, head } = await state.open(authority);
  if (!/^HTTP\/1\.1 200/.test(head)) return { connect: head };
  sock.removeAllListeners('data');
  const ca = fs.readFileSync(env.SSL_CERT_FILE);
  let out = Buffer.alloc(0);
  let under = sock;
  if (split) {
    // the ClientHello arrives one byte first, the rest 300 ms later
    const { Duplex } = require('node:stream');
    let first = true;
    under = new Duplex({
      read() {},
      write(chunk, enc, cb) {
        if (first) {
          first = false;
          sock.write(chunk.subarray(0, 1));
          setTimeout(() => { sock.write(chunk.subarray(1)); cb(); }, 300);
        } else sock.write(chunk, cb);
      },
    });
    sock.on('data', (d) => under.push(d));
    sock.on('end', () => under.push(null));
  }
  const s = tls.connect({ socket: under, servername, ca, ALPNProtocols: ['http/1.1'] });
  s.on('error', () => undefined);
  await new Promise((r, j) => { s.once('secureConnect', r); s.once('error', j); setTimeout(() => j(new Error('handshake timeout')), 8000); });
  s.on('data', (d) => { out = Buffer.concat([out, d]); });
  s.write(request.replace(/PLACEHOLDER/g, env.GH_TOKEN));
  const t0 = Date.now();
  while (Date.now() - t0 < 8000) {
    const txt = out.toString('latin1');
    const i = txt.indexOf('\r\n\r\n');
    const cl = /content-length: (\d+)/i.exec(txt);
    if (i >= 0 && cl && out.length >= i + 4 + Number(cl[1])) break;
    if (i >= 0 && !cl && txt.endsWith('\r\n0\r\n\r\n')) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  s.destroy();
  return { answer: out.toString('latin1') };
};
return true;
`;

t.test('first bytes in a tunnel; absolute form inside it', async (t) => {
  const r = await startRelayStack();
  t.teardown(() => r.close());
  await r.inCmd(SETUP);
  const up = r.s.up.port;
  const A = `api.example.test:${up}`;
  const status = (x: string | undefined) => Number(/^HTTP\/1\.1 (\d{3})/.exec(x ?? '')?.[1] ?? 0);

  await t.test('plain HTTP in the tunnel: 400 bad_request in plain HTTP', async (t) => {
    const v = await r.inCmd<{ head: string; after: { data: string } }>(
      `const { sock, got, head } = await state.open(${JSON.stringify(A)});
       sock.write('GET / HTTP/1.1\\r\\nhost: ${A}\\r\\n\\r\\n');
       return { head, after: await state.wait(got, 3000) };`,
    );
    t.equal(status(v.head), 200);
    t.equal(status(v.after.data), 400, v.after.data.slice(0, 200));
    t.match(v.after.data, /"code":"bad_request"/);
  });

  await t.test('SSLv2-style hello (0x80 first): refused in plain HTTP, not hung', async (t) => {
    const v = await r.inCmd<{ after: { data: string; closedAfter: number | null } }>(
      `const { sock, got } = await state.open(${JSON.stringify(A)});
       sock.write(Buffer.from('802e0100020015000000100700c0030080010080060040040080020080', 'hex'));
       return { after: await state.wait(got, 3000) };`,
    );
    t.equal(status(v.after.data), 400, v.after.data.slice(0, 200));
  });

  await t.test('a ClientHello split (1 byte, then the rest 300 ms later): served', async (t) => {
    const v = await r.inCmd<{ answer?: string; connect?: string }>(
      `return await state.tlsRequest(${JSON.stringify(A)}, 'api.example.test', 'GET /split HTTP/1.1\\r\\nhost: ${A}\\r\\nauthorization: Bearer PLACEHOLDER\\r\\n\\r\\n', true);`,
    );
    t.equal(status(v.answer), 200, (v.answer ?? v.connect ?? '').slice(0, 300));
  });

  await t.test(
    'a client that half-closes right after the 200: closed promptly, not held for agent_request_timeout',
    async (t) => {
      const v = await r.inCmd<{ after: { closedAfter: number | null; data: string } }>(
        `const { sock, got } = await state.open(${JSON.stringify(A)});
       sock.end();
       return { after: await state.wait(got, 12000) };`,
        20_000,
      );
      t.not(v.after.closedAfter, null, 'closed');
      t.ok(
        (v.after.closedAfter ?? 1e9) < 2000,
        `closed within 2 s of the half-close (after ${v.after.closedAfter} ms)`,
      );
    },
  );

  await t.test('a client that sends nothing: closed at agent_request_timeout (10 s)', async (t) => {
    const v = await r.inCmd<{ after: { closedAfter: number | null } }>(
      `const { got } = await state.open(${JSON.stringify(A)});
       return { after: await state.wait(got, 14000) };`,
      20_000,
    );
    t.not(v.after.closedAfter, null, 'closed');
    t.ok(
      (v.after.closedAfter ?? 0) >= 9000 && (v.after.closedAfter ?? 1e9) <= 12500,
      `after ${v.after.closedAfter} ms`,
    );
  });

  const abs = async (target: string, host = A): Promise<string> => {
    const v = await r.inCmd<{ answer?: string; connect?: string }>(
      `return await state.tlsRequest(${JSON.stringify(A)}, 'api.example.test', ${JSON.stringify(
        `GET ${target} HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer PLACEHOLDER\r\n\r\n`,
      )}, false);`,
    );
    return v.answer ?? v.connect ?? '';
  };
  await t.test(
    'absolute form of the tunnel’s own origin, upper case with explicit port: 200, the path sent',
    async (t) => {
      const n = r.s.up.requests.length;
      const a = await abs(`HTTPS://API.EXAMPLE.TEST:${up}/abs?q=1`);
      t.equal(status(a), 200, a.slice(0, 200));
      t.equal(
        r.s.up.requests
          .slice(n)
          .map((x) => x.url)
          .join(','),
        '/abs?q=1',
      );
    },
  );
  const refusedTargets = [
    `https://api.example.test:${up}@127.0.0.1:${up}/x`,
    `https://api.example.test.:${up}/x`,
    `https://api.example.test:${up}\\@evil.test/x`,
    `https://api%2Eexample.test:${up}/x`,
    `https://[::1]:${up}/x`,
    `https://127.0.0.1:${up}/x`,
    `https://api.example.test/x`,
    `https://api.example.test:0${up}/x`,
    `https://${'a'.repeat(6000)}.example.test:${up}/x`,
  ];
  for (const target of refusedTargets)
    await t.test(`absolute form ${target.slice(0, 60)}: 400 bad_request, nothing sent`, async (t) => {
      const n = r.s.up.requests.length;
      const a = await abs(target);
      t.equal(status(a), 400, a.slice(0, 300));
      t.match(a, /"code":"bad_request"/);
      t.equal(r.s.up.requests.length, n, 'nothing sent');
    });
  await t.test('absolute form of the own origin with a Host naming another: 400', async (t) => {
    const n = r.s.up.requests.length;
    const a = await abs(`https://api.example.test:${up}/h`, 'evil.test');
    t.equal(status(a), 400, a.slice(0, 300));
    t.equal(r.s.up.requests.length, n);
  });
});
