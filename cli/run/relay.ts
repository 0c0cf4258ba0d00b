// `postern run`'s loopback proxy: each connection that presents the run's
// token is relayed, head rewritten, to a new connection to the agent socket,
// where the daemon speaks the proxy protocol (SPEC §11). Others are answered
// 407 and closed; nothing of theirs reaches the daemon. So is a connection
// with the token that no process of CMD's tree holds: the token lives in
// CMD's environment, which other processes of its user can read, and the
// daemon sees every relayed connection as `postern run`'s own, under the
// session a human granted to the run (a placeholder is honoured only on
// connections from the run's tree: SPEC §11).
import net from 'node:net';
import { HeadProblem, headerValues, readRequestHead, relayedHead, type RequestHead } from './request-head';
import { proxyAnswer, REALM } from './proxy-answer';
import { proxyCredentialsProblem } from './proxy-token';
import { connectionClient, holderOf, outOfDescriptors, SocketTables, stillInTree } from './client-pid';
import type { Connection, Holder } from './client-pid';
import { openFileLimit } from '../../shared/open-file-limit';

export interface RelayOptions {
  agentSocket: string;
  token: string;
  // CMD's pid once it is started (connections come only after).
  root: () => number | null;
}

export interface Relay {
  port: number;
  close(): void;
}

// How long one side may take to finish after the other has closed.
const LINGER_MS = 5_000;

// Bytes both ways, each direction paced by its reader (the source paused
// while the destination's buffer is full); an end is passed on, and when
// one side is gone the other is finished, then destroyed if it lingers.
// What the client `a` sends is passed on only while `admit()` holds: its
// maker must still be of CMD's tree when it sends each piece, not only
// when it connected.
function join(a: net.Socket, b: net.Socket, admit: () => boolean): void {
  const destroyBoth = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on('error', destroyBoth);
  b.on('error', destroyBoth);
  a.on('data', (chunk: Buffer) => {
    if (!admit()) {
      destroyBoth();
      return;
    }
    if (!b.write(chunk)) {
      a.pause();
      b.once('drain', () => a.resume());
    }
  });
  a.on('end', () => b.end());
  b.pipe(a);
  const finish = (other: net.Socket) => (): void => {
    other.end();
    setTimeout(() => other.destroy(), LINGER_MS).unref();
  };
  a.on('close', finish(b));
  b.on('close', finish(a));
}

function refuse(client: net.Socket, status: number, code: string, message: string, extra = {}): void {
  if (client.destroyed) return;
  client.end(proxyAnswer(status, code, message, extra));
  setTimeout(() => client.destroy(), LINGER_MS).unref();
}

// `trusted` is called once the connection has shown the token and comes
// from CMD's tree, as it starts being relayed.
async function serve(
  client: net.Socket,
  o: RelayOptions,
  port: number,
  tables: SocketTables,
  trusted: () => void,
): Promise<void> {
  const ticket = tables.accepted();
  client.on('error', () => client.destroy());
  let head;
  try {
    head = await readRequestHead(client);
  } catch (e) {
    const why = e instanceof HeadProblem ? e.message : 'the request head could not be read';
    refuse(client, 400, 'bad_request', `${why}; send an HTTP/1.1 proxy request (CONNECT host:port or http://…)`);
    return;
  }
  // Only proxy requests: anything else would reach the agent API as
  // `postern run` itself (the root of the run), so a process of CMD's tree
  // could make runs, or requests, in its name.
  if (!isProxyRequest(head)) {
    refuse(
      client,
      400,
      'bad_request',
      `this proxy serves only proxy requests: CONNECT host:port, or GET http://host/… (an absolute http:// URL); a ${head.method} request for a path is neither. The agent API is on the agent socket`,
    );
    return;
  }
  const problem = proxyCredentialsProblem(headerValues(head, 'proxy-authorization'), o.token);
  if (problem !== null) {
    refuse(
      client,
      407,
      'denied_peer',
      `${problem}; this proxy serves only the command \`postern run\` started: use the HTTPS_PROXY it set (its user name and password are the run's token)`,
      REALM,
    );
    return;
  }
  const connection = {
    clientAddress: client.remoteAddress ?? '',
    clientPort: client.remotePort ?? 0,
    serverAddress: client.localAddress ?? '',
    serverPort: port,
  };
  const who = connectionClient(tables, ticket, o.root(), connection);
  if (who === 'unknown') {
    refuse(
      client,
      403,
      'denied_peer',
      `this connection does not come from the command \`postern run\` started or a process it started (no process of its tree holds the connection: another program that learned the run's token, or one that left the tree, such as a server it started in the background); start that program under its own \`postern run\``,
    );
    return;
  }
  const daemon = net.connect({ path: o.agentSocket, allowHalfOpen: true });
  // Before the connection is made: nothing was relayed, so the client is
  // told; afterwards the relay's own handlers take over.
  daemon.once('error', (e: NodeJS.ErrnoException) => {
    refuse(
      client,
      502,
      'daemon_unreachable',
      `the postern daemon is not reachable at ${o.agentSocket} (${e.code ?? e.message}); start it with \`postern daemon\``,
    );
  });
  let holder = holderOf(Number(who));
  const root = o.root();
  let told = false;
  const admit = (): boolean => {
    if (holder !== null && root !== null && stillInTree(holder, root)) return true;
    // The process seen first may have exited while another of CMD's tree
    // still holds the connection (both held it when it was looked up: a
    // worker forked in between): that one speaks for it now.
    const now = heldInTree(tables, root, connection);
    if (now !== null) {
      holder = now;
      return true;
    }
    if (!told) {
      told = true;
      process.stderr.write(
        `postern: run's proxy closed a connection of pid ${who}: it is no longer a process CMD started (it left CMD's tree); start it under its own \`postern run\`\n`,
      );
    }
    return false;
  };
  daemon.once('connect', () => {
    trusted();
    daemon.removeAllListeners('error');
    daemon.write(relayedHead(head, who));
    if (head.rest.length) daemon.write(head.rest);
    join(client, daemon, admit);
    client.resume();
  });
}

