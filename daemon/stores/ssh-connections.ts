// Kept SSH connections (SPEC §6.6): reused per (credential, checked address,
// port) for a short idle time, so a burst of commands pays one handshake,
// with at most MAX_CHANNELS_PER_CONNECTION exec channels on each. Connections
// are made by daemon/pipeline/connect-ssh.ts (host key checked before any
// authentication); this store only keeps, lends and closes them.
import type { Client } from 'ssh2';
import type { SshCredentialDef } from '../../shared/credential';

// OpenSSH's default MaxSessions is 10; stay under it.
export const MAX_CHANNELS_PER_CONNECTION = 8;
// Connections kept per (credential, address, port) at most.
const MAX_CONNECTIONS_PER_KEY = 8;
// Host key types remembered (per credential, address, port and pin) at most.
const MAX_REMEMBERED_TYPES = 1024;

export interface SshTarget {
  def: SshCredentialDef;
  address: string;
}

export interface Connected {
  client: Client;
  hostKeyType: string; // the type of the host key that matched the pin
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

export class SshConnections {
  private conns = new Map<string, Conn[]>();
  // The host key type that matched the pin, asked for first next time so
  // that a pinned RSA or ECDSA key costs one handshake, not one per type.
  private hostKeyTypes = new Map<string, string>();

  // `idleMs`: how long a connection is kept after its last channel closed
  // (ssh.connection_idle), asked each time so a config change applies.
  constructor(private readonly idleMs: () => number) {}

  // A connection with room for one more channel: a kept one, or a new one
  // made by `open` (which holds the secret only while it connects), given
  // the host key type that matched last time.
  async lease(t: SshTarget, open: (preferredHostKeyType?: string) => Promise<Connected>): Promise<Lease> {
    const id = `${t.def.name}\n${t.address}\n${t.def.port}`;
    const list = this.conns.get(id) ?? [];
    const kept = list.find((c) => !c.closed && c.channels < MAX_CHANNELS_PER_CONNECTION);
    if (kept) return this.take(id, kept, true);
    const typeId = `${id}\n${t.def.host_key}`;
    const { client, hostKeyType } = await open(this.hostKeyTypes.get(typeId));
    this.hostKeyTypes.delete(typeId);
    if (this.hostKeyTypes.size >= MAX_REMEMBERED_TYPES)
      this.hostKeyTypes.delete(this.hostKeyTypes.keys().next().value!);
    this.hostKeyTypes.set(typeId, hostKeyType);
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

  // A credential updated or removed: what was learnt about its host's keys
  // goes, and no new command goes on its connections; running commands
  // finish (SPEC §6.1: past its intent a request completes).
  retireCredential(name: string): void {
    for (const id of [...this.hostKeyTypes.keys()]) if (id.startsWith(`${name}\n`)) this.hostKeyTypes.delete(id);
    this.retireWhere((id) => id.startsWith(`${name}\n`));
  }

  // Lock: every connection goes.
  closeAll(): void {
    for (const [id, list] of [...this.conns]) for (const c of list) this.close(id, c);
  }

  // A config change (DNS servers): no new command goes on a connection made
  // before it; running commands finish, idle connections close now.
  retireAll(): void {
    this.retireWhere(() => true);
  }

  // Idle connections close now, busy ones when their last channel ends.
  private retireWhere(which: (id: string) => boolean): void {
    for (const [id, list] of [...this.conns]) {
      if (!which(id)) continue;
      for (const c of list) {
        if (c.channels === 0) this.close(id, c);
        else this.retire(id, c);
      }
    }
  }

  get size(): number {
    let n = 0;
    for (const list of this.conns.values()) n += list.length;
    return n;
  }
}
