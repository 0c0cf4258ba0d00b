// Drive the real, compiled postern (dist/) from tests: a temporary home, the
// CLI as a child process, the daemon as a child process. `make test` builds
// dist/ before tap runs.
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { FORBIDDEN_ENV } from '../../shared/hardening';

import { ROOT } from './repo-root';

export { ROOT };
export const CLI = join(ROOT, 'dist', 'cli', 'main.js');
export const PASSPHRASE = 'correct horse battery staple';

if (!existsSync(CLI)) {
  throw new Error(`${CLI} is missing: run \`make build\` (make test does) before these tests`);
}

// The environment a user would have: tap's own NODE_OPTIONS (its loader) and
// anything else that postern refuses are removed.
export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of [...FORBIDDEN_ENV, 'POSTERN_HOME', 'POSTERN_CONFIG', 'NODE_V8_COVERAGE']) delete env[k];
  env['POSTERN_DEBUG'] = '1';
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export interface Home {
  dir: string;
  home: string;
  env: NodeJS.ProcessEnv;
  passFile: string;
  file(name: string, content: string | Buffer): string;
  cleanup(): void;
}

// A fresh directory holding a home (`home/`, not yet created) plus scratch
// files outside it, so "files under the home" means only postern's.
export function makeHome(): Home {
  const dir = mkdtempSync(join(tmpdir(), 'pt-'));
  const home = join(dir, 'h');
  const passFile = join(dir, 'pass');
  writeFileSync(passFile, PASSPHRASE + '\n', { mode: 0o600 });
  return {
    dir,
    home,
    env: cleanEnv({ POSTERN_HOME: home }),
    passFile,
    file(name, content) {
      const p = join(dir, name);
      writeFileSync(p, content, { mode: 0o600 });
      return p;
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

// tap re-inserts its own NODE_OPTIONS into every child's environment, even
// an explicit one; `env -u` removes it after tap has had its say. A test
// that wants NODE_OPTIONS set (to see postern refuse) passes it in `env`,
// and it is then kept.
// `prefix`: a command that runs node in turn (e.g. nsenter ... --).
function command(env: NodeJS.ProcessEnv, args: string[], prefix: string[] = []): [string, string[]] {
  const keep = env['NODE_OPTIONS'];
  return keep === undefined
    ? ['/usr/bin/env', ['-u', 'NODE_OPTIONS', ...prefix, process.execPath, ...args]]
    : ['/usr/bin/env', [`NODE_OPTIONS=${keep}`, ...prefix, process.execPath, ...args]];
}

export function cli(h: { env: NodeJS.ProcessEnv }, args: string[], input?: string | Buffer): Result {
  const [cmd, argv] = command(h.env, [CLI, ...args]);
  const r = spawnSync(cmd, argv, { env: h.env, input: input ?? '', encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function cliAsync(h: { env: NodeJS.ProcessEnv }, args: string[], input?: string | Buffer): Promise<Result> {
  return new Promise((resolvePromise) => {
    const [cmd, argv] = command(h.env, [CLI, ...args]);
    const p = spawn(cmd, argv, { env: h.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // A CLI that exits before reading its input is judged by its exit code
    // and output, not by the closed pipe.
    p.stdin.on('error', () => undefined);
    p.stdin.end(input ?? '');
    p.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

// `postern cred add` of a definition's text with its secret, proved with
// the test passphrase; files written under `name`.
export function credAdd(h: Home, name: string, definition: string, secret: string): Result {
  return cli(h, [
    'cred',
    'add',
    '--file',
    h.file(`${name}.toml`, definition),
    '--secret-file',
    h.file(`${name}.secret`, secret),
    '--passphrase-file',
    h.passFile,
  ]);
}

export function init(h: Home, extra: string[] = []): Result {
  return cli(h, ['init', '--kdf', 'interactive', '--passphrase-file', h.passFile, ...extra]);
}

export interface Daemon {
  proc: ChildProcess;
  logs(): string;
  exited: Promise<number | null>;
  stop(): Promise<number | null>;
}

export function canConnect(path: string): Promise<boolean> {
  return new Promise((r) => {
    const s = net.connect(path);
    s.once('connect', () => {
      s.destroy();
      r(true);
    });
    s.once('error', () => r(false));
  });
}

export interface DaemonOptions {
  prefix?: string[]; // a command that execs node, e.g. ["nsenter", "--net=...", "--"]
  startMs?: number; // how long the sockets may take to appear (default 20 s)
  // What node runs instead of the CLI's `daemon` command and `args`, e.g.
  // ["-e", "<a script that ends by requiring the CLI>"].
  nodeArgs?: string[];
}

export async function startDaemon(
  h: { env: NodeJS.ProcessEnv; home: string },
  args: string[] = [],
  o: DaemonOptions = {},
): Promise<Daemon> {
  const [cmd, argv] = command(h.env, o.nodeArgs ?? [CLI, 'daemon', ...args], o.prefix);
  const proc = spawn(cmd, argv, { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let logs = '';
  proc.stdout!.on('data', (d: Buffer) => (logs += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  let done = false;
  void exited.then(() => (done = true));
  const admin = join(h.home, 'admin.sock');
  const deadline = Date.now() + (o.startMs ?? 20_000);
  while (!(await canConnect(admin)) || !(await canConnect(join(h.home, 'agent.sock')))) {
    if (done) throw new Error(`daemon exited early:\n${logs}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`daemon did not start:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    proc,
    logs: () => logs,
    exited,
    async stop() {
      if (!done) proc.kill('SIGTERM');
      return exited;
    },
  };
}

// GET/POST on the agent socket, as an agent would.
export function agentRequest(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown; text: string }> {
  return new Promise((resolvePromise, reject) => {
    const s = net.connect(socketPath);
    const payload = body === undefined ? '' : JSON.stringify(body);
    let data = '';
    s.on('connect', () => {
      s.write(
        `${method} ${path} HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      );
    });
    s.on('data', (d: Buffer) => (data += d.toString()));
    s.on('error', reject);
    s.on('close', () => {
      const [head, ...rest] = data.split('\r\n\r\n');
      const text = rest.join('\r\n\r\n');
      const status = Number((head ?? '').split(' ')[1]);
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
      resolvePromise({ status, json, text });
    });
  });
}

// Poll until `check` holds (for output that crosses a pipe), up to `ms`.
export async function eventually(check: () => boolean | Promise<boolean>, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}

// A loopback port nothing listens on (bound, then released).
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolvePort(port));
    });
  });
}

// A request whose sender can hang up: the raw socket is returned with it.
export function openRequest(sock: string, body: unknown): { socket: net.Socket; reply: Promise<string> } {
  const socket = net.connect(sock);
  const payload = JSON.stringify(body);
  let data = '';
  socket.on('connect', () =>
    socket.write(
      `POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    ),
  );
  socket.on('data', (d: Buffer) => (data += d.toString()));
  socket.on('error', () => undefined);
  return { socket, reply: new Promise((resolve) => socket.on('close', () => resolve(data))) };
}

// A home made, initialised, its daemon started and unlocked; all of it
// undone when `t` ends.
export async function unlockedHome(t: { teardown(fn: () => unknown): void }): Promise<Home> {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  if (init(h).code !== 0) throw new Error('unlockedHome: postern init failed');
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const u = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  if (u.code !== 0) throw new Error(`unlockedHome: unlock failed: ${u.stderr}`);
  return h;
}
