// `postern run`'s loopback proxy (SPEC §11): a connection without the run's
// token (none, a wrong user name or password, another scheme, two headers)
// is answered 407 with Proxy-Authenticate and the §6.3 JSON, and nothing of
// it reaches the agent socket; an oversized or malformed head is 400. With
// the token, the head reaches the agent socket without Proxy-Authorization
// (the token in no byte the daemon gets), with `postern-run-client` set by
// run (a client's own value replaced) and `connection: close`; a CONNECT is
// relayed as bytes both ways, megabytes intact; the pid named is the
// descendant of CMD that connected. A connection with the token that no
// process of CMD's tree holds (the token learned from CMD's environment) is
// 403 denied_peer, and nothing of it reaches the agent socket. Real curl,
// raw sockets (from CMD's tree: a node client CMD starts), a real peer on
// the agent socket that records what it is sent.
import t from 'tap';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, cleanEnv, eventually, makeHome } from '../helpers/postern';
import { startRunsPeer } from '../helpers/runs-peer';

interface Raw {
  status: number;
  head: string;
  body: string;
}

// One raw exchange: `bytes` sent, everything read until the proxy closes.
function exchange(port: number, bytes: string | Buffer): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    s.on('connect', () => s.write(bytes));
    s.on('data', (d: Buffer) => got.push(d));
    s.on('error', reject);
    s.on('close', () => {
      const text = Buffer.concat(got).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      resolve({ status: Number(text.split(' ')[1]), head: text.slice(0, end), body: text.slice(end + 4) });
    });
  });
}

function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

// curl as a child the test waits for without blocking: the agent socket's
// peer runs in this process.
function curl(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn('curl', ['-sS', '--max-time', '20', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString('latin1')));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('close', (code) => resolve({ code, out, err }));
  });
}

