// What one ssh-agent connection has said about the SSH sessions it serves:
// each verified session-bind@openssh.com, in order. OpenSSH's client binds
// its agent connection to the server right after key exchange; when it
// forwards the agent it binds the forwarded connection with
// is_forwarding = true, and the remote client's own bind follows on it.
export interface Binding {
  hostKey: Buffer;
  sessionId: Buffer;
  forwarding: boolean;
}

// OpenSSH's agent keeps at most this many per connection too.
export const MAX_BINDINGS = 16;

export class ConnectionBindings {
  private readonly list: Binding[] = [];

  add(b: Binding): boolean {
    if (this.list.length >= MAX_BINDINGS) return false;
    this.list.push(b);
    return true;
  }

  // The session the connection serves now: the last one bound.
  get current(): Binding | null {
    return this.list.at(-1) ?? null;
  }

  // Some bind on this connection came through a forwarded agent: the
  // signature would be used by a host postern never saw.
  get forwarded(): boolean {
    return this.list.some((b) => b.forwarding);
  }
}
