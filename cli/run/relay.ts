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
import { HeadProblem, headerValues, readRequestHead, relayedHead } from './request-head';
import { proxyAnswer, REALM } from './proxy-answer';
import { proxyCredentialsProblem } from './proxy-token';
import { connectionClient, SocketTables } from './client-pid';

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

// Bytes both ways, each direction paced by its reader (pipe pauses the
// source while the destination's buffer is full); an end is passed on, and
// when one side is gone the other is finished, then destroyed if it lingers.
function join(a: net.Socket, b: net.Socket): void {
  const destroyBoth = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on('error', destroyBoth);
  b.on('error', destroyBoth);
  a.pipe(b);
  b.pipe(a);
  const finish = (other: net.Socket) => (): void => {
    other.end();
    setTimeout(() => other.destroy(), LINGER_MS).unref();
  };
  a.on('close', finish(b));
  b.on('close', finish(a));
}

function refuse(client: net.Socket, status: number, code: string, message: string, extra = {}): void {
  client.end(proxyAnswer(status, code, message, extra));
  setTimeout(() => client.destroy(), LINGER_MS).unref();
}

async function serve(client: net.Socket, o: RelayOptions, port: number, tables: SocketTables): Promise<void> {
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
  const who = connectionClient(tables, ticket, o.root(), client.remotePort ?? 0, port);
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
  daemon.once('connect', () => {
    daemon.removeAllListeners('error');
    daemon.write(relayedHead(head, who));
    if (head.rest.length) daemon.write(head.rest);
    join(client, daemon);
    client.resume();
  });
}

export function startRelay(o: RelayOptions): Promise<Relay> {
  return new Promise((resolve, reject) => {
    const sockets = new Set<net.Socket>();
    const tables = new SocketTables();
    // Half-open: a client that has sent all it will still reads the answer.
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
      sockets.add(client);
      client.on('close', () => sockets.delete(client));
      void serve(client, o, (server.address() as net.AddressInfo).port, tables);
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
