// A refusal of the proxy front door as the HTTP response a proxy client
// understands (SPEC §11): postern's status, the §6.3 JSON body, and
// `x-postern-error` naming the code, so a client that shows only the status
// line and headers still says why.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Refusal } from '../../shared/errors';
import { REFUSALS } from '../../shared/protocol';

function parts(r: Refusal): { status: number; headers: Record<string, string | number>; body: string } {
  const body = JSON.stringify({ error: r.toJSON() });
  return {
    status: REFUSALS[r.code],
    headers: {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-postern-error': r.code,
    },
    body,
  };
}

// On a response object; once its head is out, the message cannot change
// into a refusal: the connection is aborted so the client sees it cut.
export function refuseResponse(res: http.ServerResponse, r: Refusal): void {
  if (res.destroyed) return;
  if (res.headersSent) {
    res.socket?.destroy();
    return;
  }
  const p = parts(r);
  res.writeHead(p.status, p.headers);
  res.end(p.body);
}

// On a raw socket (a CONNECT that is not answered 200); the socket closes.
export function refuseOnSocket(sock: Duplex, r: Refusal): void {
  if (!sock.writable) {
    sock.destroy();
    return;
  }
  const p = parts(r);
  const head = Object.entries(p.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  sock.end(
    `HTTP/1.1 ${p.status} ${http.STATUS_CODES[p.status] ?? 'Refused'}\r\n${head}connection: close\r\n\r\n${p.body}`,
  );
}