// The process of CMD's tree that holds the connection now, looked up
// afresh (a new read of the tables), or null; out of descriptors, null too:
// nothing can be said of the connection.
function heldInTree(tables: SocketTables, root: number | null, c: Connection): Holder | null {
  try {
    const who = connectionClient(tables, tables.accepted(), root, c);
    if (who === 'unknown' || root === null) return null;
    const holder = holderOf(Number(who));
    return holder !== null && stillInTree(holder, root) ? holder : null;
  } catch {
    return null;
  }
}

function isProxyRequest(head: RequestHead): boolean {
  return head.method === 'CONNECT' ? !head.target.startsWith('/') : /^http:\/\//i.test(head.target);
}

// What failed in serve beyond the refusals it makes itself: out of
// descriptors (a flood, or CMD's own connections) or a defect. The
// connection is answered; run goes on.
export function refuseFailure(client: net.Socket, e: unknown): void {
  if (client.destroyed) return;
  if (outOfDescriptors(e))
    refuse(
      client,
      429,
      'busy',
      '`postern run` is out of file descriptors and cannot tell which process made this connection; close idle connections, or raise the limit (ulimit -n) before `postern run`',
    );
  else {
    process.stderr.write(`postern: run's proxy: ${e instanceof Error ? e.message : String(e)}\n`);
    refuse(client, 500, 'internal_error', "unexpected error in `postern run`'s proxy; it printed the cause");
  }
}

// Descriptors for everything else: stdio, the listener, /proc reads, the
// runtime's own.
const RESERVE = 64;
// At most one line on stderr per this long while connections are closed.
const WARN_EVERY_MS = 10_000;

// Connections are bounded by the descriptor limit (each relayed one holds
// two: the client's and the daemon's). Those that have not yet shown the
// token from CMD's tree (any local program can connect to the port) may
// take at most half: beyond, the oldest of them is closed, so a flood of
// idle connections costs its maker and never the descriptors CMD's own
// requests need, and a request from CMD, whose head follows its connect at
// once, is read before its turn to be closed comes.
export function relayBudget(limit: number): { connections: number; untrusted: number } {
  const connections = Math.max(8, Math.floor((limit - RESERVE) / 2));
  return { connections, untrusted: Math.max(4, Math.floor(connections / 2)) };
}

export function startRelay(o: RelayOptions): Promise<Relay> {
  return new Promise((resolve, reject) => {
    const sockets = new Set<net.Socket>();
    // Not yet trusted, oldest first.
    const untrusted = new Set<net.Socket>();
    const budget = relayBudget(openFileLimit() ?? 1024);
    let warnedAt = -Infinity;
    const warn = (what: string): void => {
      if (Date.now() - warnedAt < WARN_EVERY_MS) return;
      warnedAt = Date.now();
      process.stderr.write(`postern: run's proxy: ${what}; another local program may be flooding it\n`);
    };
    const tables = new SocketTables();
    // Half-open: a client's end of sending is passed on to the daemon, which
    // takes it as the client going away (docs/proxy.md); a refused client
    // still reads its refusal.
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
      if (sockets.size >= budget.connections) {
        client.destroy();
        warn(`${sockets.size} connections open, the most it keeps (from the descriptor limit); closing new ones`);
        return;
      }
      if (untrusted.size >= budget.untrusted) {
        const oldest = untrusted.values().next().value as net.Socket;
        untrusted.delete(oldest);
        oldest.destroy();
        warn(`${budget.untrusted} connections without a request from CMD yet, the most it keeps; closing the oldest`);
      }
      sockets.add(client);
      untrusted.add(client);
      client.on('close', () => {
        sockets.delete(client);
        untrusted.delete(client);
      });
      const trusted = (): void => void untrusted.delete(client);
      serve(client, o, (server.address() as net.AddressInfo).port, tables, trusted).catch((e: unknown) =>
        refuseFailure(client, e),
      );
    });
    // Before listening, a failure to start; after, an accept that failed
    // (out of descriptors, say): one line, and the relay goes on, since an
    // unheard 'error' would end `postern run` with a stack trace.
    let listening = false;
    server.on('error', (e: NodeJS.ErrnoException) => {
      if (!listening) reject(e);
      else process.stderr.write(`postern: run's proxy listener: ${e.code ?? e.message}; continuing\n`);
    });
    server.listen(0, '127.0.0.1', () => {
      listening = true;
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close() {
          server.close();
          for (const s of sockets) s.destroy();
        },
      });
    });
  });
}
