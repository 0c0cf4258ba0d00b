// curl as people call it with HTTP/2 and tunnel options, through a real
// `postern run` (SPEC §11: "HTTP/2 is not offered to the client (ALPN
// http/1.1)"), and a Node HTTP/2 client that offers only h2. Each row: the
// client works over HTTP/1.1 or gets a clear refusal; the secret is in
// nothing the client printed, the daemon's log or the journal.
// (curl 7.88.1 here has no --proxy-http2: it came in curl 8.1.)
import t from 'tap';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, sh } from '../helpers/proxy-stack';
import { exposures } from '../helpers/exposure';

const CURL = 'curl -sS --max-time 20 -H "Authorization: Bearer $GH_TOKEN"';

t.test('curl --http2 to a covered https host: HTTP/1.1 negotiated, works', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await s.run(
    sh(`${CURL} --http2 -w '\\n%{http_version} %{http_code}' ${s.url('api.example.test', '/v1/h2')}`),
  );
  t.equal(r.code, 0, 'curl succeeded', { stderr: r.stderr });
  const [body, tail] = r.stdout.toString().split('\n');
  t.equal(tail, '1.1 200', 'HTTP/1.1, 200');
  t.equal(JSON.parse(body!).url, '/v1/h2', 'the upstream answer');
  t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${s.secret}`, 'the upstream saw the secret');
  t.same(await s.exposed(), []);
});

t.test('curl --http2-prior-knowledge to a covered https host: HTTP/1.1 negotiated, works', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await s.run(
    sh(`${CURL} --http2-prior-knowledge -w '\\n%{http_version} %{http_code}' ${s.url('api.example.test', '/v1/pk')}`),
  );
  t.equal(r.code, 0, 'curl succeeded', { stderr: r.stderr });
  const [body, tail] = r.stdout.toString().split('\n');
  t.equal(tail, '1.1 200', 'HTTP/1.1, 200');
  t.equal(JSON.parse(body!).url, '/v1/pk', 'the upstream answer');
  t.same(await s.exposed(), []);
});

t.test('curl --http2-prior-knowledge http:// through the proxy: refused as a scheme the rule lacks', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await s.run(sh(`${CURL} --http2-prior-knowledge -D - http://api.example.test:${s.up.port}/v1/plain`));
  t.equal(r.code, 0, 'curl got an answer', { stderr: r.stderr });
  const out = r.stdout.toString();
  t.match(out, /^HTTP\/1\.1 403 /, 'over HTTP/1.1 (curl ignores prior knowledge through a proxy), 403');
  t.match(out, /^x-postern-error: denied_policy\r$/im, 'x-postern-error names the code');
  t.match(out, /"part":"scheme"/, 'the scheme is named');
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.same(await s.exposed(), []);
});

t.test('curl --proxytunnel with plain http:// to a covered host: a clear refusal, not an empty reply', async (t) => {
  // CONNECT api.example.test:PORT is covered, so the daemon terminates TLS;
  // curl then speaks plain HTTP inside the tunnel. SPEC §1: unparseable
  // input is refused with a clear error saying what to do.
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const hdr = join(s.h.dir, 'hdr.txt');
  const r = await s.run(
    sh(
      `${CURL} --proxytunnel -D ${hdr} -o /dev/null -w '%{http_code}' http://api.example.test:${s.up.port}/v1/tunnelled; echo " rc=$?"`,
    ),
  );
  const out = r.stdout.toString();
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.same(await s.exposed(), [], 'no secret anywhere');
  let head = '';
  try {
    head = readFileSync(hdr, 'latin1');
  } catch {
    /* curl wrote no header file */
  }
  const inner = head.slice(head.lastIndexOf('HTTP/1.'));
  t.match(out.trim(), /^400 rc=0$/, 'curl got a 400 answer inside the tunnel', { observed: out, stderr: r.stderr });
  t.match(inner, /^x-postern-error: bad_request\r$/im, 'from postern, naming the code', { observed: head });
});

t.test('an HTTP/2-only client (ALPN h2 alone) inside a covered tunnel: the handshake is refused', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const js = join(s.h.dir, 'h2.js');
  writeFileSync(
    js,
    `
const net = require('net'), tls = require('tls'), http2 = require('http2'), fs = require('fs');
const p = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(p.username) + ':' + decodeURIComponent(p.password)).toString('base64');
const c = net.connect(+p.port, '127.0.0.1', () =>
  c.write('CONNECT api.example.test:' + process.argv[2] + ' HTTP/1.1\\r\\nHost: api.example.test\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n'));
c.once('data', (d) => {
  console.log('connect ' + d.toString().split('\\r\\n')[0]);
  const s = tls.connect({ socket: c, servername: 'api.example.test', ALPNProtocols: ['h2'], ca: fs.readFileSync(process.env.SSL_CERT_FILE) });
  s.on('secureConnect', () => {
    console.log('alpn ' + s.alpnProtocol);
    const cl = http2.connect('https://api.example.test', { createConnection: () => s });
    const r = cl.request({ ':path': '/v1/h2', authorization: 'Bearer ' + process.env.GH_TOKEN });
    r.on('response', (h) => console.log('status ' + h[':status']));
    r.on('error', (e) => console.log('error ' + e.code));
    r.on('end', () => cl.close());
    r.resume();
  });
  s.on('error', (e) => console.log('error ' + e.code));
});
`,
  );
  const r = await s.run([process.execPath, js, String(s.up.port)]);
  t.equal(
    r.stdout.toString(),
    'connect HTTP/1.1 200 Connection Established\nerror ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL\n',
    'tunnel opened, then a no_application_protocol alert',
  );
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.same(await s.exposed(), []);
});

t.test('h2c prior knowledge sent to the proxy port itself: 400 from postern run', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  // curl --http2-prior-knowledge ignores h2 through a proxy, so send the
  // preface itself, as an HTTP/2 proxy client would.
  const js = join(s.h.dir, 'pri.js');
  writeFileSync(
    js,
    `
const net = require('net');
const p = new URL(process.env.HTTPS_PROXY);
const c = net.connect(+p.port, '127.0.0.1', () => c.write('PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n'));
let got = '';
c.on('data', (d) => (got += d));
c.on('close', () => process.stdout.write(got));
c.on('end', () => c.destroy());
setTimeout(() => c.destroy(), 8000);
`,
  );
  const r = await s.run([process.execPath, js]);
  const out = r.stdout.toString();
  t.match(out, /^HTTP\/1\.1 400 /, '400');
  t.match(out, /^x-postern-error: bad_request\r$/im, 'x-postern-error names the code');
  t.same(exposures(out, s.secret), []);
  t.same(await s.exposed(), []);
});
