// The set-up the HTTP benchmarks share: a throwaway CA and certificate, the
// upstream (HTTPS + DNS) in its own process, a postern home with one
// credential for it, the daemon, and an approver answering automatically.
// `sendPostern` and `sendDirect` perform one request each and throw on
// anything but success.
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { Pool } = require('undici');

const CLI = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
const PASSPHRASE = 'benchmark passphrase, not a secret';
const HOST = 'api.bench.test';

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr || r.stdout}`);
  return r.stdout;
}

function makeCertificates(dir) {
  const o = { cwd: dir };
  run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=postern bench CA'], o);
  run('openssl', ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'api.key', '-out', 'api.csr', '-subj', `/CN=${HOST}`], o);
  fs.writeFileSync(path.join(dir, 'ext.cnf'), `subjectAltName=DNS:${HOST}\n`);
  run('openssl', ['x509', '-req', '-in', 'api.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'api.pem', '-days', '1', '-extfile', 'ext.cnf'], o);
  return { ca: path.join(dir, 'ca.pem'), key: path.join(dir, 'api.key'), cert: path.join(dir, 'api.pem') };
}

function firstLine(child) {
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      const nl = text.indexOf('\n');
      if (nl >= 0) resolve(text.slice(0, nl));
    });
    child.on('exit', (code) => reject(new Error(`exited with ${code} before it was ready`)));
  });
}

function canConnect(p) {
  return new Promise((r) => {
    const s = net.connect(p);
    s.once('connect', () => {
      s.destroy();
      r(true);
    });
    s.once('error', () => r(false));
  });
}

async function waitFor(check, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen in time`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

async function startHttpBench({ concurrency, name, httpConfig = '' }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `postern-bench-${name}-`));
  const children = [];
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const cleanup = async () => {
    for (const c of children.reverse()) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const certs = makeCertificates(dir);
    const up = spawn(process.execPath, [path.join(__dirname, 'upstream.js'), certs.key, certs.cert], { stdio: ['ignore', 'pipe', 'inherit'], env });
    children.push(up);
    const [, httpsPort, dnsPort] = /https=(\d+) dns=(\d+)/.exec(await firstLine(up));

    const home = path.join(dir, 'home');
    fs.mkdirSync(home, { mode: 0o700 });
    fs.writeFileSync(path.join(home, 'config.toml'), `[http]\ndns_servers = ["127.0.0.1:${dnsPort}"]\nca_file = "${certs.ca}"\n${httpConfig}\n`, { mode: 0o600 });
    const passFile = path.join(dir, 'pass');
    fs.writeFileSync(passFile, PASSPHRASE, { mode: 0o600 });
    const penv = { ...env, POSTERN_HOME: home };
    const cli = (args) => run(process.execPath, [CLI, ...args], { env: penv });
    cli(['init', '--kdf', 'interactive', '--passphrase-file', passFile]);
    const daemon = spawn(process.execPath, [...(process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROFILE] : []), ...(process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(' ') : []), CLI, 'daemon'], { stdio: ['ignore', 'ignore', process.env.BENCH_STDERR ? fs.openSync(process.env.BENCH_STDERR, 'w') : 'ignore'], env: penv });
    children.push(daemon);
    const agentSock = path.join(home, 'agent.sock');
    await waitFor(() => canConnect(agentSock), 'the daemon start');
    cli(['unlock', '--passphrase-file', passFile]);
    const def = path.join(dir, 'bench.toml');
    fs.writeFileSync(def, `name = "bench"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${httpsPort}]\nmethods = ["GET", "POST"]\npaths = ["/*"]\n`);
    const secretFile = path.join(dir, 'secret');
    fs.writeFileSync(secretFile, 'bench-secret-0123456789abcdef0123456789', { mode: 0o600 });
    cli(['cred', 'add', '--file', def, '--secret-file', secretFile, '--passphrase-file', passFile]);
    const approver = spawn(process.execPath, [CLI, 'approver', '--auto', 'approve', '--passphrase-file', passFile], { stdio: ['ignore', 'pipe', 'ignore'], env: penv });
    children.push(approver);
    approver.stdout.resume();

    const url = `https://${HOST}:${httpsPort}/v1/items?page=1`;
    const direct = new Pool(`https://${HOST}:${httpsPort}`, {
      connections: concurrency,
      connect: { ca: fs.readFileSync(certs.ca, 'utf8'), lookup: (_h, o, cb) => (o && o.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)) },
    });
    const agent = new Pool('http://postern', { socketPath: agentSock, connections: concurrency });
    const payload = JSON.stringify({ credential: 'bench', method: 'GET', url, headers: { accept: 'application/json' } });
    const sendDirect = async () => {
      const r = await direct.request({ path: '/v1/items?page=1', method: 'GET', headers: { accept: 'application/json', authorization: 'Bearer x' } });
      const body = await r.body.text();
      if (r.statusCode !== 200) throw new Error(`direct: ${r.statusCode} ${body}`);
    };
    const sendPostern = async () => {
      const r = await agent.request({ path: '/v1/http', method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
      const body = await r.body.text();
      if (r.statusCode !== 200) throw new Error(`postern: ${r.statusCode} ${body}`);
    };
    // A small JSON POST. postern closes a connection that carried a body
    // after its response (SPEC §6.2), so each costs a new TLS connection;
    // `fresh` sends it directly the same way, the fair yardstick.
    const POST_BODY = JSON.stringify({ title: 'a new item', labels: ['bench'] });
    const sendDirectPost = (fresh) => async () => {
      const r = await direct.request({ path: '/v1/items', method: 'POST', reset: fresh, headers: { 'content-type': 'application/json', authorization: 'Bearer x' }, body: POST_BODY });
      const body = await r.body.text();
      if (r.statusCode !== 200) throw new Error(`direct POST: ${r.statusCode} ${body}`);
    };
    const postPayload = JSON.stringify({ credential: 'bench', method: 'POST', url: `https://${HOST}:${httpsPort}/v1/items`, headers: { 'content-type': 'application/json' }, body: POST_BODY });
    const sendPosternPost = async () => {
      const r = await agent.request({ path: '/v1/http', method: 'POST', headers: { 'content-type': 'application/json' }, body: postPayload });
      const body = await r.body.text();
      if (r.statusCode !== 200) throw new Error(`postern POST: ${r.statusCode} ${body}`);
    };
    // The first request asks the approver, which grants a session.
    await waitFor(async () => {
      try {
        await sendPostern();
        return true;
      } catch {
        return false;
      }
    }, 'approval of the benchmark session');
    const closeClients = () => Promise.all([direct.close(), agent.close()]).catch(() => undefined);
    children.unshift({ kill: () => void closeClients() });
    return { dir, home, passFile, penv, daemon, cli, host: HOST, httpsPort, ca: certs.ca, sendDirect, sendPostern, sendDirectPost: sendDirectPost(false), sendDirectPostFresh: sendDirectPost(true), sendPosternPost, closeClients, cleanup };
  } catch (e) {
    await cleanup();
    throw e;
  }
}

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

// utime + stime of a /proc/.../stat file, in microseconds. The command
// name in parentheses may hold spaces, so fields are counted after it.
function cpuMicros(statFile) {
  const s = fs.readFileSync(statFile, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK;
}
module.exports = { startHttpBench, rssMiB, cpuMicros, CLI };
