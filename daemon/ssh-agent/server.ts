// The ssh-agent front door (SPEC §12) on ssh.ssh_agent_socket: OpenSSH's
// agent protocol, one message at a time per connection and answered in
// order, each from a peer identified as on the agent socket (SPEC §7: the
// kernel's SO_PEERCRED, checked again at every message). handlers.ts
// answers each message; a refusal is journaled (`ssh_agent_refused`, or
// `agent_refused` when the peer could not be identified, both counted by
// the refusal-burst rule) and logged, and the client gets SSH_AGENT_FAILURE.
import net from 'node:net';
import { Refusal } from '../../shared/errors';
import type { Identity } from '../identity/identify';
import type { Logger } from '../logger';
import type { PipelineServices } from '../pipeline/context';
import { who } from '../pipeline/evidence';
import { journalRefusal } from '../audit/refusal-summary';
import { ConnectionBindings } from './bindings';
import { AgentRefusal, FAILURE, HANDLERS, facts, unknownMessage, type AgentConnection } from './handlers';
import { FrameSplitter, WireError } from './wire';
import { identifyAtConnect } from '../identify-at-connect';

export interface SshAgentDeps {
  pipeline: PipelineServices;
  identify(sock: net.Socket): Identity;
  // Journals a refusal of a peer that could not be identified.
  journalUnidentified(sock: net.Socket, r: Refusal, endpoint: string): Promise<Refusal>;
  requireUnlocked(): void;
  touch(): void;
  log: Logger;
}

// Messages read but not yet answered, per connection: OpenSSH's client
// waits for each answer, so more than this is a client flooding the daemon.
const MAX_QUEUED = 64;

function withdrawnOf(r: Refusal): { withdrawn?: string } {
  const w = r.detail?.['withdrawn'];
  return typeof w === 'string' ? { withdrawn: w } : {};
}

async function journalAgentRefusal(deps: SshAgentDeps, identity: Identity, e: AgentRefusal): Promise<void> {
  const r = e.refusal;
  const p = identity.process;
  await journalRefusal(
    deps.pipeline,
    { key: p.key, pid: p.pid, uid: p.uid, exe: p.exe },
    { kind: 'ssh_agent_refused', code: r.code, ...withdrawnOf(r), ...who(identity), ...e.facts },
    e.facts.credential,
  );
  deps.log.info(
    { event: 'ssh_agent_refused', code: r.code, request: e.facts.request, peer_pid: p.pid },
    `ssh-agent request refused: ${r.message}`,
  );
}

async function answer(deps: SshAgentDeps, conn: AgentConnection, sock: net.Socket, body: Buffer): Promise<Buffer> {
  const type = body[0] as number;
  let identity: Identity;
  try {
    identity = deps.identify(sock);
  } catch (e) {
    const r =
      e instanceof Refusal ? e : new Refusal('unidentified_peer', 'the connecting process could not be identified');
    await deps.journalUnidentified(sock, r, `ssh-agent message ${type}`);
    deps.log.info({ event: 'ssh_agent_refused', code: r.code }, `ssh-agent request refused: ${r.message}`);
    return FAILURE;
  }
  const handler = HANDLERS.get(type) ?? unknownMessage(type);
  try {
    return await handler(conn, body, identity);
  } catch (e) {
    let refusal: AgentRefusal;
    if (e instanceof AgentRefusal) refusal = e;
    else {
      deps.log.error({ event: 'ssh_agent_error', err: (e as Error)?.name }, 'ssh-agent request failed');
      refusal = new AgentRefusal(
        new Refusal('internal_error', 'unexpected error; see the daemon log'),
        facts(`message ${type}`, { forwarded: conn.bindings.forwarded }),
      );
    }
    await journalAgentRefusal(deps, identity, refusal);
    return FAILURE;
  }
}

