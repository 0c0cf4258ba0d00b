// A real OpenSSH server for SSH tests: Debian's /usr/sbin/sshd, run as root
// in the foreground with its own configuration, host keys (ed25519 unless
// other types are asked for) and log in
// a temporary directory, listening on a free 127.0.0.1 port, and a throwaway
// local user (created with useradd, deleted on close and at process exit)
// whose authorized_keys holds client keys of every type and format a
// credential may carry.
//
// Behaviour of this sshd (OpenSSH 9.2, Debian 12) that SSH tests rely on:
// - Commands run as `/bin/sh -c <command>` (dash, which forks the last
//   command rather than exec'ing it) in a new session; a `signal` channel
//   request reaches the whole process group, so `sleep 30` dies with its
//   shell.
// - Closing the channel or the connection WITHOUT a signal leaves a running
//   command alive (re-parented to init); sshd also withholds its
//   CHANNEL_CLOSE until the command exits. Only a signal ends it.
// - It shows one host key per handshake: the first type in the client's
//   list of host key algorithms that it has a key of (ssh2 lists ed25519
//   first, then ECDSA, then RSA); with none, it logs "no matching host key
//   type found ... [preauth]".
// - The log (LogLevel VERBOSE) has one "Connection from" line per accepted
//   TCP connection, "Accepted publickey for <user> ... <key fingerprint>" or
//   "Accepted password for <user>" per login.
// - ssh2 (1.17) reads OpenSSH-format keys (ed25519, rsa, ecdsa; encrypted
//   ones with their passphrase) and PEM rsa/ecdsa; it cannot read PKCS#8
//   ("BEGIN PRIVATE KEY"), which OpenSSH itself accepts (`rsaPkcs8`).
import { execFile, execFileSync, spawn, ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { freePort } from './postern';

const SSHD = '/usr/sbin/sshd';
const SETPRIV = '/usr/bin/setpriv';
const PRIVSEP_DIR = '/run/sshd';
const USER_PREFIX = 'postern-t-';
const DIR_PREFIX = 'pt-sshd-';
const SPAWN_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' };

export type KeyType = 'ed25519' | 'rsa' | 'ecdsa';
export type KeyFormat = 'openssh' | 'pem' | 'pkcs8';

export interface ClientKey {
  name: ClientKeyName;
  type: KeyType;
  format: KeyFormat;
  privateKey: string; // the private key file's text
  publicKey: string; // its authorized_keys line
  fingerprint: string; // "SHA256:..." as ssh-keygen -lf prints it (and sshd logs it)
  passphrase?: string; // set for the encrypted key only
  path: string; // the private key file (root-owned, 0600)
}

// Authorised for `user`:
//   ed25519, rsa, ecdsa  OpenSSH format, no passphrase
//   rsaPem, ecdsaPem     PEM ("BEGIN RSA/EC PRIVATE KEY"), no passphrase
//   encrypted            OpenSSH-format ed25519 under `passphrase`
//   rsaPkcs8             PKCS#8 ("BEGIN PRIVATE KEY"): OpenSSH reads it, ssh2 does not
// Not authorised:
//   stranger             OpenSSH-format ed25519
export type ClientKeyName = 'ed25519' | 'rsa' | 'ecdsa' | 'rsaPem' | 'ecdsaPem' | 'encrypted' | 'rsaPkcs8' | 'stranger';

export interface Sshd {
  host: '127.0.0.1';
  port: number;
  pid: number; // the listening sshd
  dir: string; // temporary directory (config, host keys, log, the user's home)
  hostKey: string; // the first host key's public key line ("ssh-ed25519 AAAA...")
  hostKeyFingerprint: string; // "SHA256:..." of the first host key, as ssh-keygen -lf prints it
  hostKeys: HostKey[]; // every host key, in the order of SshdOptions.hostKeyTypes
  otherHostKeyFingerprint: string; // a well-formed fingerprint of a different ed25519 key
  user: string; // the throwaway login user (home in dir, shell /bin/sh)
  uid: number;
  keys: Record<ClientKeyName, ClientKey>;
  password?: { user: string; password: string }; // only with { passwordUser: true }; user === this.user
  secondUser?: { user: string; uid: number }; // only with { secondUser: true }: the same authorized_keys, its own home
  secondServer?: SecondServer; // only with { secondServer: true }
  logs(): string; // sshd's log so far (LF line ends)
  processesOf(user: string): string[]; // command lines of that user's live (non-zombie) processes
  connections(): number; // TCP connections sshd has accepted so far
  close(): Promise<void>; // stops sshd and every process it started, deletes the user and dir
}

// Another sshd for the same users (and authorized keys), on its own port with
// its own ed25519 host key: a server a credential's pin does not name.
export interface SecondServer {
  host: '127.0.0.1';
  port: number;
  pid: number;
  hostKey: string; // its public key line
  hostKeyFingerprint: string;
  hostKeys: HostKey[];
  logs(): string;
}

export interface HostKey {
  type: KeyType;
  keyType: string; // the type in the key blob, as ssh-keyscan prints it: "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256"
  publicKey: string; // the public key line
  fingerprint: string; // "SHA256:..." as `ssh-keyscan HOST | ssh-keygen -lf -` prints it
  privateKeyPath: string; // the host's private key file (root-owned, 0600), for tests that sign as the server
}

export interface SshdOptions {
  passwordUser?: boolean; // give `user` a password and turn on PasswordAuthentication
  // The host key types, one key each (ecdsa: nistp256), in sshd_config's
  // order; default ['ed25519'].
  hostKeyTypes?: KeyType[];
  // sshd_config lines: one whose keyword is already set replaces that line
  // (sshd keeps the first value it reads), any other is added.
  extraConfig?: string[];
  // A second login user whose authorized_keys is the same as `user`'s.
  secondUser?: boolean;
  // A second sshd (see SecondServer), with the same configuration otherwise.
  secondServer?: boolean;
}

// ---------------------------------------------------------------------------
// Processes, read from /proc.

interface Proc {
  pid: number;
  ppid: number;
  state: string;
  euid: number;
}

function readProc(pid: number): Proc | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm may hold spaces and parentheses: the fields follow the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const uids = /^Uid:\s+(\d+)\s+(\d+)/m.exec(status);
    return { pid, ppid: Number(rest[1]), state: rest[0] ?? '?', euid: uids ? Number(uids[2]) : -1 };
  } catch {
    return null; // gone meanwhile
  }
}

