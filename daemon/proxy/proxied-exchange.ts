// One HTTP request read by the proxy front door (inside a terminated CONNECT
// or in absolute form on the agent socket) through the pipeline: its body
// read up to http.max_request_body, its placeholders looked up for the
// connection's process, run by runProxied with the response streamed to
// the client. A refusal before the response head is the HTTP response of
// refusal-response.ts; after it, the connection is aborted.
import { once } from 'node:events';
import type http from 'node:http';
import type net from 'node:net';
import { Refusal } from '../../shared/errors';
import type { HttpCredentialDef } from '../../shared/credential';
import type { Identity } from '../identity/identify';
import type { PipelineServices } from '../pipeline/context';
import { credentialOfKind } from '../pipeline/credential';
import { proxiedRequest, type PlaceholderLookup, type ProxiedParts } from '../pipeline/proxied';
import { requestContext, requesterGone } from '../pipeline/requester-gone';
import { runProxied } from '../pipeline/run-proxied';
import type { ResponseSink } from '../pipeline/stream-response';
import { looksLikePlaceholder, type Runs } from '../stores/runs';
import type { ConnectTarget } from './connect-target';
import { coveringCredentials } from '../pipeline/coverage';
import { refuseResponse } from './refusal-response';
import { bodyCutOff, cutAlready, cutByParseFailure, inTurn } from '../exchanges-open';
import { lingerAfterAnswer } from '../lingering-close';
import { peerGoneInstead } from '../identify-at-connect';

export interface FrontDoorDeps {
  pipeline: PipelineServices;
  // The peer of the agent-socket connection, checked to still run at every
  // request; `checkRunning` false: not yet, since the request's body is
  // still to come (confirm checks it once the body is whole).
  identify(sock: net.Socket, checkRunning?: boolean): Identity;
  confirm(sock: net.Socket, identity: Identity): void;
  // Journals a refusal the pipeline did not (as agent_refused).
  journalRefusal(sock: net.Socket, r: Refusal, endpoint: string): Promise<Refusal>;
  requireUnlocked(): void;
  touch(): void;
}

// Beyond the limit the rest is read and dropped: the refusal is answered
// and the connection then closed (the client may still be sending). A
// request without content-length or transfer-encoding has no body (RFC 9112
// §6.3): it is not read here, and the server drains its end when the
// response finishes.
function readBody(req: http.IncomingMessage, limit: number, deadlineMs: number): Promise<Buffer | null> | null {
  if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return null;
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] | null = [];
    let size = 0;
    // The whole request within daemon.agent_request_timeout, as on the
    // agent socket: a client that declares a body and stops is answered.
    const timer = setTimeout(() => {
      if (chunks === null) return;
      chunks = null;
      closesAfter.add(req);
      reject(
        new Refusal(
          'bad_request',
          `the request body did not arrive within daemon.agent_request_timeout (${deadlineMs} ms); send the whole request at once`,
        ),
      );
    }, deadlineMs);
    req.once('close', () => clearTimeout(timer));
    req.on('data', (c: Buffer) => {
      if (chunks === null) return;
      size += c.length;
      if (size > limit) {
        chunks = null;
        clearTimeout(timer);
        reject(tooLarge(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      clearTimeout(timer);
      if (chunks) resolve(size === 0 ? null : Buffer.concat(chunks));
    });
    req.on('error', () => reject(bodyCutOff()));
  });
}

// A body declared larger than the limit is refused before any of it is
// read. With `Expect: 100-continue` it comes before a 100 Continue, and the
// connection then closes: the client may send the body or not (RFC 9110
// §10.1.1), so what follows cannot be told from the next request. Without
// it the client is sending the body anyway: the connection stays open while
// that is read and dropped, so the refusal reaches it (a connection closed
// while the client still sends is reset, and the answer lost with it), as
// long as that is at most DRAIN_LIMIT; beyond, it is closed.
const DRAIN_LIMIT = 64 * 1024 * 1024;

function declaredLength(req: http.IncomingMessage): number | null {
  const v = req.headers['content-length'];
  return typeof v === 'string' && /^[0-9]{1,15}$/.test(v) ? Number(v) : null;
}

export function declaredTooLarge(req: http.IncomingMessage, limit: number): boolean {
  return (declaredLength(req) ?? 0) > limit;
}

function tooLarge(limit: number): Refusal {
  return new Refusal(
    'body_too_large',
    `the request body is larger than http.max_request_body (${limit} bytes); send a smaller body, or a human may raise http.max_request_body in the config`,
  );
}

// Requests whose connection is closed after their refusal: a body that did
// not arrive in time (what is still to come of it is not a request), or
// framing that cannot be trusted.
const closesAfter = new WeakSet<http.IncomingMessage>();

// `postern run` names the connecting descendant on the first request head
// (the CONNECT, or each absolute-form request); it is the front door's, not
// the upstream's, so it never goes on.
export const RUN_CLIENT_HEADER = 'postern-run-client';

// Taken only from a peer that is the root of a live run: the card says
// `postern run` reported it, which another process may not claim.
export function runClientPid(req: http.IncomingMessage, peer: Identity, runs: Runs): number | null {
  const v = req.headers[RUN_CLIENT_HEADER];
  if (typeof v !== 'string' || !/^[1-9][0-9]{0,9}$/.test(v)) return null;
  return runs.rootedAt(peer.process.key) ? Number(v) : null;
}

function headerLines(req: http.IncomingMessage): [string, string][] {
  const lines: [string, string][] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    if (name.toLowerCase() !== RUN_CLIENT_HEADER) lines.push([name, req.rawHeaders[i + 1]!]);
  }
  return lines;
}

