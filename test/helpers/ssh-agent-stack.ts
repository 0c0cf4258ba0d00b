// The ssh-agent front door against the real OpenSSH client and Debian's
// sshd: a postern daemon whose [ssh] ssh_agent_socket is on, SSH
// credentials with `ssh_agent = true` pinned to the test sshd's host key,
// an approver whose answer a test can change, and the OpenSSH client (`ssh`,
// `git` over ssh) run as real children with only an agent to sign with.
// OpenSSH's own ssh-agent, holding the same key, is the control: what it
// signs and postern refuses is postern's doing.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPrivateKey } from 'node:crypto';
import { utils } from 'ssh2';
import { startSshd, Sshd, SshdOptions, ClientKeyName } from './sshd';
import { startStack, Stack, Card, auditList } from './stack';
import { cli, canConnect, eventually, Result } from './postern';
import { sshDefinition } from './ssh-credential';
import { exposures } from './exposure';
import { journalBytes, journalText, filesUnder } from './canary';

const SSH = '/usr/bin/ssh';
const BASE_ENV = { PATH: '/usr/bin:/bin:/usr/sbin:/sbin', LANG: 'C', HOME: '/nonexistent' };

export interface Run extends Result {
  pid: number;
}

// A child with all its output kept; `pid` is known from the start.
export function runChild(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  o: { cwd?: string; ms?: number; onSpawn?: (pid: number) => void } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { env, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString('latin1')));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString('latin1')));
    const timer = setTimeout(() => p.kill('SIGKILL'), o.ms ?? 40_000);
    if (p.pid !== undefined) o.onSpawn?.(p.pid);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, pid: p.pid ?? -1 });
    });
  });
}

// A known_hosts file naming the server's host key for 127.0.0.1:PORT.
export function knownHostsFile(dir: string, port: number, hostKeyLine: string, name = `known_hosts_${port}`): string {
  const path = join(dir, name);
  const key = hostKeyLine.trim().split(/\s+/).slice(0, 2).join(' ');
  writeFileSync(path, `[127.0.0.1]:${port} ${key}\n`, { mode: 0o644 });
  return path;
}

// The ssh options that leave the client nothing but its agent to sign with,
// and nothing to trust but `knownHosts` (or, with null, any host key).
// `identity`: a public key file; the client then offers only the agent's key
// that matches it.
export function sshOptions(agentSock: string | null, knownHosts: string | null, identity?: string): string[] {
  return [
    '-F',
    '/dev/null',
    ...(agentSock !== null ? ['-o', `IdentityAgent=${agentSock}`] : []),
    '-o',
    // Replaces the default ~/.ssh/id_* files.
    `IdentityFile=${identity ?? '/nonexistent/none'}`,
    ...(identity !== undefined ? ['-o', 'IdentitiesOnly=yes'] : []),
    '-o',
    'BatchMode=yes',
    '-o',
    'PasswordAuthentication=no',
    '-o',
    'KbdInteractiveAuthentication=no',
    '-o',
    'PreferredAuthentications=publickey',
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    `UserKnownHostsFile=${knownHosts ?? '/dev/null'}`,
    '-o',
    `StrictHostKeyChecking=${knownHosts !== null ? 'yes' : 'no'}`,
    '-o',
    'ControlPath=none',
    '-o',
    'ConnectTimeout=15',
  ];
}

export interface SshCall {
  agent: string | null; // IdentityAgent; null leaves SSH_AUTH_SOCK from env
  port: number;
  user: string;
  knownHosts: string | null;
  command?: string; // default `true`
  forwardAgent?: boolean; // ssh -A
  identity?: string; // a .pub file: offer only that key
  env?: Record<string, string>;
  onSpawn?: (pid: number) => void;
}

export function runSsh(c: SshCall): Promise<Run> {
  const args = [
    ...sshOptions(c.agent, c.knownHosts, c.identity),
    ...(c.forwardAgent ? ['-A'] : ['-o', 'ForwardAgent=no']),
    '-p',
    String(c.port),
    `${c.user}@127.0.0.1`,
    c.command ?? 'true',
  ];
  return runChild(SSH, args, { ...BASE_ENV, ...(c.env ?? {}) }, { onSpawn: c.onSpawn });
}

