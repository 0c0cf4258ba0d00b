// Run under `postern run`: one CONNECT tunnel with TLS, kept alive; sends
// the request of argv[4], waits for `<dir>/go-N` before request N (N >= 2),
// writes `<dir>/done-N` after each answer, and prints a JSON list of what
// each request got (the raw answer, or how the connection ended).
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const [host, port, dir, count] = process.argv.slice(2);
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const results = [];
let buf = Buffer.alloc(0);
let ended = null;
let wake = () => undefined;
function complete() {
  const i = buf.indexOf('\r\n\r\n');
  if (i < 0) return -1;
  const head = buf.subarray(0, i).toString('latin1');
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (cl) return buf.length >= i + 4 + Number(cl[1]) ? i + 4 + Number(cl[1]) : -1;
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    const j = buf.indexOf('\r\n0\r\n\r\n', i);
    return j < 0 ? -1 : j + 7;
  }
  if (/^HTTP\/1\.1 (204|304)/.test(head)) return i + 4;
  return -1;
}
async function answer(ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const n = complete();
    if (n >= 0) {
      const a = buf.subarray(0, n).toString('latin1');
      buf = buf.subarray(n);
      return { raw: a };
    }
    if (ended) return { ended, partial: buf.toString('latin1') };
    if (Date.now() > deadline) return { ended: 'timeout', partial: buf.toString('latin1') };
    await new Promise((r) => {
      wake = r;
      setTimeout(r, 50);
    });
  }
}
(async () => {
  const sock = net.connect(Number(proxy.port), proxy.hostname);
  await new Promise((r) => sock.once('connect', r));
  sock.write(`CONNECT ${host}:${port} HTTP/1.1\r\nhost: ${host}:${port}\r\nproxy-authorization: Basic ${auth}\r\n\r\n`);
  let head = Buffer.alloc(0);
  await new Promise((r) => {
    const on = (d) => {
      head = Buffer.concat([head, d]);
      if (head.indexOf('\r\n\r\n') >= 0) {
        sock.off('data', on);
        r();
      }
    };
    sock.on('data', on);
  });
  if (!/^HTTP\/1\.1 200/.test(head.toString('latin1'))) {
    console.log(JSON.stringify([{ connect: head.toString('latin1') }]));
    return;
  }
  const t = tls.connect({ socket: sock, servername: host, ca, ALPNProtocols: ['http/1.1'] });
  t.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    wake();
  });
  t.on('error', (e) => (ended = ended || 'error ' + e.code));
  t.on('close', () => (ended = ended || 'closed'));
  await new Promise((r) => t.once('secureConnect', r));
  for (let n = 1; n <= Number(count); n++) {
    if (n > 1) while (!fs.existsSync(`${dir}/go-${n}`)) await sleep(30);
    const path = fs.existsSync(`${dir}/path-${n}`) ? fs.readFileSync(`${dir}/path-${n}`, 'utf8') : `/r${n}`;
    if (!t.destroyed)
      t.write(
        `GET ${path} HTTP/1.1\r\nhost: ${host}:${port}\r\nauthorization: Bearer ${process.env.GH_TOKEN}\r\n\r\n`,
      );
    results.push(await answer(20000));
    fs.writeFileSync(`${dir}/done-${n}`, '');
  }
  console.log(JSON.stringify(results));
  t.destroy();
})();
