// The dedicated-user deployment (docs/operations.md) as a fixture for the
// test/deploy rows: a non-root daemon user, an agent user reaching the
// sockets through a group, an HTTPS upstream under a throwaway CA, a DNS
// server, optionally a real sshd, and an approver run AS THE DAEMON USER
// whose decisions the test makes (admin.sock serves only daemon_uid).
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, copyFileSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PASSPHRASE, canConnect, cleanEnv } from '../helpers/postern';
import { makeTestCa, startHttpsUpstream, type Handler, type Upstream } from '../helpers/https-upstream';
import { startDnsServer, zone } from '../helpers/dns-server';
import {
  asRoot,
  gidOf,
  makeUsers,
  runAs,
  runnableRoot,
  spawnAs,
  uidOf,
  type Run,
  type Users,
} from '../helpers/identity-users';

export const NODE = process.execPath;

interface T {
  teardown(fn: () => unknown): void;
}

export interface Card {
  id: string;
  credential: string;
  process: { pid: number; uid: number; key: string; cmdline: string[] };
  [k: string]: unknown;
}

export interface Deploy {
  u: Users;
  daemonUser: string;
  agentUser: string;
  daemonUid: number;
  agentUid: number;
  daemonHome: string;
  agentHome: string;
  home: string; // the daemon's postern home
  agentSock: string;
  sshAgentSock: string;
  ROOT: string;
  CLI: string;
  up: Upstream;
  caFile: string; // readable by every user
  passFile: string;
  daemon: ChildProcess;
  daemonLog(): string;
  // `postern ARGS` as the daemon user (runuser, like `sudo -u`).
  postern(...args: string[]): Run;
  own(name: string, content: string): string; // a 0600 file of the daemon user
  addCred(name: string, toml: string, secret: string): Run;
  journal(): string; // `postern audit show --json`, as the daemon user
  approver: Approver;
  agentConfig: string; // a config for the agent user's `postern` (agent_socket, extra)
}

export interface Approver {
  cards: Card[];
  pushes: Record<string, unknown>[];
  nextCard(from: number, ms?: number): Promise<Card | null>;
  decide(card: Card, decision: 'deny' | 'once' | 'session'): Promise<Record<string, unknown>>;
  close(): void;
}

const DRIVER = String.raw`
const net = require('node:net'); const fs = require('node:fs'); const rl = require('node:readline');
const root = process.argv[2];
const { encodeFrame, FrameDecoder } = require(root + '/dist/shared/admin-frame.js');
const s = net.connect(process.argv[3]); const dec = new FrameDecoder();
s.on('connect', () => s.write(encodeFrame({ id: 1, op: 'approver.attach', args: {} }, [Buffer.from(fs.readFileSync(process.argv[4], 'utf8').trim())])));
s.on('data', (c) => { for (const f of dec.push(c)) process.stdout.write(JSON.stringify(f.json) + '\n'); });
rl.createInterface({ input: process.stdin }).on('line', (l) => { const m = JSON.parse(l); s.write(encodeFrame({ id: m.id, op: m.op, args: m.args }, [])); });
s.on('close', () => process.exit(0));
s.on('error', (e) => { process.stderr.write(String(e)); process.exit(1); });
`;

export async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function exited(p: ChildProcess): Promise<number | null> {
  return p.exitCode !== null || p.signalCode !== null
    ? Promise.resolve(p.exitCode)
    : new Promise((r) => p.once('exit', (code) => r(code)));
}