// What is written in one turn of the event loop goes out together (the
// head, the body's chunks and the end are then one TLS record, not one
// each); nothing waits longer than that, so a stream still flows.
function sinkFor(res: http.ServerResponse): ResponseSink {
  let corked = false;
  const gather = (): void => {
    if (corked) return;
    corked = true;
    res.cork();
    setImmediate(() => {
      corked = false;
      res.uncork();
    });
  };
  return {
    respond: (status, headers) => {
      gather();
      res.writeHead(status, headers);
    },
    write: async (chunk) => {
      gather();
      if (!res.write(chunk)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
    },
    end: () => {
      gather();
      res.end();
    },
    // What was written goes out first (the bytes of a cut body are the
    // client's), then the connection closes without the message's end.
    abort: () => {
      const socket = res.socket;
      if (!socket || socket.destroyed) {
        res.destroy();
        return;
      }
      if (corked) {
        corked = false;
        res.uncork();
      }
      socket.end();
      const timer = setTimeout(() => res.destroy(), ABORT_FLUSH_MS);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    },
  };
}

// How long a closing connection may take to flush what was written to a
// client that does not read it.
const ABORT_FLUSH_MS = 5_000;

function lookupFor(s: PipelineServices, identity: Identity): PlaceholderLookup {
  return (value) => {
    const found = s.stores.runs.resolvePlaceholder(value, identity);
    if (found) return { credential: found.credential };
    return looksLikePlaceholder(value) ? 'not-honoured' : null;
  };
}

function definitionOf(s: PipelineServices): (name: string) => HttpCredentialDef | undefined {
  return (name) => {
    try {
      return credentialOfKind(s, name, 'http');
    } catch {
      return undefined;
    }
  };
}

// `outer` is the agent-socket connection (its peer speaks for the request).
// `reportedPid`: the connecting descendant `postern run` named, given the
// peer (on the CONNECT, or on this request in absolute form).
export async function serveProxiedExchange(
  deps: FrontDoorDeps,
  outer: net.Socket,
  connect: ConnectTarget | null,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  reportedPid: (peer: Identity) => number | null,
): Promise<void> {
  const s = deps.pipeline;
  const endpoint = connect ? `${req.method} https://${connect.target.host}:${connect.port}` : `${req.method} http`;
  const turn = inTurn(req, res);
  if (turn !== true && !(await turn)) return;
  const gone = requesterGone(res);
  let confirmed = false;
  try {
    const identity = deps.identify(outer, false);
    deps.requireUnlocked();
    deps.touch();
    const cfg = s.config();
    if (declaredTooLarge(req, cfg.http.max_request_body)) throw tooLarge(cfg.http.max_request_body);
    if (req.httpVersion === '1.0' && req.headers['transfer-encoding'] !== undefined) {
      // HTTP/1.0 has no transfer codings: its framing is unsure, so nothing
      // after it on the connection is read (RFC 9112 §6.1).
      closesAfter.add(req);
      throw new Refusal(
        'bad_request',
        'HTTP/1.0 has no transfer-encoding; send the request as HTTP/1.1, or with a content-length',
      );
    }
    const reading = readBody(req, cfg.http.max_request_body, cfg.daemon.agent_request_timeout);
    // A lock refuses a request whose body is still arriving at once.
    const body = reading === null ? null : await s.untilLocked(reading);
    // What the request asks is settled: its maker must still run now, not
    // only when its head came (a body may follow an exec).
    deps.confirm(outer, identity);
    confirmed = true;
    const parts: ProxiedParts = {
      method: req.method ?? '',
      target: req.url ?? '',
      headers: headerLines(req),
      body,
      connect: connect ? { host: connect.host, port: connect.port } : null,
    };
    await s.stores.inFlight.run(async (slot) => {
      const request = proxiedRequest(
        parts,
        { maxRequestBody: cfg.http.max_request_body, maxTimeout: cfg.http.max_timeout },
        lookupFor(s, identity),
        definitionOf(s),
      );
      // Without a placeholder, to a host some credentials cover: it may reach
      // the addresses their allow_addresses allow (a human named them for
      // that host), and its response is searched for their values
      // (docs/proxy.md).
      const covering = request.credential === null ? coveringCredentials(s, request.target) : [];
      await runProxied(requestContext(s, identity, gone, slot, undefined, true), request, sinkFor(res), {
        coveredAddresses: covering.flatMap((def) => def.allow_addresses),
        covering,
        clientPid: reportedPid(identity),
      });
    });
  } catch (e) {
    // Cut short by a parse failure: the failure's answer is this request's.
    if (await cutByParseFailure(req)) return;
    let r = e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // Refused before its body was whole (a lock, a body too large): its
    // peer is checked now, as every request's is, and one that no longer
    // runs is told so instead, unless it went away (its refusal says so).
    if (!confirmed && !gone.left) r = peerGoneInstead(() => deps.identify(outer), r);
    r = await deps.journalRefusal(outer, r, endpoint);
    if (cutAlready(req)) return;
    const drained =
      r.code === 'body_too_large' &&
      req.headers['expect'] === undefined &&
      (declaredLength(req) ?? Infinity) <= DRAIN_LIMIT;
    // Either way what is left of the body is read and dropped.
    const closing = (r.code === 'body_too_large' && !drained) || closesAfter.has(req);
    if (closing) res.setHeader('connection', 'close');
    refuseResponse(res, r);
    if (closing) lingerAfterAnswer(req);
    else req.resume();
  }
}
