// agent.sock: HTTP/1.1 over a Unix socket, JSON bodies (SPEC §6). Every
// connection is identified from the kernel (SO_PEERCRED) and /proc before
// anything is read; a uid not in agent_uids is refused.
import http from 'node:http';
import net from 'node:net';
import { Refusal } from '../shared/errors';
import { REFUSALS, HEARTBEAT_MS, WAITING_NOTICE, type WaitingListener } from '../shared/protocol';
import type { Card } from '../shared/admin-protocol';
import { peerCredOfSocket } from '../shared/native';
import type { Controller } from './controller';
import type { Logger } from './logger';
import { identify as identifyPeer, Identity, stillRunning } from './identity/identify';
import { identifyAtConnect, peerGoneInstead } from './identify-at-connect';
import { serveJson } from './pipeline/entry';
import type { PipelineServices } from './pipeline/context';
import { requestContext, requesterGone, type RequesterGone } from './pipeline/requester-gone';
import type { Slot } from './stores/budgets';
import { journalRefusal } from './audit/refusal-summary';
import { createRun } from './agent-runs';
import type { LeafCertificates } from './proxy/leaf-certs';
import {
  answerParseFailure,
  bodyCutOff,
  clientWentAway,
  closeIfUpgradeAsked,
  cutAlready,
  cutByParseFailure,
  inTurn,
  trackExchange,
} from './exchanges-open';
import { isAbsoluteForm, serveAbsoluteForm, serveConnect, type FrontDoorDeps } from './proxy/front-door';
import { lingerAfterAnswer } from './lingering-close';
import { refuseResponse } from './proxy/refusal-response';
import { declaredTooLarge } from './proxy/proxied-exchange';
import { unmetExpectation } from './proxy/malformed';

const peers = new WeakMap<net.Socket, Identity | Refusal>();

// Once per connection: the peer is the process that connected. Every
// later request on the connection checks that this process instance still
// runs (SPEC §7): a connection inherited across fork or passed over
// SCM_RIGHTS dies with the process that made it. `checkRunning` false: a
// request whose body is still to come is checked once it is whole
// (confirmPeer), when what it asks is settled, and not also at its head.
export function identify(controller: Controller, sock: net.Socket, checkRunning = true): Identity {
  const known = peers.get(sock);
  if (known instanceof Refusal) throw known;
  if (known) {
    if (checkRunning) confirmPeer(sock, known);
    return known;
  }
  let verdict: Identity | Refusal;
  try {
    const peer = peerCredOfSocket(sock);
    const allowed = controller.config.config.daemon.agent_uids;
    const ownUid = process.getuid?.() ?? -1;
    const ok = allowed.length === 0 ? peer.uid === ownUid : allowed.includes(peer.uid);
    verdict = ok
      ? identifyPeer(peer.pid, peer.uid)
      : new Refusal(
          'denied_peer',
          `uid ${peer.uid} may not use this agent socket; a human can add it to daemon.agent_uids in the config`,
        );
  } catch (e) {
    verdict =
      e instanceof Refusal
        ? e
        : new Refusal(
            'unidentified_peer',
            'the connecting process could not be identified; connect over the Unix socket from a local process',
          );
  }
  peers.set(sock, verdict);
  if (verdict instanceof Refusal) throw verdict;
  return verdict;
}

// The connection's process still runs, else unidentified_peer, for this
// request and every later one on the connection.
export function confirmPeer(sock: net.Socket, identity: Identity): void {
  if (stillRunning(identity.process)) return;
  const gone = new Refusal(
    'unidentified_peer',
    `the process that made this connection (pid ${identity.process.pid}) has exited or exec'd; whoever holds the connection now cannot speak for it — connect again from a running process`,
  );
  peers.set(sock, gone);
  throw gone;
}

