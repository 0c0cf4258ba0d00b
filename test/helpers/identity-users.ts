// Real users and a group for dedicated-user tests (SPEC §1): created with
// useradd/groupadd under names no one else uses, removed with userdel and
// groupdel on close, and at process exit if a test dies before its
// teardown. Commands run as a user through runuser(1) (as root: HOME, USER
// and the user's groups set, like `sudo -u`) or setpriv(1).
import { execFileSync, spawn, spawnSync, ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanEnv, ROOT } from './postern';

const SPAWN_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' };

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

// Root's own commands (useradd and the like), failing loudly.
export function asRoot(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { env: SPAWN_ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

export function uidOf(user: string): number {
  return Number(asRoot('id', ['-u', user]).trim());
}

export function gidOf(group: string): number {
  return Number(asRoot('getent', ['group', group]).split(':')[2]);
}

export interface Users {
  // A scratch directory every user may traverse (0755), removed on close.
  base: string;
  // `names.x` is unique to this run: "pt-<x>-<hex>".
  name(x: string): string;
  // Records a user or group this test made, so close() removes it.
  madeUser(name: string): void;
  madeGroup(name: string): void;
  close(): void;
}

export function makeUsers(): Users {
  const tag = randomBytes(3).toString('hex');
  const base = mkdtempSync(join(tmpdir(), 'pt-du-'));
  chmodSync(base, 0o755);
  const users: string[] = [];
  const groups: string[] = [];
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    // -f: even if a process of the user outlived the test.
    for (const u of users.reverse()) spawnSync('userdel', ['-f', u], { env: SPAWN_ENV });
    for (const g of groups.reverse()) spawnSync('groupdel', [g], { env: SPAWN_ENV });
    rmSync(base, { recursive: true, force: true });
  };
  process.once('exit', close);
  return {
    base,
    name: (x) => `pt-${x}-${tag}`,
    madeUser: (n) => void users.push(n),
    madeGroup: (n) => void groups.push(n),
    close,
  };
}

// The environment a user's shell would pass on, minus what postern refuses
// and tap's loader: env(1) removes NODE_OPTIONS after tap had its say.
function userEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  return cleanEnv({ POSTERN_DEBUG: undefined, ...extra });
}

// `runuser -u USER -- COMMAND...`, as the operations doc writes it (sudo -u).
export function runAs(
  user: string,
  argv: string[],
  o: { input?: string; env?: Record<string, string | undefined>; cwd?: string } = {},
): Run {
  const r = spawnSync('runuser', ['-u', user, '--', '/usr/bin/env', '-u', 'NODE_OPTIONS', ...argv], {
    env: userEnv(o.env ?? {}),
    input: o.input ?? '',
    encoding: 'utf8',
    timeout: 120_000,
    cwd: o.cwd,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// The same, running on: for the daemon and the approver.
export function spawnAs(
  user: string,
  argv: string[],
  o: { env?: Record<string, string | undefined>; setpriv?: { home: string } } = {},
): ChildProcess {
  const prefix = o.setpriv
    ? [
        'setpriv',
        `--reuid=${user}`,
        `--regid=${user}`,
        '--init-groups',
        '/usr/bin/env',
        '-u',
        'NODE_OPTIONS',
        `HOME=${o.setpriv.home}`,
      ]
    : ['runuser', '-u', user, '--', '/usr/bin/env', '-u', 'NODE_OPTIONS'];
  return spawn(prefix[0]!, [...prefix.slice(1), ...argv], {
    env: userEnv(o.env ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

// `setpriv --reuid --regid --init-groups COMMAND...`: a real process of the
// user, exec'd straight from this one (no PAM session in between).
export function setprivAs(
  user: string,
  argv: string[],
  o: { input?: string; cwd?: string; env?: Record<string, string | undefined> } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const p = spawn(
      'setpriv',
      [`--reuid=${user}`, `--regid=${user}`, '--init-groups', '/usr/bin/env', '-u', 'NODE_OPTIONS', ...argv],
      { env: userEnv(o.env ?? {}), cwd: o.cwd, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.stdin.on('error', () => undefined); // judged by exit code and output
    p.stdin.end(o.input ?? '');
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

// The project as `user` can run it: this checkout when every directory on
// its path lets the user through (here, /work/main), else a copy of what
// runs (dist, the native addon, node_modules) under `base` (a checkout in
// /root is not traversable by other users).
export function runnableRoot(u: Users, user: string): string {
  if (runAs(user, ['test', '-r', join(ROOT, 'dist', 'cli', 'main.js')]).code === 0) return ROOT;
  const app = join(u.base, 'app');
  mkdirSync(app, { mode: 0o755 });
  for (const part of ['package.json', 'dist', 'native', 'node_modules']) asRoot('cp', ['-a', join(ROOT, part), app]);
  asRoot('chmod', ['-R', 'a+rX', app]);
  return app;
}
