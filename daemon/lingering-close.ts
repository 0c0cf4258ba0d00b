// Closing a connection while its client is still sending resets it (the
// kernel answers unread bytes with a reset), and the reset makes the
// client's kernel drop what the client had not yet read: the answer just
// written. A client whose write fails on the closed connection (EPIPE) may
// likewise drop the answer waiting in its own buffer. So a connection
// closed while its client may still be sending (after refusing a request
// whose body may still be arriving, or after a parse failure, whose client
// sent bytes past what could be read) closes only its write side once the
// answers are out, then reads and drops what comes until the request's
// message ends, the client closes, or LINGER_MS pass (a client that never
// stops is then reset).
import type http from 'node:http';
import type { Duplex } from 'node:stream';

const LINGER_MS = 5_000;

// Node's HTTP server ends a `connection: close` exchange with the socket's
// destroySoon (end, then destroy once written); this socket's waits.
type Closable = Duplex & { destroySoon?: () => void };

const lingering = new WeakSet<Duplex>();

// `enough`, when given, is a promise of the point after which nothing the
// client sends matters (a request's message ended).
function linger(socket: Closable, enough?: Promise<void>): void {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  let closing = false;
  socket.destroySoon = (): void => {
    if (closing) return;
    closing = true;
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    // Once what was written is out: destroyed before, it would be lost.
    const done = (): void => {
      clearTimeout(timer);
      if (socket.writableFinished) socket.destroy();
      else socket.once('finish', () => socket.destroy());
    };
    void enough?.then(done);
    socket.once('end', done);
    socket.once('close', () => clearTimeout(timer));
  };
}

// After a refusal that closes the connection, its request's body may still
// be arriving.
export function lingerAfterAnswer(req: http.IncomingMessage): void {
  linger(req.socket as Closable, req.complete ? Promise.resolve() : new Promise((resolve) => req.once('end', resolve)));
  req.resume();
}

// After a parse failure: the client may still be sending what follows the
// bytes that failed; the connection is read until the client stops.
export function lingerAfterParseFailure(socket: Duplex): void {
  linger(socket);
}
