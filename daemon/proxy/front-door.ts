// The proxy front door on the agent socket (SPEC §11). `postern run`
// relays each of its child's proxy connections here; the peer is that
// `postern run`, identified as every agent-socket peer is.
// - CONNECT host:port to a target some HTTP credential covers: answered
//   200, TLS terminated with a leaf certificate of the local CA, and each
//   inner HTTP/1.1 request run through the pipeline (proxied-exchange.ts).
// - CONNECT to any other target: relayed as bytes after the address checks
//   (proxy.other_hosts = "tunnel", tunnel.ts) or refused ("refuse").
// - An absolute-form http:// request: one proxied exchange, scheme http.
import http from 'node:http';
import type net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { Refusal } from '../../shared/errors';
import type { LeafCertificates } from './leaf-certs';
import { parseConnectTarget, type ConnectTarget } from './connect-target';
import { coveringCredentials } from '../pipeline/coverage';
import { declaredTooLarge, runClientPid, serveProxiedExchange, type FrontDoorDeps } from './proxied-exchange';
import { refuseOnSocket, refuseResponse } from './refusal-response';
import { nestedConnect, parseFailure, unmetExpectation } from './malformed';
import {
  answerParseFailure,
  cutAlready,
  clientWentAway,
  closeIfUpgradeAsked,
  trackExchange,
  whenAnswered,
} from '../exchanges-open';
import { openTunnel } from './tunnel';

export type { FrontDoorDeps } from './proxied-exchange';

export function isAbsoluteForm(req: http.IncomingMessage): boolean {
  return /^http:\/\//i.test(req.url ?? '');
}

export function serveAbsoluteForm(deps: FrontDoorDeps, req: http.IncomingMessage, res: http.ServerResponse): void {
  void serveProxiedExchange(deps, req.socket, null, req, res, (peer) =>
    runClientPid(req, peer, deps.pipeline.stores.runs),
  );
}

// The inner requests of one terminated CONNECT: keep-alive HTTP/1.1 on the
// TLS socket, each request's peer re-checked on the outer connection.
function serveInner(
  deps: FrontDoorDeps,
  outer: net.Socket,
  t: ConnectTarget,
  secure: tls.TLSSocket,
  clientPid: number | null,
): void {
  const serve = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    trackExchange(req, res);
    closeIfUpgradeAsked(req, res);
    void serveProxiedExchange(deps, outer, t, req, res, () => clientPid);
  };
  // Without `host`, a request is refused by the pipeline's own rule
  // (journaled, postern's JSON), not answered by Node's bare 400.
  const inner = http.createServer({ keepAlive: true, requireHostHeader: false }, serve);
  // `Expect: 100-continue`: the 100 only for a body that may be taken; one
  // declared over the limit is refused at once (serveProxiedExchange).
  inner.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!declaredTooLarge(req, deps.pipeline.config().http.max_request_body)) res.writeContinue();
    serve(req, res);
  });
  const endpoint = `HTTPS ${t.target.host}:${t.port}`;
  // Answered after the requests that arrived whole before the failure; one
  // it cut short stays quiet, this is its answer (exchanges-open.ts). A
  // client gone mid-request sent nothing malformed: closed quietly, and a
  // request it cut short says so itself.
  inner.on('clientError', (e: NodeJS.ErrnoException, sock: Duplex) => {
    if (clientWentAway(e)) {
      sock.destroy();
      return;
    }
    answerParseFailure(sock, () => deps.journalRefusal(outer, parseFailure(e), endpoint));
  });
  inner.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    trackExchange(req, res);
    const value = String(req.headers['expect'] ?? '');
    res.setHeader('connection', 'close');
    deps.journalRefusal(outer, unmetExpectation(value), `${req.method} https://${t.target.host}:${t.port}`).then(
      (r) => (cutAlready(req) ? undefined : refuseResponse(res, r)), // one answer: a parse failure's, if it came first
      () => res.destroy(),
    );
    req.resume();
  });
  // A CONNECT inside the tunnel: refused, after the requests before it
  // (Node's server would close the connection without a word).
  inner.on('connect', (req: http.IncomingMessage, sock: Duplex) => {
    sock.on('error', () => sock.destroy());
    void whenAnswered(sock)
      .then(() => deps.journalRefusal(outer, nestedConnect(t), `CONNECT ${(req.url ?? '').slice(0, 200)}`))
      .then((r) => refuseOnSocket(sock, r))
      .catch(() => sock.destroy());
  });
  const limit = deps.pipeline.config().daemon.agent_request_timeout;
  keepHeadDeadline(inner, secure, limit, () =>
    deps
      .journalRefusal(
        outer,
        new Refusal(
          'bad_request',
          `the request head did not arrive within daemon.agent_request_timeout (${limit} ms); send the whole request at once`,
        ),
        endpoint,
      )
      .then((r) => refuseOnSocket(secure, r))
      .catch(() => secure.destroy()),
  );
  inner.emit('connection', secure);
}

