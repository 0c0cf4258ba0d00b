// An origin that parses HTTP/1.1 itself, over TLS (the test CA's server
// certificate) or plain TCP, so a test can make it misread framing the way
// broken servers do: each route says how much of a request's body it reads
// (the declared Content-Length, none at all — a "CL.0" route — or up to the
// declared length but only what arrives before a pause), and whatever it
// did not read is parsed as the next request. It keeps every byte each
// connection received, every request it parsed (with where in the
// connection's byte stream it began), and whether the connection is closed.
// Responses are raw bytes the route writes, so framing and codings on the
// wire are exactly what the test says.
import net from 'node:net';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';

export interface ParsedRequest {
  conn: number; // the connection's id, 1, 2, … in order of acceptance
  offset: number; // where in the connection's received bytes the request line began
  headLength: number; // request line and headers, with the blank line
  method: string;
  target: string;
  headers: [string, string][];
  body: Buffer; // the body bytes the route read
  raw: Buffer; // head and body as read
}

export function header(req: { headers: [string, string][] }, name: string): string | undefined {
  const n = name.toLowerCase();
  const all = req.headers.filter(([k]) => k.toLowerCase() === n).map(([, v]) => v);
  return all.length === 0 ? undefined : all.join(', ');
}

export function declaredLength(req: { headers: [string, string][] }): number {
  const v = header(req, 'content-length');
  return v === undefined || !/^\d+$/.test(v.trim()) ? 0 : Number(v.trim());
}

export interface RawConnection {
  id: number;
  received: Buffer[]; // every byte, in order
  requests: ParsedRequest[];
  closed: boolean;
  closedByOrigin: boolean; // the origin ended it (else the client did, or it is open)
  receivedLength(): number;
}

// What a route does with a request whose head was parsed.
export interface RouteAnswer {
  // 'declared': Content-Length bytes; 'none': nothing (CL.0); 'until-pause':
  // up to Content-Length bytes, but only those that arrive before `pauseMs`
  // without data (or before the client closes).
  read: 'declared' | 'none' | 'until-pause';
  // The response bytes, given the request with the body that was read; null
  // writes nothing.
  respond(req: ParsedRequest): Buffer | null;
  // End the connection after the response (a body delimited by the close).
  close?: boolean;
  // More bytes written `ms` after the response, as a server that sends a
  // second message unasked or the rest of a broken one would (nothing, if
  // the connection is gone by then); `written` is called as they are.
  // With `close`, the connection ends after them.
  later?: { ms: number; bytes: Buffer; written?: () => void };
}

export type RawRoute = (head: Omit<ParsedRequest, 'body' | 'raw'>, conn: RawConnection) => RouteAnswer;

export interface RawOriginOptions {
  tls?: { key: string; cert: string }; // plain TCP without it
  // Stop after a response to a request that says `Connection: close`, as
  // servers do (the rest of what arrives is read and dropped, never parsed).
  honourClose: boolean;
  pauseMs?: number; // for 'until-pause'; default 150
}

export interface RawOrigin {
  port: number;
  connections: RawConnection[];
  requests: ParsedRequest[]; // every request parsed, in order
  close(): Promise<void>;
}

// Bytes received on one connection, read in order by the request loop.
class Reader {
  private buf = Buffer.alloc(0);
  private waiter: (() => void) | null = null;
  ended = false;
  consumed = 0; // offset of buf[0] in the connection's stream

  push(b: Buffer): void {
    this.buf = Buffer.concat([this.buf, b]);
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  // Resolves on new data or the end, or after `ms` (when given).
  private wait(ms?: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer =
        ms === undefined
          ? null
          : setTimeout(() => {
              this.waiter = null;
              resolve(false);
            }, ms);
      this.waiter = () => {
        if (timer) clearTimeout(timer);
        resolve(true);
      };
    });
  }

  private take(n: number): Buffer {
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    this.consumed += n;
    return Buffer.from(out);
  }

  // The request line and headers, with the blank line; null at the end.
  async head(): Promise<Buffer | null> {
    for (;;) {
      const at = this.buf.indexOf('\r\n\r\n');
      if (at >= 0) return this.take(at + 4);
      if (this.ended) return null;
      await this.wait();
    }
  }

  async exactly(n: number): Promise<Buffer> {
    while (this.buf.length < n && !this.ended) await this.wait();
    return this.take(Math.min(n, this.buf.length));
  }

  async untilPause(n: number, ms: number): Promise<Buffer> {
    while (this.buf.length < n && !this.ended) {
      if (!(await this.wait(ms))) break;
    }
    return this.take(Math.min(n, this.buf.length));
  }
}