t.test("postern run's proxy checks the token and relays to the agent socket", async (t) => {
  const peer = await startRunsPeer();
  let peerClosed = false;
  t.teardown(() => (peerClosed ? undefined : peer.close()));
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  const env = cleanEnv({ POSTERN_HOME: h.home, POSTERN_AGENT_SOCKET: peer.socket });
  const proxyFile = join(h.dir, 'proxy');
  const doneFile = join(h.dir, 'done');
  const pidFile = join(h.dir, 'curl-pid');
  const outFile = join(h.dir, 'curl-out');
  // CMD: records its proxy, has one child curl connect through it, then
  // runs what the test asks from inside its tree (go-N: a shell script;
  // out-N, err-N, code-N) until the test is done (bounded).
  const script = `echo "$HTTP_PROXY" > ${proxyFile}
curl -s -o ${outFile} http://x.example/pid-check & echo $! > ${pidFile}; wait
i=1
for k in $(seq 1200); do
  if [ -e ${h.dir}/go-$i ]; then sh ${h.dir}/go-$i > ${h.dir}/out-$i 2>${h.dir}/err-$i; echo $? > ${h.dir}/code-$i; i=$((i+1)); fi
  [ -e ${doneFile} ] && exit 0
  sleep 0.05
done; exit 9`;
  let asked = 0;
  // A shell script run by CMD (so by a process of its tree): its output.
  const inside = async (sh: string): Promise<{ code: number; out: Buffer; err: string }> => {
    const n = ++asked;
    writeFileSync(join(h.dir, `go-${n}.tmp`), sh);
    renameSync(join(h.dir, `go-${n}.tmp`), join(h.dir, `go-${n}`));
    const codeFile = join(h.dir, `code-${n}`);
    if (!(await eventually(() => existsSync(codeFile) && readFileSync(codeFile, 'utf8').endsWith('\n'), 30_000)))
      throw new Error(`CMD did not run go-${n}`);
    return {
      code: Number(readFileSync(codeFile, 'utf8')),
      out: readFileSync(join(h.dir, `out-${n}`)),
      err: readFileSync(join(h.dir, `err-${n}`), 'utf8'),
    };
  };
  // A raw exchange made by a node client CMD starts: `bytes` sent (and
  // its side closed), everything read until the proxy closes.
  const clientJs = join(h.dir, 'raw-client.js');
  writeFileSync(
    clientJs,
    `const net = require('net'); const fs = require('fs');
const s = net.connect(Number(process.argv[2]), '127.0.0.1');
const chunks = [];
s.on('connect', () => s.end(fs.readFileSync(process.argv[3])));
s.on('data', (d) => chunks.push(d));
s.on('error', (e) => { process.stderr.write(String(e)); process.exit(3); });
s.on('close', () => fs.writeFileSync(process.argv[4], Buffer.concat(chunks)));`,
  );
  const exchangeInside = async (port: number, bytes: Buffer): Promise<Buffer> => {
    const n = asked + 1;
    const sent = join(h.dir, `sent-${n}`);
    const got = join(h.dir, `got-${n}`);
    writeFileSync(sent, bytes);
    const r = await inside(`exec ${process.execPath} ${clientJs} ${port} ${sent} ${got}`);
    if (r.code !== 0) throw new Error(`raw client: ${r.err}`);
    return readFileSync(got);
  };
  const run = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'run', '--', 'sh', '-c', script], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => run.on('exit', (c) => r(c)));
  t.teardown(() => {
    writeFileSync(doneFile, '');
    return exited;
  });
  t.ok(await eventually(() => existsSync(outFile) && readFileSync(outFile, 'utf8').length > 0, 20_000), stderr);
  const m = /^http:\/\/([^:]+):([^@]+)@127\.0\.0\.1:(\d+)\n$/.exec(readFileSync(proxyFile, 'utf8'));
  const token = m![1]!;
  const port = Number(m![3]);
  const proxy = `http://127.0.0.1:${port}`;

  await t.test('the descendant that connected is named in postern-run-client', async (t) => {
    const head = (JSON.parse(readFileSync(outFile, 'utf8')) as { head: string }).head;
    const pid = readFileSync(pidFile, 'utf8').trim();
    t.match(pid, /^\d+$/);
    t.match(head, new RegExp(`\r\npostern-run-client: ${pid}(\r\n|$)`), "curl's pid");
  });

  await t.test('without the token: 407, nothing relayed', async (t) => {
    const before = peer.relayed.length;
    const get = (headers: string): string => `GET http://x.example/ HTTP/1.1\r\nHost: x.example\r\n${headers}\r\n`;
    const cases: [string, string, RegExp][] = [
      ['no header', get(''), /has no Proxy-Authorization header/],
      ['wrong user and password', get(`Proxy-Authorization: ${basic('bad', 'bad')}\r\n`), /not this run's token/],
      ['right user, wrong password', get(`Proxy-Authorization: ${basic(token, 'x')}\r\n`), /not this run's token/],
      ['wrong user, right password', get(`Proxy-Authorization: ${basic('x', token)}\r\n`), /not this run's token/],
      [
        'user only',
        get(`Proxy-Authorization: Basic ${Buffer.from(token).toString('base64')}\r\n`),
        /not this run's token/,
      ],
      ['another scheme', get(`Proxy-Authorization: Bearer ${token}\r\n`), /is not Basic credentials/],
      [
        'two headers',
        get(`Proxy-Authorization: ${basic(token, token)}\r\nProxy-Authorization: ${basic(token, token)}\r\n`),
        /more than one Proxy-Authorization/,
      ],
      [
        'CONNECT without',
        'CONNECT x.example:443 HTTP/1.1\r\nHost: x.example:443\r\n\r\n',
        /has no Proxy-Authorization/,
      ],
    ];
    for (const [what, bytes, message] of cases) {
      const r = await exchange(port, bytes);
      t.equal(r.status, 407, what);
      t.match(r.head, /\r\nproxy-authenticate: Basic realm="postern"\r\n/, `${what}: Proxy-Authenticate`);
      t.match(r.head, /\r\nx-postern-error: denied_peer\r\n/, `${what}: x-postern-error`);
      const body = JSON.parse(r.body) as { error: { code: string; message: string } };
      t.equal(body.error.code, 'denied_peer', what);
      t.match(body.error.message, message, what);
      t.match(body.error.message, /use the HTTPS_PROXY it set/, `${what}: the next step`);
      t.notOk(r.body.includes(token), `${what}: the token is not echoed`);
    }
    const viaCurl = await curl(['-x', `http://bad:bad@127.0.0.1:${port}`, '-w', '\n%{http_code}', 'http://x.example/']);
    t.match(viaCurl.out, /"code":"denied_peer".*\n407$/s, 'curl with a wrong user gets 407');
    const noCreds = await curl(['-x', proxy, '-w', '\n%{http_code}', 'http://x.example/']);
    t.match(noCreds.out, /\n407$/, 'curl without credentials gets 407');
    t.equal(peer.relayed.length, before, 'nothing reached the agent socket');
  });

  await t.test('a head over 16 KiB or malformed: 400, nothing relayed', async (t) => {
    const before = peer.relayed.length;
    const big = await exchange(port, `GET http://x.example/ HTTP/1.1\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`);
    t.equal(big.status, 400);
    t.match(JSON.parse(big.body), { error: { code: 'bad_request', message: /over 16 KiB/ } });
    const endless = await exchange(port, `GET http://x.example/ HTTP/1.1\r\nX-Big: ${'a'.repeat(20 * 1024)}`);
    t.equal(endless.status, 400, 'no end of head within 16 KiB');
    const bad = await exchange(port, 'HELLO\r\n\r\n');
    t.equal(bad.status, 400);
    t.match(JSON.parse(bad.body), { error: { code: 'bad_request', message: /request line/ } });
    const split = await exchange(
      port,
      `GET http://x/ HTTP/1.1\r\nX-A: b\nProxy-Authorization: ${basic(token, token)}\r\n\r\n`,
    );
    t.equal(split.status, 400, 'a bare LF inside a header line');
    t.equal(peer.relayed.length, before);
  });

  await t.test("with the token, from a process outside CMD's tree: 403 denied_peer, nothing relayed", async (t) => {
    const before = peer.relayed.length;
    const raw = await exchange(
      port,
      `GET http://x.example/ HTTP/1.1\r\nHost: x.example\r\nProxy-Authorization: ${basic(token, token)}\r\n\r\n`,
    );
    t.equal(raw.status, 403);
    t.match(raw.head, /\r\nx-postern-error: denied_peer\r\n/);
    t.match(JSON.parse(raw.body), {
      error: {
        code: 'denied_peer',
        message: /does not come from the command `postern run` started.*start that program under its own `postern run`/,
      },
    });
    const viaCurl = await curl([
      '-x',
      `http://${token}:${token}@127.0.0.1:${port}`,
      '-w',
      '\n%{http_code}',
      'http://x.example/',
    ]);
    t.match(viaCurl.out, /"code":"denied_peer".*\n403$/s, 'curl outside the run with the right token gets 403');
    const tunnel = await exchange(
      port,
      `CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\nProxy-Authorization: ${basic(token, token)}\r\n\r\n`,
    );
    t.equal(tunnel.status, 403, 'a CONNECT too');
    t.notOk(raw.body.includes(token) || tunnel.body.includes(token), 'the token is not echoed');
    t.equal(peer.relayed.length, before, 'nothing reached the agent socket');
  });

  await t.test('with the token: the head arrives without it, the answer comes back unchanged', async (t) => {
    const before = peer.relayed.length;
    const r = await inside(
      `exec curl -sS --max-time 20 -x http://${token}:${token}@127.0.0.1:${port} -H 'postern-run-client: 1' -D - 'http://x.example/some/path?q=1'`,
    );
    t.equal(r.code, 0, r.err);
    const out = r.out.toString('latin1');
    t.match(out, /^HTTP\/1\.1 200 X\r\n/, "the peer's status line, as it sent it");
    const head = (JSON.parse(out.slice(out.indexOf('\r\n\r\n') + 4)) as { head: string }).head;
    t.match(head, /^GET http:\/\/x\.example\/some\/path\?q=1 HTTP\/1\.1\r\n/);
    t.match(head, /\r\nHost: x\.example\r\n/);
    t.notMatch(head, /proxy-authorization/i);
    t.match(
      head,
      /\r\npostern-run-client: \d+(\r\n|$)/,
      "the pid of CMD's descendant that connected, not the client's value",
    );
    t.equal(head.match(/postern-run-client/gi)?.length, 1, "the client's own value is replaced");
    t.match(head, /\r\nconnection: close(\r\n|$)/);
    t.equal(peer.relayed.length, before + 1);
  });

  await t.test('CONNECT: bytes both ways, intact', async (t) => {
    const payload = randomBytes(6 * 1024 * 1024);
    const early = Buffer.from('early bytes after the head;');
    const got = await exchangeInside(
      port,
      Buffer.concat([
        Buffer.from(
          `CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\nProxy-Authorization: ${basic(token, token)}\r\n\r\n`,
        ),
        early,
        payload,
      ]),
    );
    const established = 'HTTP/1.1 200 Connection established\r\n\r\n';
    t.equal(got.subarray(0, established.length).toString(), established);
    t.ok(got.subarray(established.length).equals(Buffer.concat([early, payload])), 'every byte echoed back, in order');
    const relayed = peer.relayed[peer.relayed.length - 1]!;
    t.match(relayed.head, /^CONNECT api\.example\.test:443 HTTP\/1\.1\r\n/);
    t.notMatch(relayed.head, /connection: close/i, 'a tunnel is not asked to close');
  });

  await t.test('the token is in no byte the agent socket received', async (t) => {
    t.ok(peer.relayed.length >= 3);
    for (const c of peer.relayed) {
      const bytes = c.bytes();
      t.equal(bytes.indexOf(token), -1);
      t.equal(bytes.indexOf(Buffer.from(`${token}:${token}`).toString('base64')), -1);
    }
  });

  await t.test('the agent socket gone: 502 daemon_unreachable', async (t) => {
    await peer.close();
    peerClosed = true;
    const got = await exchangeInside(
      port,
      Buffer.from(
        `GET http://x.example/ HTTP/1.1\r\nHost: x.example\r\nProxy-Authorization: ${basic(token, token)}\r\n\r\n`,
      ),
    );
    const text = got.toString('latin1');
    t.match(text, /^HTTP\/1\.1 502 /, text.slice(0, 600));
    t.match(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)), {
      error: { code: 'daemon_unreachable', message: /start it with `postern daemon`/ },
    });
  });

  writeFileSync(doneFile, '');
  t.equal(await exited, 0, `run ends with CMD's status: ${stderr}`);
  const after = await exchange(port, 'GET http://x/ HTTP/1.1\r\n\r\n').catch((e: NodeJS.ErrnoException) => e.code);
  t.equal(after, 'ECONNREFUSED', 'the proxy is gone with run');
});
