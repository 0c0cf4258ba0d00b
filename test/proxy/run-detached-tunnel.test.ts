// A grandchild of CMD opens a CONNECT tunnel through `postern run`'s
// relay while it is in CMD's tree, then leaves the tree (its parent exits,
// it is reparented outside CMD's tree: a detached background server).
// docs/proxy.md: "a process that left CMD's tree (a server CMD started in the
// background that detached, reparented to init) is refused too"; the agent
// socket's own rule (SPEC §7): a connection dies with the process that made
// it. Expected: its next request with the placeholder is not served with the
// secret.
import t from 'tap';
import { join } from 'node:path';
import { startRelayStack } from '../helpers/relay-cmd';

const G = String.raw`
const fs = require('node:fs'), net = require('node:net'), tls = require('node:tls');
const [dir, port, target] = process.argv.slice(2);
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const c = net.connect(Number(proxy.port), '127.0.0.1');
let head = '';
const onHead = (d) => {
  head += d;
  if (!head.includes('\r\n\r\n')) return;
  c.off('data', onHead);
  const s = tls.connect({ socket: c, servername: 'api.example.test', ca: fs.readFileSync(process.env.SSL_CERT_FILE), ALPNProtocols: ['http/1.1'] });
  let buf = '';
  let want = null;
  s.on('data', (d) => { buf += d; if (want && /\r\n\r\n/.test(buf)) { const w = want; want = null; setTimeout(() => { w(buf); buf = ''; }, 200); } });
  const ask = (path) => new Promise((r) => { want = r; s.write('GET ' + path + ' HTTP/1.1\r\nHost: ' + target + '\r\nAuthorization: Bearer ' + process.env.GH_TOKEN + '\r\n\r\n'); });
  s.on('secureConnect', async () => {
    fs.writeFileSync(dir + '/r1', await ask('/g1-in-tree'));
    fs.writeFileSync(dir + '/ready', String(process.pid));
    while (!fs.existsSync(dir + '/go')) await new Promise((r) => setTimeout(r, 50));
    const t = setTimeout(() => { fs.writeFileSync(dir + '/r2', 'TIMEOUT ' + buf); process.exit(0); }, 8000);
    s.on('close', () => { fs.writeFileSync(dir + '/r2', 'CLOSED ' + buf); process.exit(0); });
    const r2 = await ask('/g2-after-leaving');
    clearTimeout(t);
    fs.writeFileSync(dir + '/r2', r2);
    process.exit(0);
  });
};
c.on('data', onHead);
c.on('connect', () => c.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
`;

const C = String.raw`
const fs = require('node:fs'), { spawn } = require('node:child_process');
const [dir, gfile, port, target] = process.argv.slice(2);
const g = spawn(process.execPath, [gfile, dir, port, target], { detached: true, stdio: 'ignore' });
g.unref();
const iv = setInterval(() => { if (fs.existsSync(dir + '/ready')) { clearInterval(iv); process.exit(0); } }, 50);
`;

t.test('a tunnel opened in-tree, used after its holder left the tree', async (t) => {
  const p = await startRelayStack();
  t.teardown(() => p.close());
  const dir = join(p.s.h.dir, 'detach');
  const target = `api.example.test:${p.s.up.port}`;
  const out = await p.inCmd<{ r1: string; gpid: number; gppid: number; tree: number[] }>(
    `
    const { spawn } = require('node:child_process');
    const dir = ${JSON.stringify(dir)};
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(dir + '/g.js', ${JSON.stringify(G)});
    fs.writeFileSync(dir + '/c.js', ${JSON.stringify(C)});
    const c = spawn(process.execPath, [dir + '/c.js', dir, dir + '/g.js', '0', ${JSON.stringify(target)}], { stdio: 'ignore' });
    await new Promise((r) => c.on('exit', r));
    await new Promise((r) => setTimeout(r, 300));
    const gpid = Number(fs.readFileSync(dir + '/ready', 'utf8'));
    const stat = fs.readFileSync('/proc/' + gpid + '/stat', 'utf8');
    const gppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    // CMD's tree now
    const kids = new Map();
    for (const n of fs.readdirSync('/proc')) { if (!/^\\d+$/.test(n)) continue; try { const s = fs.readFileSync('/proc/' + n + '/stat', 'utf8'); const pp = Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]); kids.set(pp, [...(kids.get(pp) || []), Number(n)]); } catch {} }
    const tree = [process.pid]; for (let i = 0; i < tree.length; i++) tree.push(...(kids.get(tree[i]) || []));
    return { r1: fs.readFileSync(dir + '/r1', 'utf8'), gpid, gppid, tree };
  `,
    30_000,
  );
  t.comment(`r1: ${JSON.stringify(out.r1.slice(0, 200))}; G pid ${out.gpid}, ppid ${out.gppid}; CMD tree ${out.tree}`);
  t.match(out.r1, /^HTTP\/1.1 200 /, 'control: in-tree request served');
  t.notOk(out.tree.includes(out.gpid), "control: G has left CMD's tree");
  const seenBefore = p.s.up.requests.length;
  const r2 = await p.inCmd<string>(
    `
    const dir = ${JSON.stringify(dir)};
    fs.writeFileSync(dir + '/go', '1');
    for (let i = 0; i < 200 && !fs.existsSync(dir + '/r2'); i++) await new Promise((r) => setTimeout(r, 50));
    return fs.existsSync(dir + '/r2') ? fs.readFileSync(dir + '/r2', 'utf8') : 'NO RESULT';
  `,
    30_000,
  );
  t.comment(`r2: ${JSON.stringify(r2.slice(0, 300))}`);
  const leaked = p.s.up.requests
    .slice(seenBefore)
    .filter((r) => String(r.headers['authorization']) === `Bearer ${p.s.secret}`);
  t.same(
    leaked.map((r) => r.url),
    [],
    'no request of a process that left the tree reached the upstream with the secret',
  );
  t.notMatch(r2, /^HTTP\/1.1 200 /, 'its request is not served');
});
