// agent.sock: HTTP/1.1 over a Unix socket, JSON bodies (SPEC §6). Every
// connection is identified from the kernel before anything is read; a uid
// not in agent_uids is refused.
import http from 'node:http';
import net from 'node:net';
import { Refusal } from '../shared/errors';
import { REFUSALS } from '../shared/protocol';
import { peerCredOfSocket, PeerCred } from '../shared/native';
import type { Controller } from './controller';
import type { Logger } from './logger';

const peers = new WeakMap<net.Socket, PeerCred | Refusal>();

function identify(controller: Controller, sock: net.Socket): PeerCred {
  const known = peers.get(sock);
  if (known instanceof Refusal) throw known;
  if (known) return known;
  let verdict: PeerCred | Refusal;
  try {
    const peer = peerCredOfSocket(sock);
    const allowed = controller.config.config.daemon.agent_uids;
    const ownUid = process.getuid?.() ?? -1;
    const ok = allowed.length === 0 ? peer.uid === ownUid : allowed.includes(peer.uid);
    verdict = ok ? peer : new Refusal('denied_peer', `uid ${peer.uid} may not use this agent socket; a human can add it to daemon.agent_uids in the config`);
  } catch {
    verdict = new Refusal('unidentified_peer', 'the connecting process could not be identified; connect over the Unix socket from a local process');
  }
  peers.set(sock, verdict);
  if (verdict instanceof Refusal) throw verdict;
  return verdict;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendRefusal(res: http.ServerResponse, r: Refusal): void {
  send(res, REFUSALS[r.code], { error: r.toJSON() });
}

type Route = (controller: Controller) => unknown;

const ROUTES: Record<string, Route> = {
  'GET /v1/health': (c) => ({ locked: c.locked }),
  'GET /v1/credentials': (c) => {
    c.requireUnlocked();
    const list = c.credList()['credentials'] as Record<string, unknown>[];
    // Visibility is not authorisation: agents see names and allowed targets.
    return { credentials: list.map(({ name, kind, description, targets }) => ({ name, kind, description, targets })) };
  },
};

export function createAgentServer(controller: Controller, log: Logger): http.Server {
  const server = http.createServer((req, res) => {
    let refused = false;
    try {
      identify(controller, req.socket);
      const path = (req.url ?? '').split('?')[0];
      const route = ROUTES[`${req.method} ${path}`];
      if (!route) throw new Refusal('bad_request', `no endpoint ${req.method} ${path}; see GET /v1/health, GET /v1/credentials`);
      controller.touch();
      send(res, 200, route(controller));
    } catch (e) {
      refused = true;
      const r = e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
      if (!(e instanceof Refusal)) log.error({ event: 'agent_error', err: (e as Error)?.name }, 'agent request failed');
      sendRefusal(res, r);
      req.resume();
    } finally {
      controller.countAgentRequest(refused);
    }
  });
  server.on('clientError', (_e, sock) => {
    if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"code":"bad_request","message":"malformed HTTP request; send HTTP/1.1 with a JSON body"}}');
    else sock.destroy();
  });
  return server;
}