// Node's headersTimeout is checked only for a server that listens; this
// one is handed its connection, so a head that starts to arrive must be
// whole within `ms` here (an idle kept-alive connection is the server's
// keepAliveTimeout's). Checked a few times a `ms` by bytes read.
function keepHeadDeadline(inner: http.Server, secure: tls.TLSSocket, ms: number, late: () => void): void {
  let busy = false; // a request is being served
  let seen = secure.bytesRead;
  let headFrom: number | null = null;
  inner.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    busy = true;
    headFrom = null;
    res.once('close', () => {
      busy = false;
      seen = secure.bytesRead;
    });
  });
  const check = setInterval(
    () => {
      if (busy) return;
      if (secure.bytesRead !== seen) {
        seen = secure.bytesRead;
        headFrom ??= Date.now();
      }
      if (headFrom !== null && Date.now() - headFrom >= ms) {
        clearInterval(check);
        late();
      }
    },
    Math.max(50, Math.min(1000, ms / 4)),
  );
  check.unref();
  secure.once('close', () => clearInterval(check));
}

// The first byte of a TLS connection: a handshake record (RFC 8446 §5.1).
const TLS_HANDSHAKE = 0x16;

// The first bytes sent in a tunnel, or null when the client closed or
// stayed silent for `ms` (the connection is then closed).
function firstBytes(outer: net.Socket, ms: number): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const done = (b: Buffer | null): void => {
      clearTimeout(timer);
      outer.off('data', onData);
      outer.off('close', onClose);
      outer.off('end', onClose);
      outer.pause();
      if (b === null) outer.destroy();
      resolve(b);
    };
    const onData = (d: Buffer): void => done(d);
    const onClose = (): void => done(null);
    const timer = setTimeout(() => done(null), ms);
    timer.unref();
    outer.on('data', onData);
    outer.once('close', onClose);
    // Done sending before sending anything: nothing will come.
    outer.once('end', onClose);
    outer.resume();
  });
}

async function terminate(
  deps: FrontDoorDeps & { leaves: LeafCertificates },
  outer: net.Socket,
  t: ConnectTarget,
  head: Buffer,
  clientPid: number | null,
): Promise<void> {
  const context = await deps.leaves.secureContextFor(t.host);
  outer.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  const first = head.length > 0 ? head : await firstBytes(outer, deps.pipeline.config().daemon.agent_request_timeout);
  if (first === null) return;
  // A client that speaks plain HTTP in the tunnel (curl --proxytunnel
  // with an http:// URL) is told so in plain HTTP, not closed on silently
  // by a TLS handshake that cannot begin.
  if (first[0] !== TLS_HANDSHAKE) {
    const r = new Refusal(
      'bad_request',
      `this tunnel to ${t.target.host} port ${t.port} carries TLS (an https:// URL), and the bytes sent in it are not a TLS handshake; for a plain http:// URL, send the request to the proxy itself, not through CONNECT (curl: without --proxytunnel)`,
    );
    refuseOnSocket(outer, await deps.journalRefusal(outer, r, `CONNECT ${t.target.host}:${t.port}`));
    return;
  }
  outer.unshift(first);
  const secure = new tls.TLSSocket(outer, { isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'] });
  secure.on('error', () => secure.destroy());
  // The handshake, like a request head, must be whole within
  // agent_request_timeout: a CONNECT answered and then silent (or half a
  // ClientHello) would otherwise hold its connection for ever. There is no
  // channel to answer on yet: the connection is closed.
  const handshake = setTimeout(() => secure.destroy(), deps.pipeline.config().daemon.agent_request_timeout);
  handshake.unref();
  secure.once('secure', () => clearTimeout(handshake));
  secure.once('close', () => clearTimeout(handshake));
  serveInner(deps, outer, t, secure, clientPid);
}

export async function serveConnect(
  deps: FrontDoorDeps & { leaves: LeafCertificates; otherHosts(): 'tunnel' | 'refuse' },
  req: http.IncomingMessage,
  sock: Duplex,
  head: Buffer,
): Promise<void> {
  const outer = req.socket;
  const authority = req.url ?? '';
  sock.on('error', () => sock.destroy());
  // Requests sent before the CONNECT on this connection are answered first.
  await whenAnswered(outer);
  try {
    const identity = deps.identify(outer);
    deps.requireUnlocked();
    deps.touch();
    const t = parseConnectTarget(authority);
    if (coveringCredentials(deps.pipeline, t.target).length > 0)
      return await terminate(deps, outer, t, head, runClientPid(req, identity, deps.pipeline.stores.runs));
    if (deps.otherHosts() === 'refuse')
      throw new Refusal(
        'denied_policy',
        `no credential covers ${t.target.host} port ${t.port} over https, and proxy.other_hosts is "refuse"; use a host a credential allows (GET /v1/credentials lists them), or ask a human to set proxy.other_hosts = "tunnel"`,
      );
    await openTunnel(deps.pipeline, identity, t, outer, head);
  } catch (e) {
    let r = e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
    r = await deps.journalRefusal(outer, r, `CONNECT ${authority.slice(0, 200)}`);
    refuseOnSocket(sock, r);
  }
}
