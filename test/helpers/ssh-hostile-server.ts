// A hostile SSH server on loopback built on ssh2's Server class: it accepts
// a login (password or any public key) and then does whatever the test's
// exec handler does with the exec channel. It records every request the
// client made (channel types, session requests, auth methods).
import { Server, utils } from 'ssh2';
import type { Connection, ServerChannel, AuthContext } from 'ssh2';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';

export interface ExecInfo {
  command: string;
  conn: Connection;
  stream: ServerChannel;
  password: string | null;
}

export interface HostileOptions {
  hostKey?: string; // private key (OpenSSH); default a fresh ed25519
  // Decide authentication; default: accept password and publickey.
  auth?: (ctx: AuthContext, h: Hostile) => void;
  onExec?: (e: ExecInfo) => void;
  execNoReply?: boolean; // never answer the exec request
}

export interface Hostile {
  port: number;
  fingerprint: string;
  events: string[];
  passwords: string[];
  close(): Promise<void>;
}

export function fingerprintOfPublic(pub: string): string {
  const k = utils.parseKey(pub);
  if (k instanceof Error) throw k;
  const blob = (Array.isArray(k) ? k[0] : k)!.getPublicSSH();
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

export function newEd25519(): { private: string; public: string; fingerprint: string } {
  const kp = utils.generateKeyPairSync('ed25519');
  return { ...kp, fingerprint: fingerprintOfPublic(kp.public) };
}

export async function startHostile(o: HostileOptions = {}): Promise<Hostile> {
  const key = o.hostKey ? { private: o.hostKey, public: '' } : newEd25519();
  const parsed = utils.parseKey(key.private);
  if (parsed instanceof Error) throw parsed;
  const pk = Array.isArray(parsed) ? parsed[0]! : parsed;
  const fingerprint = `SHA256:${createHash('sha256').update(pk.getPublicSSH()).digest('base64').replace(/=+$/, '')}`;
  const events: string[] = [];
  const passwords: string[] = [];
  const conns = new Set<Connection>();
  const h: Hostile = { port: 0, fingerprint, events, passwords, close: async () => undefined };
  // ssh2's Server does not surface channel requests that arrive after exec
  // (e.g. a signal), but its debug output names them.
  const debug = (line: string): void => {
    const m = /Inbound: CHANNEL_REQUEST \(r:\d+, (signal|pty-req|env|x11-req|auth-agent-req@openssh.com)/.exec(line);
    if (m) events.push(`request:${m[1]}:${line}`);
  };
  const server = new Server({ hostKeys: [key.private], debug }, (conn) => {
    conns.add(conn);
    let password: string | null = null;
    conn.on('error', () => undefined);
    conn.on('close', () => conns.delete(conn));
    conn.on('authentication', (ctx) => {
      events.push(`auth:${ctx.method}`);
      if (ctx.method === 'password') {
        password = ctx.password;
        passwords.push(ctx.password);
      }
      if (o.auth) return o.auth(ctx, h);
      if (ctx.method === 'password' || ctx.method === 'publickey') ctx.accept();
      else ctx.reject(['password', 'publickey']);
    });
    conn.on('request', (_accept, reject, name) => {
      events.push(`global:${name}`);
      reject?.();
    });
    conn.on('tcpip', (_a, reject) => {
      events.push('channel:direct-tcpip');
      reject();
    });
    conn.on('openssh.streamlocal', (_a, reject) => {
      events.push('channel:direct-streamlocal');
      reject();
    });
    conn.on('ready', () => {
      conn.on('session', (accept) => {
        events.push('channel:session');
        const session = accept();
        for (const ev of ['pty', 'window-change', 'x11', 'env', 'signal', 'auth-agent', 'shell', 'subsystem', 'sftp']) {
          session.on(ev as 'pty', (_acc: unknown, rej: unknown, info: unknown) => {
            events.push(`session:${ev}:${JSON.stringify(info ?? null)}`);
            if (typeof rej === 'function') (rej as () => void)();
          });
        }
        session.on('exec', (acc, _rej, info) => {
          events.push(`session:exec:${info.command}`);
          if (o.execNoReply) return;
          const stream = acc();
          stream.on('error', () => undefined);
          if (o.onExec) o.onExec({ command: info.command, conn, stream, password });
          else {
            stream.write(`ran ${info.command}\n`);
            stream.exit(0);
            stream.end();
          }
        });
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  h.port = (server.address() as AddressInfo).port;
  h.close = () =>
    new Promise<void>((r) => {
      for (const c of conns) {
        try {
          c.end();
        } catch {
          /* gone */
        }
      }
      server.close(() => r());
      setTimeout(r, 1000).unref();
    });
  return h;
}

// Writes `chunks` one after the other, each in its own channel data packet,
// `gapMs` apart.
export async function writeSlowly(
  w: { write(b: Buffer | string): unknown },
  chunks: (Buffer | string)[],
  gapMs = 30,
): Promise<void> {
  for (const c of chunks) {
    w.write(c);
    await new Promise((r) => setTimeout(r, gapMs));
  }
}

// The daemon's resident memory (kB).
export function rssKb(pid: number): number {
  const { readFileSync } = require('node:fs') as typeof import('node:fs');
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : -1;
}