export async function deploy(
  t: T,
  o: { handler: Handler; config?: string; agentConfig?: string; names?: string[]; hidepid?: boolean },
): Promise<Deploy> {
  const u = makeUsers();
  t.teardown(() => u.close());
  const daemonUser = u.name('d');
  const agentUser = u.name('a');
  const group = u.name('g');
  const daemonHome = join(u.base, 'var-lib-postern');
  const agentHome = join(u.base, 'home-agent');
  const runDir = join(u.base, 'run-postern');
  const home = join(daemonHome, '.postern');
  const agentSock = join(runDir, 'agent.sock');
  const sshAgentSock = join(runDir, 'ssh-agent.sock');
  u.madeUser(daemonUser);
  asRoot('useradd', [
    '--system',
    '--create-home',
    '--home-dir',
    daemonHome,
    '--shell',
    '/usr/sbin/nologin',
    daemonUser,
  ]);
  u.madeGroup(daemonUser);
  u.madeGroup(group);
  asRoot('groupadd', [group]);
  u.madeUser(agentUser);
  asRoot('useradd', ['--create-home', '--home-dir', agentHome, '--shell', '/bin/sh', agentUser]);
  u.madeGroup(agentUser);
  asRoot('usermod', ['-aG', group, agentUser]);
  asRoot('usermod', ['-aG', group, daemonUser]);
  const ROOT = runnableRoot(u, daemonUser);
  const CLI = join(ROOT, 'dist', 'cli', 'main.js');
  const daemonUid = uidOf(daemonUser);
  const agentUid = uidOf(agentUser);
  asRoot('install', ['-d', '-o', daemonUser, '-g', group, '-m', '0750', runDir]);

  const names = o.names ?? ['api.example.test'];
  const ca = makeTestCa(names);
  t.teardown(() => ca.cleanup());
  const up = await startHttpsUpstream(ca, o.handler);
  t.teardown(() => up.close());
  const dns = await startDnsServer(zone(Object.fromEntries(names.map((n) => [n, { A: ['127.0.0.1'] }]))));
  t.teardown(() => dns.close());
  const caFile = join(u.base, 'ca.pem');
  copyFileSync(ca.caFile, caFile);
  asRoot('chmod', ['0644', caFile]);
  const own = (name: string, content: string): string => {
    const p = join(daemonHome, name);
    writeFileSync(p, content, { mode: 0o600 });
    chownSync(p, daemonUid, gidOf(daemonUser));
    return p;
  };
  const passFile = own('pass', PASSPHRASE + '\n');
  const config = [
    '[daemon]',
    `agent_socket = "${agentSock}"`,
    'agent_socket_mode = "0660"',
    `agent_socket_group = "${group}"`,
    `agent_uids = [${agentUid}]`,
    `daemon_uid = ${daemonUid}`,
    '[ssh]',
    `ssh_agent_socket = "${sshAgentSock}"`,
    '[http]',
    `dns_servers = ["127.0.0.1:${dns.port}"]`,
    `ca_file = "${caFile}"`,
    o.config ?? '',
    '',
  ].join('\n');
  const postern = (...args: string[]): Run => runAs(daemonUser, [NODE, CLI, ...args]);
  let r = runAs(daemonUser, ['mkdir', '-m', '0700', home]);
  if (r.code !== 0) throw new Error(r.stderr);
  r = runAs(daemonUser, ['sh', '-c', `umask 077 && cat > ${home}/config.toml`], { input: config });
  if (r.code !== 0) throw new Error(r.stderr);
  r = postern('init', '--kdf', 'interactive', '--passphrase-file', passFile);
  if (r.code !== 0) throw new Error(`init: ${r.stderr}`);

  // hidepid: the daemon in a mount namespace of its own whose /proc is
  // mounted hidepid=2 (other users' processes invisible to it).
  const daemon = o.hidepid
    ? spawn(
        'unshare',
        [
          '-m',
          '--propagation',
          'private',
          'sh',
          '-c',
          'mount -t proc -o hidepid=2 proc /proc && exec "$@"',
          'sh',
          'setpriv',
          `--reuid=${daemonUser}`,
          `--regid=${daemonUser}`,
          '--init-groups',
          '/usr/bin/env',
          '-u',
          'NODE_OPTIONS',
          `HOME=${daemonHome}`,
          NODE,
          CLI,
          'daemon',
        ],
        { env: cleanEnv({ POSTERN_DEBUG: undefined }), stdio: ['ignore', 'pipe', 'pipe'] },
      )
    : spawnAs(daemonUser, [NODE, CLI, 'daemon'], { setpriv: { home: daemonHome } });
  let log = '';
  daemon.stdout!.on('data', (d: Buffer) => (log += d.toString('latin1')));
  daemon.stderr!.on('data', (d: Buffer) => (log += d.toString('latin1')));
  t.teardown(async () => {
    if (daemon.exitCode === null) daemon.kill('SIGTERM');
    await exited(daemon);
  });
  await until(() => existsSync(agentSock) && existsSync(join(home, 'admin.sock')), 20_000, `sockets: ${log}`);
  if (!(await canConnect(agentSock))) throw new Error('agent socket does not answer');
  r = postern('unlock', '--passphrase-file', passFile);
  if (r.code !== 0) throw new Error(`unlock: ${r.stderr}`);

  // The approver: a process of the daemon user attached over admin.sock.
  const driverJs = own('driver.js', DRIVER);
  const drv = spawn(
    'setpriv',
    [
      `--reuid=${daemonUser}`,
      `--regid=${daemonUser}`,
      '--init-groups',
      '/usr/bin/env',
      '-u',
      'NODE_OPTIONS',
      NODE,
      driverJs,
      ROOT,
      join(home, 'admin.sock'),
      passFile,
    ],
    { env: cleanEnv({ POSTERN_DEBUG: undefined }), stdio: ['pipe', 'pipe', 'pipe'] },
  );
  t.teardown(() => void drv.kill());
  const cards: Card[] = [];
  const pushes: Record<string, unknown>[] = [];
  const replies = new Map<number, (r: Record<string, unknown>) => void>();
  let attached: Record<string, unknown> | null = null;
  let drvErr = '';
  drv.stderr.on('data', (d: Buffer) => (drvErr += d.toString()));
  createInterface({ input: drv.stdout }).on('line', (line) => {
    const f = JSON.parse(line) as Record<string, unknown>;
    if (typeof f['push'] === 'string') {
      pushes.push(f);
      if (f['push'] === 'pending') cards.push(f['card'] as Card);
      return;
    }
    if (f['id'] === 1) attached = f;
    replies.get(f['id'] as number)?.(f);
  });
  await until(() => attached !== null, 20_000, `approver attach ${drvErr}`);
  if ((attached as unknown as Record<string, unknown>)['ok'] !== true)
    throw new Error(`attach: ${JSON.stringify(attached)}`);
  let nextId = 100;
  const approver: Approver = {
    cards,
    pushes,
    async nextCard(from, ms = 20_000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        if (cards.length > from) return cards[from]!;
        await new Promise((r) => setTimeout(r, 20));
      }
      return null;
    },
    decide(card, decision) {
      const id = nextId++;
      return new Promise((resolve) => {
        replies.set(id, resolve);
        drv.stdin.write(
          JSON.stringify({
            id,
            op: 'approval.decide',
            args: { id: card.id, decision, ...(decision === 'session' ? { root_key: card.process.key } : {}) },
          }) + '\n',
        );
        setTimeout(() => resolve({ ok: false, error: { code: 'test_timeout' } }), 10_000).unref();
      });
    },
    close: () => void drv.kill(),
  };

  const agentConfig = join(agentHome, 'postern.toml');
  writeFileSync(agentConfig, `[daemon]\nagent_socket = "${agentSock}"\n${o.agentConfig ?? ''}\n`, { mode: 0o600 });
  chownSync(agentConfig, agentUid, gidOf(agentUser));

  return {
    u,
    daemonUser,
    agentUser,
    daemonUid,
    agentUid,
    daemonHome,
    agentHome,
    home,
    agentSock,
    sshAgentSock,
    ROOT,
    CLI,
    up,
    caFile,
    passFile,
    daemon,
    daemonLog: () => log,
    postern,
    own,
    addCred(name, toml, secret) {
      return postern(
        'cred',
        'add',
        '--file',
        own(`${name}.toml`, toml),
        '--secret-file',
        own(`${name}.secret`, secret),
        '--passphrase-file',
        passFile,
      );
    },
    journal() {
      const j = postern('audit', 'show', '--json', '--passphrase-file', passFile);
      if (j.code !== 0) throw new Error(`audit show: ${j.stderr}`);
      return j.stdout;
    },
    approver,
    agentConfig,
  };
}

export function httpDef(name: string, port: number, paths = ['/*']): string {
  return (
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n` +
    `[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
    `[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = [${paths.map((p) => JSON.stringify(p)).join(', ')}]\n`
  );
}

// The journal's entries, parsed.
export function entries(journal: string): Record<string, unknown>[] {
  return journal
    .trim()
    .split('\n')
    .filter((l) => l)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