// A refusal the pipeline did not journal itself (peer, lock, endpoint,
// oversized body, a malformed proxy request) is recorded here as
// agent_refused; beyond audit.refusal_burst a second for one process
// instance it is counted in a summary (SPEC §9).
export async function journalAgentRefusal(
  pipeline: PipelineServices,
  sock: net.Socket,
  r: Refusal,
  endpoint: string,
): Promise<Refusal> {
  if (r.auditSeq !== undefined || r.detail?.['summarised'] === true) return r;
  const peer = peers.get(sock);
  const p = peer && !(peer instanceof Refusal) ? peer.process : null;
  const refuser = p
    ? { key: p.key, pid: p.pid, uid: p.uid, exe: p.exe }
    : { key: 'unidentified', pid: null, uid: null, exe: null };
  const detail = await journalRefusal(
    pipeline,
    refuser,
    { kind: 'agent_refused', code: r.code, endpoint, pid: p ? p.pid : null },
    null,
  );
  return detail ? new Refusal(r.code, r.message, { ...(r.detail ?? {}), ...detail }) : r;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendRefusal(res: http.ServerResponse, r: Refusal): void {
  send(res, REFUSALS[r.code], { error: r.toJSON() });
}

// The waiting notice (shared/protocol.ts), for a requester that asked for
// it: `102 Processing` with the card's id and expiry, and another once a
// human approved it, before the final response. Written only while the response is this connection's current
// one (a pipelined response gets its socket later) and nothing of it was
// sent; the values are a hex id and an ISO date, nothing to escape. An
// HTTP/1.0 client never gets a 1xx (RFC 9110 §15.2). Written on the socket
// because Node's res.writeProcessing() cannot carry headers.
function waitingNotice(req: http.IncomingMessage, res: http.ServerResponse): WaitingListener<Card> | undefined {
  if (req.headers[WAITING_NOTICE.ask] === undefined || req.httpVersion === '1.0') return undefined;
  keepTellingWorking(res);
  return (card, approved) => {
    const sock = res.socket;
    if (!sock || !sock.writable || res.headersSent) return;
    const decision = approved ? `${WAITING_NOTICE.decision}: approved\r\n` : '';
    sock.write(
      `HTTP/1.1 102 Processing\r\n${WAITING_NOTICE.id}: ${card.id}\r\n${WAITING_NOTICE.expires}: ${card.expires_at}\r\n${decision}\r\n`,
    );
  };
}

// A heartbeat while the request runs (shared/protocol.ts, WAITING_NOTICE).
function keepTellingWorking(res: http.ServerResponse): void {
  const beat = setInterval(() => {
    // A response queued behind another has no socket yet: nothing is
    // written until its turn (it would land in the other's answer).
    const sock = res.socket;
    if (res.headersSent || res.writableEnded) clearInterval(beat);
    else if (sock && sock.writable) sock.write(`HTTP/1.1 102 Processing\r\n${WAITING_NOTICE.working}: 1\r\n\r\n`);
  }, HEARTBEAT_MS);
  beat.unref();
  res.once('close', () => clearInterval(beat));
}

// The JSON of a request may be larger than its decoded body (escapes,
// base64); it is capped at a generous multiple, then judged exactly. It
// must arrive within daemon.agent_request_timeout of the request's start,
// so a slow sender cannot hold a slot of max_concurrent.
function readBody(req: http.IncomingMessage, limit: number, deadlineMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(
      () => {
        tooSlow.add(req);
        reject(
          new Refusal(
            'bad_request',
            `the request body did not arrive within daemon.agent_request_timeout (${deadlineMs} ms); send the whole request at once`,
          ),
        );
        req.pause();
      },
      Math.max(1, deadlineMs),
    );
    // Beyond the limit the rest is read and dropped, not reset: a client
    // still sending would get a reset instead of the 413 (and the MCP
    // bridge would report the daemon gone); the refusal closes the
    // connection, and requestTimeout bounds how long the rest may take.
    let over = false;
    req.on('data', (c: Buffer) => {
      if (over) return;
      size += c.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        clearTimeout(timer);
        reject(bodyTooLarge(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    // The agent closed the connection before its body ended (a cancelled
    // call, a killed bridge): a refusal that says so, not an internal error.
    req.on('error', () => {
      clearTimeout(timer);
      reject(bodyCutOff());
    });
  });
}

const started = new WeakMap<http.IncomingMessage, number>();
// Requests refused for a slow body: their connection is closed after the
// refusal rather than drained.
const tooSlow = new WeakSet<http.IncomingMessage>();

interface Services {
  controller: Controller;
  pipeline: PipelineServices;
}

// A request that acts: counted from here until the reply against
// http.max_concurrent, except while it waits for approval (which
// daemon.max_pending bounds); its body read within limits.
function counted(
  s: Services,
  req: http.IncomingMessage,
  identity: Identity,
  run: (raw: Buffer, slot: Slot) => Promise<unknown>,
): Promise<unknown> {
  s.controller.requireUnlocked();
  const limit = jsonBodyLimit(s.controller);
  // A declared length over the limit is refused before its body is read
  // (and, with Expect: 100-continue, before it is asked for).
  if (declaredTooLarge(req, limit)) throw bodyTooLarge(limit);
  return s.pipeline.stores.inFlight.run(async (slot) => {
    const cfg = s.controller.config.config;
    const left = cfg.daemon.agent_request_timeout - (Date.now() - (started.get(req) ?? Date.now()));
    // A lock (or the daemon stopping) refuses a request whose body is
    // still arriving at once, not when the body ends.
    const raw = await s.pipeline.untilLocked(readBody(req, limit, left));
    // What the request asks is settled: its maker must still run now
    // (checked here rather than at the head, whose bytes may have come
    // before an exec and the body after it).
    confirmPeer(req.socket, identity);
    confirmed.add(req);
    return await run(raw, slot);
  });
}

// The JSON request's own limit: a body of max_request_body bytes as JSON
// (base64, or escapes of up to six characters a byte) and its fields.
function jsonBodyLimit(controller: Controller): number {
  return controller.config.config.http.max_request_body * 6 + 64 * 1024;
}

function bodyTooLarge(limit: number): Refusal {
  return new Refusal('body_too_large', `the request is larger than ${limit} bytes; send a smaller body`);
}

type Route = (
  s: Services,
  identity: Identity,
  req: http.IncomingMessage,
  gone: RequesterGone,
  onWaiting?: WaitingListener<Card>,
) => Promise<unknown> | unknown;

// Requests whose peer was checked to still run once their body was whole.
const confirmed = new WeakSet<http.IncomingMessage>();

// Routes whose body says what is asked: each is served through `counted`,
// which reads the body and checks the peer once it is whole (not at the
// head); what the route does with the body is given here.
type BodyRoute = (
  s: Services,
  identity: Identity,
  gone: RequesterGone,
  onWaiting?: WaitingListener<Card>,
) => (raw: Buffer, slot: Slot) => Promise<unknown>;

const BODY_ROUTES: Record<string, BodyRoute> = {
  'POST /v1/http': (s, identity, gone, onWaiting) => (raw, slot) =>
    serveJson(requestContext(s.pipeline, identity, gone, slot, onWaiting, true), 'http', raw),
  'POST /v1/ssh': (s, identity, gone, onWaiting) => (raw, slot) =>
    serveJson(requestContext(s.pipeline, identity, gone, slot, onWaiting, true), 'ssh', raw),
  'POST /v1/runs': (s, identity) => (raw) => createRun(s.pipeline, identity, raw),
};

const ROUTES: Record<string, Route> = {
  'GET /v1/health': ({ controller }) => ({ locked: controller.locked }),
  'GET /v1/credentials': ({ controller }) => {
    controller.requireUnlocked();
    const list = controller.credList()['credentials'] as Record<string, unknown>[];
    // Visibility is not authorisation: agents see names and allowed targets.
    return { credentials: list.map(({ name, kind, description, targets }) => ({ name, kind, description, targets })) };
  },
  ...Object.fromEntries(
    Object.entries(BODY_ROUTES).map(([endpoint, route]): [string, Route] => [
      endpoint,
      (s, identity, req, gone, onWaiting) => counted(s, req, identity, route(s, identity, gone, onWaiting)),
    ]),
  ),
};

export function createAgentServer(
  controller: Controller,
  log: Logger,
  pipeline: PipelineServices & { leaves: LeafCertificates },
): http.Server {
  const services: Services = { controller, pipeline };
  // The proxy front door (SPEC §11): CONNECT and absolute-form requests.
  const door: FrontDoorDeps & { leaves: LeafCertificates; otherHosts(): 'tunnel' | 'refuse' } = {
    pipeline,
    leaves: pipeline.leaves,
    identify: (sock, checkRunning) => identify(controller, sock, checkRunning),
    confirm: confirmPeer,
    journalRefusal: (sock, r, endpoint) => journalAgentRefusal(pipeline, sock, r, endpoint),
    requireUnlocked: () => void controller.requireUnlocked(),
    touch: () => controller.touch(),
    otherHosts: () => controller.config.config.proxy.other_hosts,
  };
  // Headers, and the whole request, must arrive within
  // agent_request_timeout (Node's own timers are the backstop for requests
  // that never reach the handler); idle connections are checked every second.
  const limit = controller.config.config.daemon.agent_request_timeout;
  const server = http.createServer(
    // A request without `host` is refused by postern (journaled, its JSON),
    // not answered by Node's bare 400.
    {
      headersTimeout: limit,
      requestTimeout: limit + 1000,
      connectionsCheckingInterval: 1000,
      requireHostHeader: false,
    },
    (req, res) => {
      started.set(req, Date.now());
      trackExchange(req, res);
      closeIfUpgradeAsked(req, res);
      if (isAbsoluteForm(req)) return serveAbsoluteForm(door, req, res);
      const path = (req.url ?? '').split('?')[0];
      // A requester that goes away withdraws its approval card.
      const gone = requesterGone(res);
      void (async () => {
        // Pipelined behind an answer that closes the connection: never run
        // (exchanges-open.ts).
        const turn = inTurn(req, res);
        if (turn !== true) {
          if (!(await turn)) return;
          // Its body could not come before its turn (a client waiting for
          // a 100 Continue, which goes out after the answers before it):
          // agent_request_timeout counts from the turn.
          started.set(req, Date.now());
        }
        let refused = false;
        const endpoint = `${req.method} ${path}`;
        const deferred = Object.hasOwn(BODY_ROUTES, endpoint);
        try {
          const identity = identify(controller, req.socket, !deferred);
          if (req.headers.host === undefined && req.httpVersion !== '1.0')
            throw new Refusal(
              'bad_request',
              'header "host" is missing (HTTP/1.1 requires it); send any, such as "postern"',
            );
          const route = ROUTES[endpoint];
          if (!route)
            throw new Refusal(
              'bad_request',
              `no endpoint ${req.method} ${path}; see GET /v1/health, GET /v1/credentials, POST /v1/http, POST /v1/ssh, POST /v1/runs`,
            );
          controller.touch();
          send(res, 200, await route(services, identity, req, gone, waitingNotice(req, res)));
        } catch (e) {
          refused = true;
          // Cut short by malformed HTTP: the connection's refusal (journaled
          // once, in clientError) is this request's answer too.
          if (await cutByParseFailure(req)) return;
          let r = e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
          if (!(e instanceof Refusal))
            log.error({ event: 'agent_error', err: (e as Error)?.name }, 'agent request failed');
          // Refused before its body was whole (a lock, a body too large or
          // too slow): its peer is checked now, as every request's is,
          // unless it went away (its refusal says so).
          if (deferred && !confirmed.has(req) && !gone.left)
            r = peerGoneInstead(() => identify(controller, req.socket), r);
          // Every refusal is journaled; those the pipeline did not journal
          // itself (peer, lock, endpoint, oversized body) are recorded here.
          // Beyond audit.refusal_burst a second for one process instance they
          // are counted in a summary (SPEC §9).
          r = await journalAgentRefusal(pipeline, req.socket, r, endpoint);
          if (cutAlready(req)) return;
          const closing = tooSlow.has(req) || r.code === 'body_too_large';
          if (closing) res.setHeader('connection', 'close');
          sendRefusal(res, r);
          if (closing) lingerAfterAnswer(req);
          else req.resume();
        } finally {
          controller.countAgentRequest(refused);
        }
      })();
    },
  );
  // Expect: 100-continue: a body over the limit is refused without being
  // asked for (the handler refuses it on its declared length).
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const limit = isAbsoluteForm(req) ? controller.config.config.http.max_request_body : jsonBodyLimit(controller);
    if (!declaredTooLarge(req, limit)) res.writeContinue();
    server.emit('request', req, res);
  });
  // Any other expectation: a refusal like every other, journaled, with its
  // JSON and x-postern-error (Node's own answer is a bare 417); the
  // connection closes after it, its body unread.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    trackExchange(req, res);
    res.setHeader('connection', 'close');
    const endpoint = isAbsoluteForm(req) ? `${req.method} http` : `${req.method} ${(req.url ?? '').split('?')[0]}`;
    journalAgentRefusal(pipeline, req.socket, unmetExpectation(String(req.headers['expect'] ?? '')), endpoint).then(
      (r) => (cutAlready(req) ? undefined : refuseResponse(res, r)), // one answer: a parse failure's, if it came first
      () => res.destroy(),
    );
    req.resume();
  });
  server.on('connection', (sock: net.Socket) => identifyAtConnect(door.identify, sock));
  server.on('connect', (req: http.IncomingMessage, sock: net.Socket, head: Buffer) => {
    void serveConnect(door, req, sock, head);
  });
  // Answered after the requests that arrived whole before the failure
  // (exchanges-open.ts).
  // Journaled like every refusal, with x-postern-error for a proxy client.
  server.on('clientError', (e: NodeJS.ErrnoException, sock: net.Socket) => {
    if (clientWentAway(e)) {
      sock.destroy();
      return;
    }
    const why = typeof e.code === 'string' && /^HPE_[A-Z_]+$/.test(e.code) ? ` (${e.code})` : '';
    const r = new Refusal(
      'bad_request',
      e.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? `the request did not arrive within daemon.agent_request_timeout (${limit} ms); send the whole request at once`
        : `malformed HTTP request${why}; send HTTP/1.1 with a JSON body, or through \`postern run\` a well-formed proxy request`,
    );
    answerParseFailure(sock, () => journalAgentRefusal(pipeline, sock, r, 'agent socket'));
  });
  return server;
}
