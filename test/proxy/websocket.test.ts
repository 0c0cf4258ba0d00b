// WebSockets through `postern run` (docs/proxy.md, "What it does not do":
// `upgrade` is removed, the handshake reaches the upstream as a plain
// request, no 101 goes back, the connection closes after the answer).
// A real client (undici's WebSocket through EnvHttpProxyAgent) against an
// upstream that speaks WebSocket and echoes the Authorization it got, and
// the same against an upstream that answers 101 whatever it is sent.
import t from 'tap';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Handler } from '../helpers/https-upstream';
import { makeCanary } from '../helpers/canary';
import { startProxyStack, ProxyStack } from '../helpers/proxy-stack';

const UNDICI = JSON.stringify(require.resolve('undici'));

function frame(text: string): Buffer {
  const p = Buffer.from(text);
  return Buffer.concat([Buffer.from([0x81, 126, p.length >> 8, p.length & 255]), p]);
}

// A WebSocket origin: a 101 when asked to upgrade (always, when `always`),
// then one text frame holding the Authorization it received; 426 otherwise,
// its body also echoing the Authorization.
function wsOrigin(always: boolean): Handler {
  return (req, _body, res) => {
    const auth = String(req.headers['authorization'] ?? '');
    const asked = String(req.headers['upgrade'] ?? '').toLowerCase() === 'websocket';
    if (!asked && !always) {
      const body = `upgrade required; you sent ${auth}`;
      res.writeHead(426, {
        'content-type': 'text/plain',
        upgrade: 'websocket',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
      return;
    }
    const key = String(req.headers['sec-websocket-key'] ?? 'dGhlIHNhbXBsZSBub25jZQ==');
    const accept = createHash('sha1')
      .update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
      .digest('base64');
    res.socket!.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    res.socket!.write(frame(`you sent ${auth}`));
  };
}

async function wsClient(s: ProxyStack): Promise<string> {
  const js = join(s.h.dir, 'ws.js');
  writeFileSync(
    js,
    `const undici = require(${UNDICI});
const dispatcher = new undici.EnvHttpProxyAgent();
const ws = new undici.WebSocket(process.argv[2], { dispatcher, headers: { authorization: 'Bearer ' + process.env.GH_TOKEN } });
const out = [];
ws.onopen = () => out.push('open');
ws.onmessage = (e) => out.push('message ' + e.data);
ws.onerror = (e) => out.push('error ' + (e.error?.cause?.message ?? e.error?.message ?? e.message ?? ''));
ws.onclose = (e) => { out.push('close ' + e.code); console.log(out.join('\\n')); process.exit(0); };
setTimeout(() => { console.log(out.join('\\n') + '\\ntimeout'); process.exit(0); }, 15000);
`,
  );
  const r = await s.run([process.execPath, js, `wss://api.example.test:${s.up.port}/ws`]);
  return r.stdout.toString() + r.stderr;
}

t.test(
  'undici WebSocket to a WebSocket origin: fails to open; the origin saw a plain GET; no secret back',
  async (t) => {
    const secret = makeCanary('WSSECRET');
    const s = await startProxyStack({ handler: wsOrigin(false), secret });
    t.teardown(() => s.close());
    const out = await wsClient(s);
    t.notMatch(out, /^open$/m, 'the socket never opened', { out });
    t.match(out, /^close 1006$/m, 'closed abnormally');
    t.equal(s.up.requests.length, 1, 'one request reached the origin');
    t.equal(s.up.requests[0]?.headers['upgrade'], undefined, 'without upgrade');
    t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${secret}`, 'with the secret injected');
    t.same(await s.exposed(), []);
  },
);

t.test(
  'a raw WebSocket handshake through the tunnel: the 426 comes back redacted, then the connection closes',
  async (t) => {
    const secret = makeCanary('WSSECRET');
    const s = await startProxyStack({ handler: wsOrigin(false), secret });
    t.teardown(() => s.close());
    const js = join(s.h.dir, 'raw.js');
    writeFileSync(
      js,
      `const net = require('net'), tls = require('tls'), fs = require('fs');
const p = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(p.username) + ':' + decodeURIComponent(p.password)).toString('base64');
const host = 'api.example.test:' + process.argv[2];
const c = net.connect(+p.port, '127.0.0.1', () => c.write('CONNECT ' + host + ' HTTP/1.1\\r\\nHost: ' + host + '\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n'));
c.once('data', () => {
  const s = tls.connect({ socket: c, servername: 'api.example.test', ca: fs.readFileSync(process.env.SSL_CERT_FILE) }, () => {
    s.write('GET /ws HTTP/1.1\\r\\nHost: ' + host + '\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Version: 13\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nAuthorization: Bearer ' + process.env.GH_TOKEN + '\\r\\n\\r\\n');
  });
  let got = '';
  s.on('data', (d) => (got += d.toString('latin1')));
  s.on('close', () => { process.stdout.write(got + '\\n--closed'); process.exit(0); });
  setTimeout(() => { process.stdout.write(got + '\\n--open'); process.exit(0); }, 10000);
});
`,
    );
    const r = await s.run([process.execPath, js, String(s.up.port)]);
    const out = r.stdout.toString();
    t.match(out, /^HTTP\/1\.1 426 /, "the origin's 426, not a 101");
    t.match(out, /you sent \[REDACTED:github\]/, 'its echo of the injected value redacted');
    t.match(out, /\n--closed$/, 'then the connection closed');
    t.same(await s.exposed(), []);
  },
);

t.test(
  'undici WebSocket to an origin that answers 101 to anything: never opens, the frame holding the secret never arrives',
  async (t) => {
    const secret = makeCanary('WSSECRET');
    const s = await startProxyStack({ handler: wsOrigin(true), secret });
    t.teardown(() => s.close());
    const out = await wsClient(s);
    t.notMatch(out, /^open$/m, 'the socket never opened', { out });
    t.notMatch(out, /^message/m, 'no message');
    t.same(await s.exposed(), []);
  },
);