// A refusal of the connection itself (a malformed frame, a flood), journaled
// as the connection's peer's.
async function refuseConnection(
  deps: SshAgentDeps,
  conn: AgentConnection,
  sock: net.Socket,
  r: Refusal,
): Promise<void> {
  let identity: Identity;
  try {
    identity = deps.identify(sock);
  } catch (e) {
    await deps.journalUnidentified(sock, e instanceof Refusal ? e : r, 'ssh-agent frame');
    return;
  }
  await journalAgentRefusal(
    deps,
    identity,
    new AgentRefusal(r, facts('frame', { forwarded: conn.bindings.forwarded })),
  );
}

function serveConnection(deps: SshAgentDeps, sock: net.Socket): void {
  const frames = new FrameSplitter();
  const abort = new AbortController();
  const conn: AgentConnection = {
    services: deps.pipeline,
    bindings: new ConnectionBindings(),
    requireUnlocked: deps.requireUnlocked,
    touch: deps.touch,
    signal: abort.signal,
    warn: (event, fields, message) => deps.log.warn({ event, ...fields }, message),
  };
  const queue: Buffer[] = [];
  // The loop answering the queue, while it runs: it takes messages queued
  // meanwhile too, so awaiting it awaits every answer so far.
  let running: Promise<void> | null = null;
  const drain = (): Promise<void> =>
    (running ??= answerQueue().finally(() => {
      running = null;
    }));
  const answerQueue = async (): Promise<void> => {
    while (queue.length > 0 && !sock.destroyed) {
      const reply = await answer(deps, conn, sock, queue.shift() as Buffer);
      // A client that does not read its answers is not read either: its
      // answers would pile up in the daemon's memory.
      if (!sock.destroyed && !sock.write(reply)) {
        sock.pause();
        await new Promise<void>((resolve) => {
          const done = (): void => {
            sock.off('drain', done);
            sock.off('close', done);
            resolve();
          };
          sock.on('drain', done);
          sock.on('close', done);
        });
        if (!sock.destroyed) sock.resume();
      }
    }
  };
  sock.on('close', () => abort.abort());
  sock.on('error', () => sock.destroy());
  // Closes the connection once `r` is journaled, after the answers to the
  // messages before it. Nothing of the journaling may escape as an
  // unhandled rejection.
  const refuseAndClose = (r: Refusal): void => {
    sock.pause();
    void drain()
      .catch(() => undefined)
      .then(() => refuseConnection(deps, conn, sock, r))
      .catch(() => undefined)
      .finally(() => sock.destroy());
  };
  sock.on('data', (chunk: Buffer) => {
    try {
      queue.push(...frames.push(chunk));
    } catch (e) {
      // A frame that cannot be a message: nothing after it can be read, so
      // the connection is closed once the messages whole before it are
      // answered and the refusal is journaled.
      if (e instanceof WireError) queue.push(...e.before);
      const why = e instanceof WireError ? e.message : 'unreadable frame';
      refuseAndClose(new Refusal('bad_request', `malformed ssh-agent frame: ${why}; the connection is closed`));
      return;
    }
    if (queue.length > MAX_QUEUED) {
      deps.log.info(
        { event: 'ssh_agent_flood' },
        `ssh-agent connection closed: more than ${MAX_QUEUED} messages unanswered`,
      );
      // Those not yet answered are dropped: counted in the journal, as every
      // refusal is.
      queue.length = 0;
      refuseAndClose(
        new Refusal(
          'busy',
          `more than ${MAX_QUEUED} ssh-agent messages unanswered on one connection; it is closed and those messages dropped: send one request at a time and read its answer`,
        ),
      );
      return;
    }
    void drain().catch((e: unknown) => {
      deps.log.error({ event: 'ssh_agent_error', err: (e as Error)?.name }, 'ssh-agent connection failed');
      sock.destroy();
    });
  });
}

export function createSshAgentServer(deps: SshAgentDeps): net.Server {
  return net.createServer((sock) => {
    identifyAtConnect(deps.identify, sock);
    serveConnection(deps, sock);
  });
}
