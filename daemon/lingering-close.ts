// Closing a connection while its client is still sending resets it (the
// kernel answers unread bytes with a reset), and the reset makes the
// client's kernel drop what the client had not yet read: the refusal just
// written. So a connection closed after refusing a request whose body may
// still be arriving closes only its write side once the answer is out, then
// reads and drops what comes until the request's message ends, the client
// closes, or LINGER_MS pass (a client that never stops is then reset).
import type http from 'node:http';
import type { Duplex } from 'node:stream';

const LINGER_MS = 5_000;

// Node's HTTP server ends a `connection: close` exchange with the socket's
// destroySoon (end, then destroy once written); this socket's waits.
type Closable = Duplex & { destroySoon?: () => void };

export function lingerAfterAnswer(req: http.IncomingMessage): void {
  const socket = req.socket as Closable;
  if (socket.destroyed) return;
  socket.destroySoon = (): void => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
    };
    if (req.complete) done();
    else req.once('end', done);
    socket.once('end', done);
    socket.once('close', () => clearTimeout(timer));
  };
  req.resume();
}
