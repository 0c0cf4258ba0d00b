// Descriptors are one pool for every socket and file of the daemon. An
// agent that holds connections open must not take the ones the human's
// admin socket needs: once none is left, the accept on admin.sock fails and
// Node closes whatever waits there, so `postern lock` fails too. The
// agent-facing sockets therefore keep to a budget, computed from the
// process's descriptor limit: what is left after a reserve for the daemon's
// own files and the /proc files it holds, halved (a connection may bring an
// upstream socket with it). A connection beyond it is closed at once, so
// the flooder pays, and the log says so.
import type net from 'node:net';
import type { Logger } from './logger';

// The journal, the vault, the listeners, DNS sockets, stdio, admin
// connections and the runtime's own.
const RESERVE = 64;
// /proc descriptors held per checked process (identify.ts).
const PER_PROCESS = 3;
const MAX_HELD_PROCESSES = 128;
const MIN_HELD_PROCESSES = 8;
const MIN_CONNECTIONS = 8;
// At most one log line per this long while connections are being dropped.
const LOG_EVERY_MS = 10_000;

export interface ConnectionBudget {
  limit: number; // the process's descriptor limit (soft)
  agentConnections: number; // agent socket (JSON and proxy)
  sshAgentConnections: number;
  heldProcesses: number; // processes whose /proc files are kept open
}

export function connectionBudget(limit: number): ConnectionBudget {
  const heldProcesses = Math.max(MIN_HELD_PROCESSES, Math.min(MAX_HELD_PROCESSES, Math.floor(limit / 24)));
  const connections = Math.max(MIN_CONNECTIONS, Math.floor((limit - RESERVE - PER_PROCESS * heldProcesses) / 2));
  const sshAgentConnections = Math.max(MIN_CONNECTIONS / 2, Math.floor(connections / 4));
  return {
    limit,
    agentConnections: Math.max(MIN_CONNECTIONS, connections - sshAgentConnections),
    sshAgentConnections,
    heldProcesses,
  };
}

// Caps the server's open connections; a connection beyond the cap is
// closed as it is accepted (Node's maxConnections) and counted in a log
// line at most every LOG_EVERY_MS.
export function capConnections(server: net.Server, cap: number, door: string, log: Logger): void {
  server.maxConnections = cap;
  let dropped = 0;
  let timer: NodeJS.Timeout | null = null;
  server.on('drop', () => {
    dropped += 1;
    if (timer) return;
    const say = (): void => {
      log.warn(
        { event: 'connections_at_limit', door, limit: cap, dropped },
        `${door}: ${cap} connections are open, the most this daemon's descriptor limit allows beside the admin socket; ${dropped} more were closed as they came. a program is holding many connections (\`ss -xp\` lists the socket's peers); the daemon's descriptor limit is LimitNOFILE= in its unit`,
      );
      dropped = 0;
      timer = setTimeout(() => {
        timer = null;
        if (dropped > 0) say();
      }, LOG_EVERY_MS);
      timer.unref();
    };
    say();
  });
}
