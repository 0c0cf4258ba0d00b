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

type Open = { req: IncomingMessage; res: ServerResponse };

const open = new WeakMap<object, Set<Open>>();
const cut = new WeakSet<IncomingMessage>();
const failed = new WeakSet<object>();

const closed = (res: ServerResponse): Promise<void> => new Promise((resolve) => res.once('close', () => resolve()));

// From the request's handler, before anything else.
export function trackExchange(req: IncomingMessage, res: ServerResponse): void {
  let set = open.get(req.socket);
  if (!set) open.set(req.socket, (set = new Set()));
  const entry = { req, res };
  set.add(entry);
  res.once('close', () => set.delete(entry));
}

// Resolves once every request open on `sock` has its response finished (or
// its connection gone): what a CONNECT's answer waits for, since the
// tunnel's bytes follow it on the same connection.
export function whenAnswered(sock: object): Promise<void> {
  const set = open.get(sock);
  if (!set || set.size === 0) return Promise.resolve();
  return Promise.all([...set].map(({ res }) => closed(res))).then(() => undefined);
}

// Whether the connection's parse failure cut this request short.
export function cutByParseFailure(req: IncomingMessage): boolean {
  return cut.has(req);
}

// Resolves once every request that arrived whole on `sock` has its response
// finished (or its connection gone); marks those the failure cut short.
// Null when the connection's failure was already taken: Node may report a
// second one (a timeout of the dead parser), and it is not answered twice.
export function afterWholeRequests(sock: object): Promise<void> | null {
  if (failed.has(sock)) return null;
  failed.add(sock);
  const whole: Promise<void>[] = [];
  for (const { req, res } of open.get(sock) ?? []) {
    if (!req.complete) cut.add(req);
    else whole.push(closed(res));
  }
  return Promise.all(whole).then(() => undefined);
}
