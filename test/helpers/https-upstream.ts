// A real HTTPS upstream for tests: a throwaway CA and server certificate made
// with Debian's openssl, and a Node HTTPS server on 127.0.0.1 that records
// every request and counts connections.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer, Server as HttpsServer } from 'node:https';
import { createServer as createHttpServer, IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo, Socket } from 'node:net';

export interface TestCa {
  dir: string;
  caCert: string; // PEM
  caFile: string; // path of the CA PEM
  key: string; // server key PEM
  cert: string; // server cert PEM, for `names`
  cleanup(): void;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

// names: DNS names and IP addresses the server certificate covers.
export function makeTestCa(names: string[]): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'pt-ca-'));
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '2',
      '-subj',
      '/CN=postern test CA',
    ],
    dir,
  );
  openssl(
    [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      `/CN=${names[0]}`,
    ],
    dir,
  );
  const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  writeFileSync(join(dir, 'ext.cnf'), `subjectAltName=${san}\nbasicConstraints=CA:FALSE\n`);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'server.pem',
      '-days',
      '2',
      '-extfile',
      'ext.cnf',
    ],
    dir,
  );
  return {
    dir,
    caCert: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    caFile: join(dir, 'ca.pem'),
    key: readFileSync(join(dir, 'server.key'), 'utf8'),
    cert: readFileSync(join(dir, 'server.pem'), 'utf8'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  remotePort: number | undefined;
}

export type Handler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void | Promise<void>;

export interface Upstream {
  port: number;
  requests: SeenRequest[];
  connections(): number;
  close(): Promise<void>;
}

function start(server: HttpsServer | HttpServer, handler: Handler): Promise<Upstream> {
  const requests: SeenRequest[] = [];
  let connections = 0;
  const sockets = new Set<Socket>();
  server.on(server instanceof HttpsServer ? 'secureConnection' : 'connection', (s: Socket) => {
    connections += 1;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        remotePort: req.socket.remotePort,
      });
      Promise.resolve(handler(req, body, res)).catch(() => res.destroy());
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        port: (server.address() as AddressInfo).port,
        requests,
        connections: () => connections,
        close: () =>
          new Promise<void>((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      });
    });
  });
}

export function startHttpsUpstream(ca: TestCa, handler: Handler): Promise<Upstream> {
  return start(createHttpsServer({ key: ca.key, cert: ca.cert }), handler);
}

export function startHttpUpstream(handler: Handler): Promise<Upstream> {
  return start(createHttpServer(), handler);
}

// A handler that answers 200 with a JSON echo of what it received.
export const echo: Handler = (req, body, res) => {
  const text = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: body.toString('utf8') });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};