function allProcs(): Proc[] {
  const out: Proc[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const p = readProc(Number(e));
    if (p) out.push(p);
  }
  return out;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ');
  } catch {
    return '';
  }
}

function descendants(root: number, procs: Proc[]): number[] {
  const children = new Map<number, number[]>();
  for (const p of procs) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const out: number[] = [];
  const todo = [root];
  while (todo.length > 0) {
    for (const c of children.get(todo.pop()!) ?? []) {
      out.push(c);
      todo.push(c);
    }
  }
  return out;
}

function killPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function uidOf(user: string): number | null {
  try {
    return Number(
      execFileSync('id', ['-u', user], { env: SPAWN_ENV, stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim(),
    );
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------
// Commands.

function run(file: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(file, args, { env: SPAWN_ENV }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

async function mustRun(file: string, args: string[], input?: string): Promise<string> {
  const r = await run(file, args, input);
  if (r.code !== 0) throw new Error(`${file} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

// useradd/userdel/chpasswd lock /etc/passwd and /etc/shadow; parallel test
// files may meet there (exit code 10, "cannot lock"), so try again.
async function shadowTool(file: string, args: string[], input?: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const r = await run(file, args, input);
    if (r.code === 0) return;
    if (attempt >= 20 || !/lock|try again/i.test(r.stderr)) {
      throw new Error(`${file} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
    }
    await delay(100 + Math.floor(Math.random() * 200));
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function fingerprint(pubPath: string): Promise<string> {
  const out = await mustRun('ssh-keygen', ['-l', '-f', pubPath]);
  const fp = out.trim().split(/\s+/)[1] ?? '';
  if (!/^SHA256:[A-Za-z0-9+/]{43}$/.test(fp)) throw new Error(`unexpected ssh-keygen -l output: ${out}`);
  return fp;
}

// ---------------------------------------------------------------------------
// Client keys: generated once per process (RSA generation takes a second),
// written into each server's directory.

interface KeySpec {
  name: ClientKeyName;
  type: KeyType;
  format: KeyFormat;
  passphrase?: string;
}

const KEY_SPECS: KeySpec[] = [
  { name: 'ed25519', type: 'ed25519', format: 'openssh' },
  { name: 'rsa', type: 'rsa', format: 'openssh' },
  { name: 'ecdsa', type: 'ecdsa', format: 'openssh' },
  { name: 'rsaPem', type: 'rsa', format: 'pem' },
  { name: 'ecdsaPem', type: 'ecdsa', format: 'pem' },
  { name: 'encrypted', type: 'ed25519', format: 'openssh', passphrase: `pp-${randomBytes(9).toString('hex')}` },
  { name: 'rsaPkcs8', type: 'rsa', format: 'pkcs8' },
  { name: 'stranger', type: 'ed25519', format: 'openssh' },
];

type KeyMaterial = Omit<ClientKey, 'path'>;
let keyMaterial: Promise<Record<ClientKeyName, KeyMaterial>> | undefined;

function generateKeys(): Promise<Record<ClientKeyName, KeyMaterial>> {
  keyMaterial ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), `${DIR_PREFIX}keys-`));
    try {
      const made = await Promise.all(
        KEY_SPECS.map(async (s): Promise<KeyMaterial> => {
          const path = join(dir, s.name);
          const args = ['-q', '-t', s.type, '-N', s.passphrase ?? '', '-C', `postern-test-${s.name}`, '-f', path];
          if (s.format !== 'openssh') args.push('-m', s.format === 'pem' ? 'PEM' : 'PKCS8');
          await mustRun('ssh-keygen', args);
          return {
            name: s.name,
            type: s.type,
            format: s.format,
            privateKey: readFileSync(path, 'utf8'),
            publicKey: readFileSync(`${path}.pub`, 'utf8').trim(),
            fingerprint: await fingerprint(`${path}.pub`),
            ...(s.passphrase !== undefined ? { passphrase: s.passphrase } : {}),
          };
        }),
      );
      return Object.fromEntries(made.map((k) => [k.name, k])) as Record<ClientKeyName, KeyMaterial>;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })().catch((e: unknown) => {
    keyMaterial = undefined; // let the next server try again
    throw e;
  });
  return keyMaterial;
}

// ---------------------------------------------------------------------------
// Cleanup of servers still running when the process ends (normally, by an
// uncaught error, or by SIGINT/SIGTERM/SIGHUP).

interface Live {
  child?: ChildProcess;
  user: string;
  uid: number; // -1 until the user exists
  dir: string;
  others: { child?: ChildProcess; user?: string; uid: number }[]; // a second server or user
}

const live = new Set<Live>();
const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function killEverything(l: Live): number[] {
  const procs = allProcs();
  const pids = new Set<number>();
  const children = [l.child, ...l.others.map((o) => o.child)];
  for (const c of children) if (c?.pid !== undefined) for (const d of descendants(c.pid, procs)) pids.add(d);
  const uids = new Set([l.uid, ...l.others.map((o) => o.uid)].filter((u) => u > 0));
  for (const p of procs) if (uids.has(p.euid)) pids.add(p.pid);
  const alive = [...pids].filter((pid) => {
    const p = readProc(pid);
    return p !== null && p.state !== 'Z';
  });
  for (const pid of alive) killPid(pid, 'SIGKILL');
  return alive;
}

function cleanupSync(l: Live): void {
  for (const c of [l.child, ...l.others.map((o) => o.child)])
    if (c?.pid !== undefined && c.exitCode === null && c.signalCode === null) killPid(c.pid, 'SIGKILL');
  killEverything(l);
  const users = [{ user: l.user, uid: l.uid }, ...l.others];
  for (const u of users) {
    if (u.user === undefined || u.uid <= 0) continue;
    try {
      execFileSync('userdel', ['-f', u.user], { env: SPAWN_ENV, stdio: 'ignore' });
    } catch {
      // best effort
    }
  }
  rmSync(l.dir, { recursive: true, force: true });
}

function onExit(): void {
  for (const l of live) cleanupSync(l);
  live.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  onExit();
  unregister();
  // Let the signal take its usual course (or whichever other handlers the
  // process has).
  process.kill(process.pid, signal);
}

function register(l: Live): void {
  if (live.size === 0) {
    process.on('exit', onExit);
    for (const s of SIGNALS) process.on(s, onSignal);
  }
  live.add(l);
}

function unregister(l?: Live): void {
  if (l) live.delete(l);
  if (live.size === 0) {
    process.removeListener('exit', onExit);
    for (const s of SIGNALS) process.removeListener(s, onSignal);
  }
}

// Users (and their directories) left by a test process that died without
// cleaning up: the creating pid is in the name.
async function removeStaleUsers(): Promise<void> {
  const passwd = readFileSync('/etc/passwd', 'utf8');
  for (const line of passwd.split('\n')) {
    const m = new RegExp(`^(${USER_PREFIX}(\\d+)-[0-9a-f]+):[^:]*:(\\d+):[^:]*:[^:]*:([^:]*):`).exec(line);
    if (!m) continue;
    const [, user, pid, uid, home] = m;
    try {
      process.kill(Number(pid), 0);
      continue; // its creator still runs
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') continue;
    }
    for (const p of allProcs()) if (p.euid === Number(uid)) killPid(p.pid, 'SIGKILL');
    await run('userdel', ['-f', user!]);
    const dir = dirname(home!);
    if (basename(dir).startsWith(DIR_PREFIX)) rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8').replace(/\r\n/g, '\n');
  } catch {
    return '';
  }
}

function config(o: {
  port: number;
  dir: string;
  user: string;
  password: boolean;
  hostKeys: string[];
  extra?: string[];
}): string {
  const keyword = (line: string): string => line.trim().split(/\s+/)[0]!.toLowerCase();
  const extra = new Map((o.extra ?? []).map((line) => [keyword(line), line]));
  const lines = [
    `ListenAddress 127.0.0.1:${o.port}`,
    'AddressFamily inet',
    ...o.hostKeys.map((path) => `HostKey ${path}`),
    `PidFile ${join(o.dir, 'sshd.pid')}`,
    // Relative to the user's home (in dir): StrictModes walks from the file
    // up to the home directory only, so a 1777 /tmp above it does not matter.
    'AuthorizedKeysFile .ssh/authorized_keys',
    'StrictModes yes',
    `AllowUsers ${o.user}`,
    'PermitRootLogin no',
    'PubkeyAuthentication yes',
    `PasswordAuthentication ${o.password ? 'yes' : 'no'}`,
    'PermitEmptyPasswords no',
    'KbdInteractiveAuthentication no',
    'HostbasedAuthentication no',
    // Without PAM, sshd checks passwords against /etc/shadow itself and
    // needs no PAM session modules (pam_loginuid fails in containers).
    'UsePAM no',
    'DisableForwarding yes',
    'AllowTcpForwarding no',
    'AllowAgentForwarding no',
    'X11Forwarding no',
    'PermitTunnel no',
    'PermitTTY no',
    'PermitUserRC no',
    'PermitUserEnvironment no',
    'PrintMotd no',
    'PrintLastLog no',
    'UseDNS no',
    'LogLevel VERBOSE',
    'LoginGraceTime 30',
    // A benchmark opens 50 connections at once; the default 10:30:100 would
    // drop some of them at random while unauthenticated.
    'MaxStartups 200',
    'MaxSessions 64',
    'MaxAuthTries 6',
  ];
  const kept = lines.map((line) => {
    const replaced = extra.get(keyword(line));
    extra.delete(keyword(line));
    return replaced ?? line;
  });
  return [...kept, ...extra.values(), ''].join('\n');
}

interface Started {
  child: ChildProcess;
  port: number;
}

// Start sshd on a free port; another process may take the port between our
// probe and sshd's bind, so a bind failure means: try another.
async function launch(
  dir: string,
  user: string,
  password: boolean,
  hostKeys: string[],
  extra?: string[],
): Promise<Started> {
  const log = join(dir, 'sshd.log');
  const errPath = join(dir, 'sshd.stderr');
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const cfg = join(dir, 'sshd_config');
    writeFileSync(cfg, config({ port, dir, user, password, hostKeys, extra }), { mode: 0o600 });
    rmSync(log, { force: true });
    const errFd = openSync(errPath, 'w', 0o600);
    // setpriv --pdeathsig: the listener dies with this process even if no
    // cleanup code gets to run. Output goes to files, never to pipes that
    // would keep tap waiting on stray session processes.
    const child = spawn(SETPRIV, ['--pdeathsig', 'TERM', SSHD, '-D', '-E', log, '-f', cfg], {
      stdio: ['ignore', 'ignore', errFd],
      env: SPAWN_ENV,
    });
    closeSync(errFd);
    let spawnError: Error | undefined;
    child.on('error', (e) => (spawnError = e));
    const listening = `Server listening on 127.0.0.1 port ${port}.`;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (readText(log).includes(listening)) return { child, port };
      if (spawnError) throw new Error(`cannot run ${SETPRIV} ${SSHD}: ${spawnError.message}`);
      if (child.exitCode !== null || child.signalCode !== null) break;
      if (Date.now() > deadline) {
        killPid(child.pid!, 'SIGKILL');
        throw new Error(`sshd did not start listening within 10 s:\n${readText(log)}${readText(errPath)}`);
      }
      await delay(20);
    }
    const why = readText(log) + readText(errPath);
    if (/Address already in use/.test(why) && attempt < 5) continue;
    throw new Error(`sshd exited (${child.exitCode ?? child.signalCode}):\n${why}`);
  }
}

// Stops a listening sshd and the session processes it started.
async function stopListener(c: ChildProcess): Promise<void> {
  const exited =
    c.exitCode !== null || c.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((r) => c.once('exit', () => r()));
  // Session processes outlive the listener: note them first.
  const sessions = descendants(c.pid!, allProcs());
  killPid(c.pid!, 'SIGTERM');
  const timer = setTimeout(() => killPid(c.pid!, 'SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
  for (const pid of sessions) killPid(pid, 'SIGKILL');
}

async function hostKeyOf(type: KeyType, path: string): Promise<HostKey> {
  const publicKey = readFileSync(`${path}.pub`, 'utf8').trim().split(' ').slice(0, 2).join(' ');
  return {
    type,
    keyType: publicKey.split(' ')[0]!,
    publicKey,
    fingerprint: await fingerprint(`${path}.pub`),
    privateKeyPath: path,
  };
}

function writeAuthorizedKeys(home: string, lines: string[], uid: number, gid: number): void {
  const sshDir = join(home, '.ssh');
  mkdirSync(sshDir, { recursive: true, mode: 0o700 });
  writeFileSync(join(sshDir, 'authorized_keys'), lines.join('\n') + '\n', { mode: 0o600 });
  for (const p of [home, sshDir, join(sshDir, 'authorized_keys')]) chownSync(p, uid, gid);
}

// The second login user, named like the first (so removeStaleUsers finds
// it), with its home in dir.
async function addSecondUser(l: Live, dir: string): Promise<{ user: string; uid: number; gid: number; home: string }> {
  const user = `${USER_PREFIX}${process.pid}-${randomBytes(3).toString('hex')}`;
  const home = join(dir, 'home2');
  const entry: Live['others'][number] = { user, uid: -1 };
  l.others.push(entry);
  await shadowTool('useradd', ['-M', '-N', '-d', home, '-s', '/bin/sh', '-p', '*', user]);
  entry.uid = uidOf(user) ?? -1;
  if (entry.uid <= 0) throw new Error(`useradd ${user}: no uid`);
  const gid = Number(execFileSync('id', ['-g', user], { env: SPAWN_ENV }).toString().trim());
  return { user, uid: entry.uid, gid, home };
}

async function startSecondServer(
  l: Live,
  dir: string,
  allowed: string,
  password: boolean,
  extra?: string[],
): Promise<{ server: SecondServer; stop(): Promise<void> }> {
  mkdirSync(dir, { mode: 0o700 });
  const keyPath = join(dir, 'host_ed25519');
  await mustRun('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'postern-test-second-host', '-f', keyPath]);
  const hostKey = await hostKeyOf('ed25519', keyPath);
  const started = await launch(dir, allowed, password, [keyPath], extra);
  const child = started.child;
  l.others.push({ child, uid: -1 });
  const logPath = join(dir, 'sshd.log');
  let finalLog: string | undefined;
  return {
    server: {
      host: '127.0.0.1',
      port: started.port,
      pid: child.pid!,
      hostKey: hostKey.publicKey,
      hostKeyFingerprint: hostKey.fingerprint,
      hostKeys: [hostKey],
      logs: () => finalLog ?? readText(logPath),
    },
    async stop() {
      await stopListener(child);
      finalLog = readText(logPath);
    },
  };
}

export async function startSshd(o: SshdOptions = {}): Promise<Sshd> {
  if (process.getuid?.() !== 0) throw new Error('startSshd needs root (sshd, useradd)');
  mkdirSync(PRIVSEP_DIR, { recursive: true, mode: 0o755 });
  await removeStaleUsers();

  const keysPromise = generateKeys();
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  chmodSync(dir, 0o711); // the user must reach its home below it
  const user = `${USER_PREFIX}${process.pid}-${randomBytes(3).toString('hex')}`;
  const home = join(dir, 'home');
  const password = o.passwordUser ? `Pw-${randomBytes(12).toString('hex')}` : undefined;

  const l: Live = { user, uid: -1, dir, others: [] };
  register(l);
  try {
    // "*" rather than useradd's default "!": with UsePAM no, sshd refuses
    // every login, key logins included, to an account locked with "!".
    // -N: no group of its own (one file fewer to lock and clean up).
    await shadowTool('useradd', ['-M', '-N', '-d', home, '-s', '/bin/sh', '-p', '*', user]);
    l.uid = uidOf(user) ?? -1;
    if (l.uid <= 0) throw new Error(`useradd ${user}: no uid`);
    const uid = l.uid;
    const gid = Number(execFileSync('id', ['-g', user], { env: SPAWN_ENV }).toString().trim());
    if (password !== undefined) await shadowTool('chpasswd', [], `${user}:${password}\n`);
    const second = o.secondUser ? await addSecondUser(l, dir) : undefined;

    const types = o.hostKeyTypes ?? ['ed25519'];
    if (types.length === 0 || new Set(types).size !== types.length)
      throw new Error(`hostKeyTypes: give distinct types, at least one (${types.join(', ')})`);
    const hostKeyPaths = types.map((type) => join(dir, `host_${type}`));
    const otherKeyPath = join(dir, 'other_ed25519');
    await Promise.all([
      ...types.map((type, i) =>
        mustRun('ssh-keygen', ['-q', '-t', type, '-N', '', '-C', `postern-test-host-${type}`, '-f', hostKeyPaths[i]!]),
      ),
      mustRun('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'postern-test-other-host', '-f', otherKeyPath]),
    ]);
    const hostKeys: HostKey[] = await Promise.all(types.map((type, i) => hostKeyOf(type, hostKeyPaths[i]!)));
    const otherHostKeyFingerprint = await fingerprint(`${otherKeyPath}.pub`);

    const material = await keysPromise;
    const keyDir = join(dir, 'keys');
    mkdirSync(keyDir, { mode: 0o700 });
    const keys = {} as Record<ClientKeyName, ClientKey>;
    for (const k of Object.values(material)) {
      const path = join(keyDir, k.name);
      writeFileSync(path, k.privateKey, { mode: 0o600 });
      keys[k.name] = { ...k, path };
    }

    const authorized = Object.values(keys)
      .filter((k) => k.name !== 'stranger')
      .map((k) => k.publicKey);
    writeAuthorizedKeys(home, authorized, uid, gid);
    if (second) writeAuthorizedKeys(second.home, authorized, second.uid, second.gid);

    const allowed = second ? `${user} ${second.user}` : user;
    const started = await launch(dir, allowed, password !== undefined, hostKeyPaths, o.extraConfig);
    const child = started.child;
    l.child = child;
    const secondServer = o.secondServer
      ? await startSecondServer(l, join(dir, 'second'), allowed, password !== undefined, o.extraConfig)
      : undefined;

    const logPath = join(dir, 'sshd.log');
    let finalLog: string | undefined;
    let closing: Promise<void> | undefined;
    const self: Sshd = {
      host: '127.0.0.1',
      port: started.port,
      pid: child.pid!,
      dir,
      hostKey: readFileSync(`${hostKeyPaths[0]!}.pub`, 'utf8').trim(),
      hostKeyFingerprint: hostKeys[0]!.fingerprint,
      hostKeys,
      otherHostKeyFingerprint,
      user,
      uid,
      keys,
      ...(password !== undefined ? { password: { user, password } } : {}),
      ...(second ? { secondUser: { user: second.user, uid: second.uid } } : {}),
      ...(secondServer ? { secondServer: secondServer.server } : {}),
      logs: () => finalLog ?? readText(logPath),
      processesOf(name: string): string[] {
        const id = name === user ? (finalLog === undefined ? uid : null) : uidOf(name);
        if (id === null) return [];
        return allProcs()
          .filter((p) => p.euid === id && p.state !== 'Z')
          .map((p) => cmdline(p.pid))
          .filter((c) => c !== '');
      },
      connections: () => (self.logs().match(/^Connection from \S+ port \d+ on /gm) ?? []).length,
      close(): Promise<void> {
        closing ??= (async () => {
          await stopListener(child);
          if (secondServer) await secondServer.stop();
          for (let i = 0; i < 50 && killEverything(l).length > 0; i++) await delay(20);
          finalLog = readText(logPath);
          await shadowTool('userdel', ['-f', user]);
          if (second) await shadowTool('userdel', ['-f', second.user]);
          unregister(l);
          rmSync(dir, { recursive: true, force: true });
        })();
        return closing;
      },
    };
    return self;
  } catch (e) {
    cleanupSync(l);
    unregister(l);
    throw e;
  }
}
