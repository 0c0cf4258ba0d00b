// undici 7 (the release line that runs on Node 20) asserts that its HTTP/1
// parser is not paused when an upstream connection ends, is reset or
// closes (nodejs/undici#5360; undici 8 fixes it but needs Node 22). A
// response read more slowly than it arrives pauses the parser (its body's
// backpressure); if the pause falls at the end of what has arrived and the
// server then closes the connection (`connection: close`, a body that ends
// at the close), the assertion was thrown from an event handler and the
// daemon exited: any upstream could end it with a large answer to a slow
// client. So each upstream socket passes its 'end' on only once the parser
// runs again (the reader caught up, and the message ends as it should),
// and a reset or close that finds the parser paused makes the response
// fail instead of the process.
import type { Duplex } from 'node:stream';

interface Parser {
  paused: boolean;
  finish(): unknown;
}

// How soon a held 'end' looks whether the parser runs again: at once at
// first, then less often while the reader stays stalled.
const RECHECK_FIRST_MS = 5;
const RECHECK_MAX_MS = 1000;

// undici keeps the parser on the socket under its Symbol('parser').
function parserOf(socket: Duplex): Parser | null {
  for (const key of Object.getOwnPropertySymbols(socket)) {
    if (key.description !== 'parser') continue;
    const p = (socket as unknown as Record<symbol, unknown>)[key];
    if (typeof p === 'object' && p !== null && typeof (p as Parser).finish === 'function') return p as Parser;
  }
  return null;
}

const guarded = new WeakSet<object>();

// The parser's finish, where the parser is paused, answers with an error
// (the response then fails) instead of throwing.
function guardFinish(parser: Parser): void {
  const proto = Object.getPrototypeOf(parser) as Parser;
  if (guarded.has(proto)) return;
  guarded.add(proto);
  const finish = proto.finish;
  proto.finish = function (this: Parser): unknown {
    if (this.paused) return new Error('the upstream connection ended while its response was still being read');
    return finish.call(this);
  };
}

export function guardParserEnd(socket: Duplex): void {
  const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
  socket.emit = function (event: string | symbol, ...args: unknown[]): boolean {
    if (event !== 'end' && event !== 'close' && event !== 'error') return emit(event, ...args);
    const parser = parserOf(socket);
    if (parser) guardFinish(parser);
    if (event !== 'end' || !parser?.paused) return emit(event, ...args);
    let wait = RECHECK_FIRST_MS;
    const later = (): void => {
      if (socket.destroyed) return;
      if (!parserOf(socket)?.paused) {
        emit('end', ...args);
        return;
      }
      wait = Math.min(RECHECK_MAX_MS, wait * 2);
      setTimeout(later, wait);
    };
    setTimeout(later, wait);
    return true;
  } as typeof socket.emit;
}
