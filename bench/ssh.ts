// SSH through postern, with and without connection reuse, in one run:
// 50 sequential `true` commands through a daemon that keeps connections
// (ssh.connection_idle = 10s, the default) against 50 through a daemon that
// closes each one after its command (1ms), both to the same real sshd
// (target: reuse at least 5× faster). Every command takes the whole path:
// validation, the command rules, approval by session, a durable audit
// intent, exec, the outcome. Needs root (the sshd test harness creates a
// throwaway user). Run after `make build`, through bench/run.js.
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startSshd, Sshd } from '../test/helpers/sshd';
import { canConnect } from '../test/helpers/postern';

const CLI = resolve(__dirname, '..', 'dist', 'cli', 'main.js');
const COMMANDS = 50;
const PASSPHRASE = 'benchmark passphrase, not a secret';

function env(home: string): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, POSTERN_HOME: home };
  delete e['NODE_OPTIONS'];
  return e;
}

function cli(home: string, args: string[]): void {
  const r = spawnSync(process.execPath, [CLI, ...args], { env: env(home), encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`postern ${args.join(' ')}: ${r.stderr}`);
}

function post(sock: string, body: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolvePost, reject) => {
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request({ socketPath: sock, method: 'POST', path: '/v1/ssh', headers: { 'content-type': 'application/json', 'content-length': payload.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const j = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        if (res.statusCode !== 200 || j['exit_code'] !== 0) reject(new Error(`postern answered ${res.statusCode}: ${JSON.stringify(j)}`));
        else resolvePost(j);
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

interface Daemon {
  sock: string;
  children: ChildProcess[];
}

async function startPostern(dir: string, name: string, sshd: Sshd, idle: string): Promise<Daemon> {
  const home = join(dir, name);
  mkdirSync(home, { mode: 0o700 });
  writeFileSync(join(home, 'config.toml'), `[ssh]\nconnection_idle = "${idle}"\n`, { mode: 0o600 });
  const pass = join(dir, `${name}.pass`);
  writeFileSync(pass, PASSPHRASE, { mode: 0o600 });
  cli(home, ['init', '--kdf', 'interactive', '--passphrase-file', pass]);
  const daemon = spawn(process.execPath, [CLI, 'daemon'], { env: env(home), stdio: 'ignore' });
  const sock = join(home, 'agent.sock');
  const deadline = Date.now() + 20_000;
  while (!(await canConnect(sock))) {
    if (Date.now() > deadline) throw new Error('the daemon did not start');
    await new Promise((r) => setTimeout(r, 25));
  }
  cli(home, ['unlock', '--passphrase-file', pass]);
  const def = join(dir, `${name}.toml`);
  writeFileSync(def, `name = "box"\nkind = "ssh"\nhost = "127.0.0.1"\nport = ${sshd.port}\nuser = "${sshd.user}"\nauth = "key"\nhost_key = "${sshd.hostKeyFingerprint}"\ncommands = ["true"]\nallow_addresses = ["127.0.0.1/32"]\n`);
  cli(home, ['cred', 'add', '--file', def, '--secret-file', sshd.keys.ed25519.path, '--passphrase-file', pass]);
  const approver = spawn(process.execPath, [CLI, 'approver', '--auto', 'approve', '--passphrase-file', pass], { env: env(home), stdio: 'ignore' });
  return { sock, children: [daemon, approver] };
}

async function timeCommands(sock: string): Promise<{ totalMs: number; medianMs: number }> {
  const each: number[] = [];
  const started = process.hrtime.bigint();
  for (let i = 0; i < COMMANDS; i++) {
    const t = process.hrtime.bigint();
    await post(sock, { credential: 'box', command: 'true' });
    each.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  const totalMs = Number(process.hrtime.bigint() - started) / 1e6;
  each.sort((a, b) => a - b);
  return { totalMs, medianMs: each[Math.floor(COMMANDS / 2)] as number };
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.log('skipped: the SSH benchmark needs root (it creates a throwaway user for sshd)');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'postern-bench-ssh-'));
  const sshd = await startSshd();
  const children: ChildProcess[] = [];
  try {
    const reuse = await startPostern(dir, 'reuse', sshd, '10s');
    const fresh = await startPostern(dir, 'fresh', sshd, '1ms');
    children.push(...reuse.children, ...fresh.children);
    // The first request of each asks the approver (once it is attached),
    // which grants a session.
    for (const d of [reuse, fresh]) {
      const deadline = Date.now() + 20_000;
      for (;;) {
        try {
          await post(d.sock, { credential: 'box', command: 'true' });
          break;
        } catch (e) {
          if (Date.now() > deadline) throw e;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }
    const before = sshd.connections();
    const a = await timeCommands(reuse.sock);
    const mid = sshd.connections();
    const b = await timeCommands(fresh.sock);
    const after = sshd.connections();
    console.log(`${COMMANDS} sequential \`true\` commands through postern to a real sshd on loopback:`);
    console.log(`  connection reuse   ${a.totalMs.toFixed(0).padStart(6)} ms   median ${a.medianMs.toFixed(2)} ms   (${mid - before} new connections)`);
    console.log(`  fresh connections  ${b.totalMs.toFixed(0).padStart(6)} ms   median ${b.medianMs.toFixed(2)} ms   (${after - mid} new connections)`);
    console.log(`  reuse is ${(b.totalMs / a.totalMs).toFixed(1)}× faster   (target ≥ 5×)`);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    await sshd.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
