// The requests of one HTTP/1.1 connection whose responses are not finished,
// for both front doors' parse failures. A client may send a whole request
// and, in the same bytes, something that is not HTTP: the request is served
// (it may already be on its way upstream), so its answer goes out first,
// then the refusal of what followed, then the connection closes (HTTP/1.1
// answers in order). Answering the failure at once would tell the client its
// request was malformed while it runs, and cut off its real answer. A
// request the failure cut short (its body never ended) never reaches the
// pipeline's send: the failure's answer is its answer, and its exchange
// stays quiet. A CONNECT on a connection waits for the answers before it
// in the same way.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { Refusal } from '../shared/errors';
import { lingerAfterParseFailure } from './lingering-close';
import { refuseOnSocket } from './proxy/refusal-response';

// `done` once its response is finished (or its connection gone).
type Open = { req: IncomingMessage; res: ServerResponse; done: boolean; waiters: (() => void)[] | null };

const open = new WeakMap<object, Set<Open>>();
// Every exchange not yet finished, on any connection (for a stopping daemon).
const everyOpen = new Set<Open>();
const cut = new WeakSet<IncomingMessage>();
const failed = new WeakSet<object>();
// The exchanges still open on its connection when a request arrived.
const before = new WeakMap<IncomingMessage, Open[]>();
// The last request each connection brought, and the requests answered.
const latest = new WeakMap<object, IncomingMessage>();
const answered = new WeakSet<IncomingMessage>();

const closed = (e: Open): Promise<void> =>
  e.done ? Promise.resolve() : new Promise((resolve) => (e.waiters ??= []).push(resolve));

// From the request's handler, before anything else.
export function trackExchange(req: IncomingMessage, res: ServerResponse): void {
  let set = open.get(req.socket);
  if (!set) open.set(req.socket, (set = new Set()));
  if (set.size > 0) before.set(req, [...set]);
  const entry: Open = { req, res, done: false, waiters: null };
  set.add(entry);
  everyOpen.add(entry);
  latest.set(req.socket, req);
  res.once('close', () => {
    answered.add(req);
    set.delete(entry);
    everyOpen.delete(entry);
    entry.done = true;
    for (const wake of entry.waiters ?? []) wake();
  });
}

// Whether a request may run: at once (true) when it is alone on its
// connection; otherwise once the requests before it are answered, and only
// if the connection is still open for its answer. A pipelined request behind
// an answer that closes the connection (HTTP/1.0, `connection: close`, a
// refusal that closes) would run and never be answered; its client sends it
// again on a new connection, so it must not have run: its response is
// destroyed and the answer is false. Synchronous in the common case, so the
// lone request pays no turn of the event loop.
export function inTurn(req: IncomingMessage, res: ServerResponse): true | Promise<boolean> {
  const earlier = before.get(req);
  if (!earlier) return true;
  return Promise.all(earlier.map(closed)).then(() => {
    const open = req.socket.writable && !req.socket.destroyed;
    if (!open) closeWhenWritten(req.socket, res);
    return open;
  });
}

// Resolves once every request open on `sock` has its response finished (or
// its connection gone): what a CONNECT's answer waits for, since the
// tunnel's bytes follow it on the same connection.
export function whenAnswered(sock: object): Promise<void> {
  const set = open.get(sock);
  if (!set || set.size === 0) return Promise.resolve();
  return Promise.all([...set].map(closed)).then(() => undefined);
}

// A connection that is closing (an answer before said `connection:
// close`) ends once what was written to it is out: destroyed at once, the
// answers still queued on it would be lost.
function closeWhenWritten(sock: Duplex & { destroySoon?: () => void }, res?: ServerResponse): void {
  if (sock.destroyed || !sock.destroySoon) {
    if (res) res.destroy();
    else sock.destroy();
  } else sock.destroySoon();
}

// Whether the connection's parse failure cut this request short, and so
// answers it: asked from a refusal's path, after the parser has finished
// with the bytes the request's head came in (a failure in those same bytes,
// its transfer coding or its first chunk, is raised by the same parser run
// just after the head was handed over), and again before the refusal is
// written. One answer per request.
export async function cutByParseFailure(req: IncomingMessage): Promise<boolean> {
  await null;
  return cut.has(req);
}

// The same, at once: asked again just before the refusal is written.
export function cutAlready(req: IncomingMessage): boolean {
  return cut.has(req);
}

// Resolves once every request that arrived whole on `sock` has its response
// finished (or its connection gone), to whether the failure still wants an
// answer; marks the requests the failure cut short. No answer (false) when
// the failure lies in the body of a request already answered (a refusal
// sent before its body ended): the client sent one request and has its one
// answer. Null when the connection's failure was already taken: Node may
// report a second one (a timeout of the dead parser), and it is not
// answered twice.
export function afterWholeRequests(sock: object): Promise<boolean> | null {
  if (failed.has(sock)) return null;
  failed.add(sock);
  const last = latest.get(sock);
  if (last && answered.has(last) && !last.complete) return Promise.resolve(false);
  const whole: Promise<void>[] = [];
  for (const e of open.get(sock) ?? []) {
    if (!e.req.complete) cut.add(e.req);
    else whole.push(closed(e));
  }
  return Promise.all(whole).then(() => true);
}

// A connection's parse failure answered (both front doors' clientError):
// after the requests that arrived whole, journaled by `journal`, unless the
// failure needs no answer (above) or the connection is gone.
export function answerParseFailure(sock: Duplex, journal: () => Promise<Refusal>): void {
  const waiting = afterWholeRequests(sock);
  if (!waiting) return;
  // Whatever closes the connection from now on (the answer of an HTTP/1.0
  // request before the failure, the failure's own) lets the client finish
  // sending first, so it reads its answers (lingering-close.ts).
  lingerAfterParseFailure(sock);
  waiting
    .then(async (answer) => {
      if (!answer) return closeWhenWritten(sock);
      const r = sock.writable ? await journal() : null;
      if (r && sock.writable) refuseOnSocket(sock, r);
      closeWhenWritten(sock);
    })
    .catch(() => sock.destroy());
}

// Node's parser stops reading a connection at a request that asks to
// upgrade it (WebSocket, h2c), expecting the protocol to change. postern
// never upgrades: the request is served as HTTP/1.1 and its answer closes
// the connection, since nothing after it there would ever be read (a
// pipelined request was held unanswered).
export function closeIfUpgradeAsked(req: IncomingMessage, res: ServerResponse): void {
  if (req.headers.upgrade !== undefined) res.shouldKeepAlive = false;
}

// The client went away in the middle of a request (closed or reset): not
// malformed HTTP. Both front doors close quietly; a request it cut short
// says so itself, once, when its body's read fails (bodyCutOff).
export function clientWentAway(e: NodeJS.ErrnoException): boolean {
  return e.code === 'ECONNRESET' || e.code === 'HPE_INVALID_EOF_STATE';
}

export function bodyCutOff(): Refusal {
  return new Refusal(
    'bad_request',
    'the connection closed before the request body ended; send the whole request and wait for the answer',
  );
}

// A stopping daemon, once what was in flight had its time: each exchange
// still without an answer (its body still arriving, say) is answered with
// `answer` rather than closed without a word; one whose answer began is
// cut, as any answer cut short.
export function answerUnanswered(answer: (res: ServerResponse) => void): void {
  for (const e of [...everyOpen]) {
    e.res.shouldKeepAlive = false;
    answer(e.res);
  }
}
