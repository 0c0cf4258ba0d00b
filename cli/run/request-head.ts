// The first request head on a proxy connection: read within a size and a
// time bound, then rewritten before it is relayed. Only the first head is
// read; what follows is relayed as bytes.
import net from 'node:net';

export const HEAD_LIMIT = 16 * 1024;
export const HEAD_TIMEOUT_MS = 10_000;

export interface RequestHead {
  method: string;
  target: string;
  version: string;
  headers: { name: string; value: string }[];
  rest: Buffer; // bytes after the head (a body, or a TLS ClientHello)
}

export class HeadProblem extends Error {}

function parse(text: string, rest: Buffer): RequestHead {
  const [requestLine = '', ...lines] = text.split('\r\n');
  const m = /^([A-Z]+) (\S+) (HTTP\/1\.[01])$/.exec(requestLine);
  if (!m) throw new HeadProblem('the request line is not "METHOD target HTTP/1.1"');
  const headers = lines.map((line) => {
    const colon = line.indexOf(':');
    // A bare CR or LF would let one line read as two further on.
    if (colon <= 0 || /[\r\n\0]/.test(line) || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(line.slice(0, colon)))
      throw new HeadProblem('a header line is not "name: value"');
    return { name: line.slice(0, colon), value: line.slice(colon + 1).trim() };
  });
  return { method: m[1]!, target: m[2]!, version: m[3]!, headers, rest };
}

// Resolves with the head once "\r\n\r\n" arrives; rejects with a HeadProblem
// when it does not within the bounds or is not a request head.
export function readRequestHead(
  socket: net.Socket,
  limit = HEAD_LIMIT,
  timeoutMs = HEAD_TIMEOUT_MS,
): Promise<RequestHead> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const done = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.pause();
    };
    const timer = setTimeout(() => {
      done();
      reject(new HeadProblem(`the request head did not arrive within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const onEnd = (): void => {
      done();
      reject(new HeadProblem('the connection ended before a whole request head'));
    };
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0 ? buffered.length > limit : end + 4 > limit) {
        done();
        reject(new HeadProblem(`the request head is over ${limit / 1024} KiB`));
        return;
      }
      if (end < 0) return;
      done();
      try {
        resolve(parse(buffered.subarray(0, end).toString('latin1'), buffered.subarray(end + 4)));
      } catch (e) {
        reject(e);
      }
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    // Closed without an end (destroyed, reset): nothing is left to wait for.
    socket.on('close', onEnd);
  });
}

export function headerValues(head: RequestHead, name: string): string[] {
  return head.headers.filter((h) => h.name.toLowerCase() === name).map((h) => h.value);
}

// The head as relayed: the proxy credentials removed (the token is for this
// proxy only, never the daemon's), the client's own claim of a run client
// replaced by what `postern run` found. A request that is not a CONNECT is
// sent with `connection: close`, so that the next request comes on a new
// connection, whose head is checked again.
export function relayedHead(head: RequestHead, client: string): Buffer {
  const dropped = new Set(['proxy-authorization', 'postern-run-client']);
  if (head.method !== 'CONNECT') for (const n of ['connection', 'proxy-connection', 'keep-alive']) dropped.add(n);
  const kept = head.headers.filter((h) => !dropped.has(h.name.toLowerCase()));
  const added = [
    { name: 'postern-run-client', value: client },
    ...(head.method !== 'CONNECT' ? [{ name: 'connection', value: 'close' }] : []),
  ];
  const lines = [...kept, ...added].map((h) => `${h.name}: ${h.value}`);
  return Buffer.from(`${head.method} ${head.target} ${head.version}\r\n${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}
