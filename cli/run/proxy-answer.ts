// The answers `postern run`'s proxy gives itself, before anything reaches
// the daemon: an HTTP response with the §6.3 JSON error as body and the code
// in x-postern-error, as the daemon's own refusals through the proxy.
import http from 'node:http';

export function proxyAnswer(status: number, code: string, message: string, extra: Record<string, string> = {}): string {
  const body = JSON.stringify({ error: { code, message } });
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'x-postern-error': code,
    ...extra,
    connection: 'close',
  };
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\n${lines.join('\r\n')}\r\n\r\n${body}`;
}

export const REALM = { 'proxy-authenticate': 'Basic realm="postern"' } as const;
