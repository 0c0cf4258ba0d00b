// SSH connections (SPEC §6.6): to the checked address and only to it, the
// server's host key compared with the pinned fingerprint before any
// authentication is attempted, and kept for reuse per (credential, checked
// address, port) for a short idle time, so a burst of commands pays one
// handshake. Nothing but exec channels is ever opened: no pty, no agent or
// port forwarding, no environment.
import { createHash } from 'node:crypto';
import net from 'node:net';
import { Client, ConnectConfig } from 'ssh2';
import { Refusal } from '../../shared/errors';
import type { SshCredentialDef } from '../../shared/credential';

// OpenSSH's default MaxSessions is 10; stay under it.
export const MAX_CHANNELS_PER_CONNECTION = 8;
// Connections kept per (credential, address, port) at most.
const MAX_CONNECTIONS_PER_KEY = 8;

export function fingerprintOf(hostKey: Buffer): string {
  return `SHA256:${createHash('sha256').update(hostKey).digest('base64').replace(/=+$/, '')}`;
}

export interface SshTarget {
  def: SshCredentialDef;
  address: string;
}

export interface Lease {
  client: Client;
  reused: boolean;
  // Hand the connection back when the channel is closed.
  release(): void;
  // The connection is unusable (it failed under the channel): drop it.
  discard(): void;
}

interface Conn {
  client: Client;
  channels: number;
  idle: NodeJS.Timeout | null;
  closed: boolean;
}

function connectFailure(e: unknown, host: string, hostKeyRejected: boolean, timedOut: boolean): Refusal {
  if (hostKeyRejected) {
    return new Refusal('host_key_mismatch', `the host key of ${host} is not the pinned one; nothing was sent. If the server's key really changed, a human must check it and update host_key with \`postern cred update\``);
  }
  const err = e as { code?: string; level?: string };
  if (timedOut || err?.level === 'client-timeout') {
    return new Refusal('upstream_timeout', `connecting to ${host} over SSH timed out; the command was not sent — retry later`, { maybe_executed: false });
  }
  if (err?.level === 'client-authentication') {
    return new Refusal('upstream_error', `${host} refused the credential's login; the command was not sent — a human should check the user and secret of the credential`);
  }
  if (err?.code === 'ECONNREFUSED') return new Refusal('upstream_error', `${host} refused the SSH connection; check the host and port`);
  return new Refusal('upstream_error', `the SSH connection to ${host} failed (${err?.code ?? err?.level ?? 'unknown'}); the command was not sent`);
}

// Connects with the secret, which the caller wipes once this resolves.
export function connectSsh(t: SshTarget, secret: Buffer, timeoutMs: number): Promise<Client> {
  const { def, address } = t;
  return new Promise((resolve, reject) => {
    const client = new Client();
    let hostKeyRejected = false;
    let timedOut = false;
    let settled = false;
    const timer = setTimeout(() => {
      timedOut = true;
      client.end();
      fail(null);
    }, timeoutMs);
    const fail = (e: unknown): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.end();
      reject(connectFailure(e, def.host, hostKeyRejected, timedOut));
    };
    client.on('ready', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(client);
    });
    client.on('error', fail);
    client.on('close', () => fail(new Error('closed')));
    // The TCP connection goes to the checked address, made here so nothing
    // else resolves anything. No Nagle: OpenSSH leaves it on for exec
    // sessions, and the small packets of a short command would otherwise
    // wait for delayed ACKs (tens of milliseconds a command).
    const sock = net.connect({ host: address, port: def.port });
    sock.setNoDelay(true);
    const config: ConnectConfig = {
      sock,
      username: def.user,
      // The pinned fingerprint is checked during key exchange, before any
      // authentication: on a mismatch the secret is never offered.
      hostVerifier: (key: Buffer) => {
        const ok = fingerprintOf(key) === def.host_key;
        if (!ok) hostKeyRejected = true;
        return ok;
      },
      readyTimeout: timeoutMs,
      tryKeyboard: false,
      keepaliveInterval: 5_000,
      keepaliveCountMax: 3,
    };
    if (def.auth === 'key') config.privateKey = secret;
    else config.password = secret.toString('utf8');
    try {
      client.connect(config);
    } catch (e) {
      fail(e);
    }
  });
}

export class SshConnections {
  private conns = new Map<string, Conn[]>();

  // `idleMs`: how long a connection is kept after its last channel closed
  // (ssh.connection_idle), asked each time so a config change applies.
  constructor(private readonly idleMs: () => number) {}

  // A connection with room for one more channel: a kept one, or a new one
  // made by `open` (which holds the secret only while it connects).
  async lease(t: SshTarget, open: () => Promise<Client>): Promise<Lease> {
    const id = `${t.def.name}\n${t.address}\n${t.def.port}`;
    const list = this.conns.get(id) ?? [];
    const kept = list.find((c) => !c.closed && c.channels < MAX_CHANNELS_PER_CONNECTION);
    if (kept) return this.take(id, kept, true);
    const client = await open();
    const conn: Conn = { client, channels: 0, idle: null, closed: false };
    client.on('close', () => this.drop(id, conn));
    client.on('error', () => this.drop(id, conn));
    const now = this.conns.get(id) ?? [];
    if (now.length < MAX_CONNECTIONS_PER_KEY) {
      now.push(conn);
      this.conns.set(id, now);
    }
    return this.take(id, conn, false);
  }

  private take(id: string, conn: Conn, reused: boolean): Lease {
    conn.channels += 1;
    if (conn.idle) clearTimeout(conn.idle);
    conn.idle = null;
    let done = false;
    return {
      client: conn.client,
      reused,
      release: () => {
        if (done) return;
        done = true;
        conn.channels -= 1;
        if (conn.channels === 0 && !conn.closed) {
          const kept = this.conns.get(id)?.includes(conn) ?? false;
          if (!kept) this.close(id, conn);
          else {
            conn.idle = setTimeout(() => this.close(id, conn), this.idleMs());
            conn.idle.unref();
          }
        }
      },
      discard: () => {
        if (done) return;
        done = true;
        conn.channels -= 1;
        this.retire(id, conn);
        if (conn.channels === 0) this.close(id, conn);
      },
    };
  }

  // No new channel on it; it ends with the last of its running channels.
  private retire(id: string, conn: Conn): void {
    const list = this.conns.get(id);
    if (!list) return;
    const rest = list.filter((c) => c !== conn);
    if (rest.length > 0) this.conns.set(id, rest);
    else this.conns.delete(id);
  }

  private drop(id: string, conn: Conn): void {
    conn.closed = true;
    if (conn.idle) clearTimeout(conn.idle);
    this.retire(id, conn);
  }

  private close(id: string, conn: Conn): void {
    this.drop(id, conn);
    conn.client.end();
  }

  // A credential updated or removed: its connections go.
  closeCredential(name: string): void {
    for (const [id, list] of [...this.conns]) {
      if (!id.startsWith(`${name}\n`)) continue;
      for (const c of list) this.close(id, c);
    }
  }

  // Lock: every connection goes.
  closeAll(): void {
    for (const [id, list] of [...this.conns]) for (const c of list) this.close(id, c);
  }

  get size(): number {
    let n = 0;
    for (const list of this.conns.values()) n += list.length;
    return n;
  }
}