// The shell command, run on the first hop, that logs in again to
// 127.0.0.1:PORT with whatever agent the hop has (the forwarded one).
export function secondHopCommand(port: number, user: string): string {
  const opts = sshOptions(null, null).join(' ');
  return `${SSH} ${opts} -p ${port} ${user}@127.0.0.1 'echo second-hop-ok'`;
}

// --- OpenSSH's ssh-agent, the control ------------------------------------

export interface StockAgent {
  sock: string;
  close(): Promise<void>;
}

export async function startStockAgent(keyPaths: string[]): Promise<StockAgent> {
  const dir = mkdtempSync(join(tmpdir(), 'pt-stock-agent-'));
  const sock = join(dir, 'agent.sock');
  const p = spawn('/usr/bin/ssh-agent', ['-D', '-a', sock], { env: BASE_ENV, stdio: 'ignore' });
  if (!(await eventually(() => canConnect(sock), 10_000))) throw new Error('ssh-agent did not start');
  for (const k of keyPaths)
    execFileSync('/usr/bin/ssh-add', ['-q', k], { env: { ...BASE_ENV, SSH_AUTH_SOCK: sock }, stdio: 'pipe' });
  return {
    sock,
    async close() {
      if (p.exitCode === null && p.signalCode === null) {
        const gone = new Promise((r) => p.once('exit', r));
        p.kill('SIGTERM');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// --- the postern side ------------------------------------------------------

// What the approver answers: a session rooted at the requester, allow once,
// deny, leave the card pending ('none'), or whatever a function says.
export type Answer = { decision: 'deny' | 'once' | 'session'; root_key?: string } | null;
export type Decision = 'session' | 'once' | 'deny' | 'none' | ((card: Card) => Answer);

export interface AgentCred {
  name: string;
  key: ClientKeyName;
  sshAgent: boolean;
  user?: string; // default the sshd's user
  hostKey?: string; // default the sshd's host key fingerprint
  approve?: 'session' | 'each-use';
}

export interface AgentStack {
  sshd: Sshd;
  s: Stack;
  agentSock: string; // postern's ssh-agent socket
  scratch: string; // a directory for known_hosts files and repositories (0755)
  knownHosts: string; // pins the sshd's host key
  decision: Decision; // what the approver answers next
  cards: Card[]; // every card the approver saw
  added: Map<string, Result>; // what `postern cred add` printed, per credential
  ssh(c: Partial<SshCall>): Promise<Run>;
  entries(kind?: string): Entry[];
  // Where any form of a private key's secret was found: every output kept by
  // `keep`, the daemon log, the journal (files and decrypted), every file in
  // the home except the vault.
  exposed(secrets: Buffer[]): Promise<string[]>;
  keep(what: string, bytes: string | Buffer): void;
  close(): Promise<void>;
}

export type Entry = Record<string, unknown> & { seq: number; kind?: string };

export interface AgentStackOptions {
  sshd?: SshdOptions;
  creds?: AgentCred[]; // default: "deploy" (ed25519, ssh_agent = true)
  socket?: string; // [ssh] ssh_agent_socket; default "ssh-agent.sock"
}

export function agentCredentialToml(sshd: Sshd, c: AgentCred): string {
  const def = sshDefinition({
    name: c.name,
    port: sshd.port,
    user: c.user ?? sshd.user,
    hostKey: c.hostKey ?? sshd.hostKeyFingerprint,
    commands: ['true'],
    ...(c.approve ? { approve: c.approve } : {}),
  });
  return `${def}ssh_agent = ${c.sshAgent}\n`;
}

export async function startAgentStack(o: AgentStackOptions = {}): Promise<AgentStack> {
  const sshd = await startSshd(o.sshd ?? {});
  const socket = o.socket ?? 'ssh-agent.sock';
  let s: Stack;
  try {
    s = await startStack({ sshConfig: `ssh_agent_socket = ${JSON.stringify(socket)}` });
  } catch (e) {
    await sshd.close();
    throw e;
  }
  const scratch = mkdtempSync(join(tmpdir(), 'pt-agent-scratch-'));
  execFileSync('chmod', ['0755', scratch]);
  const kept: { what: string; bytes: string | Buffer }[] = [];
  const self: AgentStack = {
    sshd,
    s,
    agentSock: socket.startsWith('/') ? socket : join(s.h.home, socket),
    scratch,
    knownHosts: knownHostsFile(scratch, sshd.port, sshd.hostKey),
    decision: 'session',
    cards: [],
    added: new Map(),
    async ssh(c) {
      const r = await runSsh({
        agent: self.agentSock,
        port: sshd.port,
        user: sshd.user,
        knownHosts: self.knownHosts,
        ...c,
      });
      self.keep(`ssh ${c.command ?? 'true'}`, r.stdout + r.stderr);
      return r;
    },
    entries(kind) {
      const all = auditList<Entry>(s);
      return kind === undefined ? all : all.filter((e) => e.kind === kind);
    },
    keep(what, bytes) {
      kept.push({ what, bytes });
    },
    async exposed(secrets) {
      const where: string[] = [];
      const look = (name: string, bytes: string | Buffer): void => {
        for (const secret of secrets) for (const e of exposures(bytes, secret)) where.push(`${e} (${name})`);
      };
      for (const k of kept) look(k.what, k.bytes);
      look('daemon log', s.d.logs());
      look('journal files', journalBytes(s.h.home));
      look('journal', await journalText(s.h));
      look('sshd log', sshd.logs());
      for (const f of filesUnder(s.h.home, (p) => p.endsWith('.sock') || /vault/.test(p))) look(f, readFileSync(f));
      return where;
    },
    async close() {
      await s.close();
      await sshd.close();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
  try {
    for (const c of o.creds ?? [{ name: 'deploy', key: 'ed25519', sshAgent: true }]) {
      const r = cli(s.h, [
        'cred',
        'add',
        '--file',
        s.h.file(`${c.name}.toml`, agentCredentialToml(sshd, c)),
        '--secret-file',
        sshd.keys[c.key].path,
        '--passphrase-file',
        s.h.passFile,
      ]);
      self.keep(`cred add ${c.name}`, r.stdout + r.stderr);
      self.added.set(c.name, r);
      if (r.code !== 0) throw new Error(`cred add ${c.name}: ${r.stderr}`);
    }
    await s.approver((card) => {
      self.cards.push(card);
      const d = self.decision;
      if (typeof d === 'function') return d(card);
      if (d === 'none') return null;
      return d === 'session' ? { decision: 'session', root_key: card.process.key } : { decision: d };
    });
    if (!(await eventually(() => canConnect(self.agentSock), 5000)))
      throw new Error(`the ssh-agent socket ${self.agentSock} does not accept connections`);
  } catch (e) {
    await self.close();
    throw e;
  }
  return self;
}

// A bare repository owned by the sshd's user in its home, and a local
// clone-to-be with one commit, for `git push` over ssh.
export function gitRepos(sshd: Sshd, scratch: string): { remotePath: string; work: string } {
  const remotePath = join(sshd.dir, 'home', 'repo.git');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remotePath], { env: BASE_ENV });
  execFileSync('chown', ['-R', `${sshd.uid}`, remotePath]);
  const work = join(scratch, 'work');
  mkdirSync(work);
  const git = (...a: string[]): void => {
    execFileSync('git', a, {
      cwd: work,
      env: {
        ...BASE_ENV,
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@example.test',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@example.test',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
      },
    });
  };
  git('init', '-q', '-b', 'main');
  writeFileSync(join(work, 'README'), 'pushed through an agent\n');
  git('add', 'README');
  git('commit', '-q', '-m', 'first');
  return { remotePath, work };
}

// The commit a bare repository's main points at ('' when none), read as root.
export function headOf(remotePath: string): string {
  try {
    return execFileSync('git', ['--git-dir', remotePath, 'rev-parse', '--verify', '-q', 'refs/heads/main'], {
      env: { ...BASE_ENV, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    })
      .toString()
      .trim();
  } catch {
    return '';
  }
}

// The secret parts of a private key file, the bytes no output may hold:
// the private scalar (an ed25519 seed, an ECDSA d) or RSA's d, p and q, and
// the file's text itself.
export function keySecrets(keyText: string): Buffer[] {
  const parsed = utils.parseKey(keyText);
  const k = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!k || k instanceof Error) throw new Error('keySecrets: not a key');
  const jwk = createPrivateKey(k.getPrivatePEM()).export({ format: 'jwk' }) as Record<string, string | undefined>;
  const parts = ['d', 'p', 'q'].flatMap((n) => (jwk[n] !== undefined ? [Buffer.from(jwk[n], 'base64url')] : []));
  return [...parts, Buffer.from(keyText.trim())];
}