function parseHead(bytes: Buffer): { method: string; target: string; headers: [string, string][] } {
  const lines = bytes
    .toString('latin1')
    .split('\r\n')
    .filter((l) => l !== '');
  const [method = '', target = ''] = (lines[0] ?? '').split(' ');
  const headers: [string, string][] = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()]);
  }
  return { method, target, headers };
}

export async function startRawOrigin(o: RawOriginOptions, route: RawRoute): Promise<RawOrigin> {
  const connections: RawConnection[] = [];
  const requests: ParsedRequest[] = [];
  const sockets = new Set<net.Socket>();
  const pauseMs = o.pauseMs ?? 150;

  const serve = (socket: net.Socket): void => {
    const conn: RawConnection = {
      id: connections.length + 1,
      received: [],
      requests: [],
      closed: false,
      closedByOrigin: false,
      receivedLength: () => conn.received.reduce((n, b) => n + b.length, 0),
    };
    connections.push(conn);
    sockets.add(socket);
    const reader = new Reader();
    socket.on('data', (b: Buffer) => {
      conn.received.push(b);
      reader.push(b);
    });
    socket.on('end', () => reader.end());
    socket.on('error', () => undefined);
    socket.on('close', () => {
      conn.closed = true;
      sockets.delete(socket);
      reader.end();
    });
    const finish = (): void => {
      conn.closedByOrigin = !conn.closed;
      // Half-close and keep reading (dropping what comes), as servers do
      // before they close, so a response is not lost to a reset.
      socket.end();
    };
    void (async () => {
      for (;;) {
        const offset = reader.consumed;
        const headBytes = await reader.head();
        if (headBytes === null) return;
        const parsed = parseHead(headBytes);
        const head = { conn: conn.id, offset, headLength: headBytes.length, ...parsed };
        if (!/^[A-Z]+$/.test(parsed.method) || !parsed.target.startsWith('/')) {
          const req: ParsedRequest = { ...head, body: Buffer.alloc(0), raw: headBytes };
          conn.requests.push(req);
          requests.push(req);
          if (!socket.destroyed)
            socket.write('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
          finish();
          return;
        }
        const answer = route(head, conn);
        const length = declaredLength(head);
        const body =
          answer.read === 'none'
            ? Buffer.alloc(0)
            : answer.read === 'declared'
              ? await reader.exactly(length)
              : await reader.untilPause(length, pauseMs);
        const req: ParsedRequest = { ...head, body, raw: Buffer.concat([headBytes, body]) };
        conn.requests.push(req);
        requests.push(req);
        const out = answer.respond(req);
        if (out && !socket.destroyed) socket.write(out);
        const close =
          answer.close === true || (o.honourClose && /(^|,)\s*close\s*(,|$)/i.test(header(head, 'connection') ?? ''));
        if (answer.later) {
          const later = answer.later;
          const wrote = new Promise<void>((resolve) =>
            setTimeout(() => {
              if (!socket.destroyed) {
                socket.write(later.bytes);
                later.written?.();
              }
              resolve();
            }, later.ms),
          );
          if (close) await wrote;
        }
        if (close) {
          finish();
          return;
        }
      }
    })();
  };

  const server = o.tls ? tls.createServer({ key: o.tls.key, cert: o.tls.cert }, serve) : net.createServer(serve);
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    connections,
    requests,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

// A complete response: status line, headers as given, then the body bytes
// as they are (the caller frames them: Content-Length, chunks or a close).
export function rawResponse(status: number, headers: [string, string][], body: Buffer | string = ''): Buffer {
  const head = `HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'Status'}\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8')]);
}

// `data` in chunks whose sizes are taken from `sizes` in turn (the last one
// repeating), then the last chunk.
export function chunked(data: Buffer, sizes: number[]): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  let i = 0;
  while (at < data.length) {
    const n = Math.min(sizes[Math.min(i, sizes.length - 1)] as number, data.length - at);
    parts.push(Buffer.from(`${n.toString(16)}\r\n`), data.subarray(at, at + n), Buffer.from('\r\n'));
    at += n;
    i += 1;
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}
