// A smart-HTTP git server for the HTTPS upstream: each request runs Debian's
// `git http-backend` as a CGI over a directory of bare repositories
// (receive-pack enabled), after Basic authentication as
// x-access-token:<secret>; a request without it gets 401 with a Basic
// challenge, as GitHub answers.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Handler } from './https-upstream';

export const GIT_HTTP_BACKEND = '/usr/lib/git-core/git-http-backend';

export function gitHttpAvailable(): string | null {
  if (!existsSync(GIT_HTTP_BACKEND)) return `${GIT_HTTP_BACKEND} is not installed`;
  try {
    execFileSync('git', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'git is not installed';
  }
  return null;
}

// A bare repository `name` under root, with receive-pack enabled and one
// commit on main holding README.
export function makeBareRepo(root: string, name: string): string {
  const bare = join(root, name);
  const work = join(root, `${name}-seed`);
  mkdirSync(work, { recursive: true });
  const git = (cwd: string, ...args: string[]): void => {
    execFileSync('git', ['-c', 'init.defaultBranch=main', ...args], { cwd, stdio: 'ignore' });
  };
  git(root, 'init', '--bare', bare);
  git(bare, 'config', 'http.receivepack', 'true');
  git(work, 'init');
  execFileSync('sh', ['-c', 'echo hello > README'], { cwd: work });
  git(work, 'add', 'README');
  git(work, '-c', 'user.name=seed', '-c', 'user.email=seed@example.test', 'commit', '-m', 'seed');
  git(work, 'push', bare, 'HEAD:main');
  return bare;
}

// Splits a CGI reply into status, headers and body.
function cgiReply(out: Buffer): { status: number; headers: [string, string][]; body: Buffer } {
  let end = out.indexOf('\r\n\r\n');
  let sep = 4;
  if (end < 0) {
    end = out.indexOf('\n\n');
    sep = 2;
  }
  const head = out.subarray(0, end).toString('latin1');
  const headers: [string, string][] = [];
  let status = 200;
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
    else headers.push([name, value]);
  }
  return { status, headers, body: out.subarray(end + sep) };
}

export function gitHttpHandler(root: string, secret: string): Handler {
  const expected = `Basic ${Buffer.from(`x-access-token:${secret}`).toString('base64')}`;
  return (req, body, res) => {
    if (req.headers['authorization'] !== expected) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"', 'content-length': 0 });
      res.end();
      return;
    }
    const url = new URL(req.url ?? '/', 'https://git.example.test');
    return new Promise<void>((resolve) => {
      const cgi = spawn(GIT_HTTP_BACKEND, [], {
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          GIT_PROJECT_ROOT: root,
          GIT_HTTP_EXPORT_ALL: '1',
          REMOTE_USER: 'x-access-token',
          REMOTE_ADDR: '127.0.0.1',
          PATH_INFO: decodeURIComponent(url.pathname),
          QUERY_STRING: url.search.slice(1),
          CONTENT_TYPE: req.headers['content-type'] ?? '',
          CONTENT_LENGTH: String(body.length),
          REQUEST_METHOD: req.method ?? 'GET',
          GATEWAY_INTERFACE: 'CGI/1.1',
          SERVER_PROTOCOL: 'HTTP/1.1',
        },
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      const out: Buffer[] = [];
      cgi.stdout.on('data', (d: Buffer) => out.push(d));
      cgi.on('close', () => {
        const r = cgiReply(Buffer.concat(out));
        res.writeHead(r.status, [...r.headers, ['content-length', String(r.body.length)]].flat());
        res.end(r.body);
        resolve();
      });
      // The backend may answer and exit before reading the whole body (it
      // refuses, or needs none); its answer is what a real server would send,
      // so a closed pipe here is not the test's failure.
      cgi.stdin.on('error', () => undefined);
      cgi.stdin.end(body);
    });
  };
}
