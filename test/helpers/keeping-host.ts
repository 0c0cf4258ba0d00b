// An upstream that keeps the last Authorization it was sent at /store and
// shows it to anyone at /last, as a request log or an inspection endpoint
// would: the host of the tests of what a host may echo later.
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface KeepingHost {
  kept: string; // what /last shows; a test may set it
  handler(req: IncomingMessage, body: Buffer, res: ServerResponse): void;
}

export function keepingHost(): KeepingHost {
  const host: KeepingHost = {
    kept: '',
    handler(req, _body, res) {
      if (req.url === '/store') host.kept = String(req.headers['authorization'] ?? '');
      const text = req.url === '/last' ? JSON.stringify({ seen: host.kept }) : '{"ok":true}';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
  };
  return host;
}
