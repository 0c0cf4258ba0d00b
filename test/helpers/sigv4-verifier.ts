// AWS Signature Version 4 as the AWS SDK for JavaScript computes it
// (@smithy/signature-v4, an implementation nobody on the team wrote), for
// tests of postern's signer: the Authorization smithy makes for a request,
// and a real HTTP server that accepts only requests whose signature smithy
// computes again from what arrived.
//
// smithy takes a request object whose query is already decoded; the wire
// query is decoded here the way an AWS endpoint reads it (RFC 3986: `%XX`
// is a byte, `+` a plus, a `%` without two hex digits itself, a bare name
// an empty value). smithy keys headers by name, so a header sent more than
// once is handed to it as its trimmed values joined by ','.
import http from 'node:http';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SignatureV4 } from '@smithy/signature-v4';
import { Hash } from '@smithy/hash-node';

export interface RefKeys {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface RefRequest {
  method: string;
  host: string;
  path: string;
  query: string; // as on the wire, '' or '?…'
  headers: [string, string][];
  body: Buffer | string;
  // The x-amz-content-sha256 the client declares (UNSIGNED-PAYLOAD, a
  // streaming mode); absent: smithy hashes the body itself.
  contentSha256?: string;
  region: string;
  service: string;
  date: Date;
  // Sign exactly these names (with smithy's own x-amz-* headers); absent:
  // smithy's default choice.
  signedHeaders?: string[];
}

export function decodeWireQuery(query: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const piece of query.replace(/^\?/, '').split('&')) {
    if (piece === '') continue;
    const [rawName, ...rest] = piece.split('=');
    const decode = (s: string) => decodeURIComponent(s.replace(/%(?![0-9A-Fa-f]{2})/g, '%25'));
    const name = decode(rawName ?? '');
    const value = decode(rest.join('='));
    const had = out[name];
    out[name] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
  }
  return out;
}

function groupHeaders(headers: [string, string][]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const [n, v] of headers) byName.set(n.toLowerCase(), [...(byName.get(n.toLowerCase()) ?? []), v]);
  return byName;
}

// The headers smithy signs the request with (authorization, x-amz-date, …).
export async function smithySign(req: RefRequest, keys: RefKeys): Promise<Record<string, string>> {
  const grouped = groupHeaders(req.headers);
  const wanted = req.signedHeaders === undefined ? null : new Set(req.signedHeaders);
  const headers: Record<string, string> = { host: req.host };
  for (const [name, values] of grouped) {
    if (wanted !== null && !wanted.has(name)) continue;
    headers[name] = values.length === 1 ? (values[0] as string) : values.map((v) => v.trim()).join(',');
  }
  // A declared hash is smithy's payload hash only when it is signed too.
  if (req.contentSha256 !== undefined && (wanted === null || wanted.has('x-amz-content-sha256')))
    headers['x-amz-content-sha256'] = req.contentSha256;
  const signer = new SignatureV4({
    credentials: keys,
    region: req.region,
    service: req.service,
    sha256: Hash.bind(null, 'sha256'),
    uriEscapePath: req.service !== 's3',
    // With a list that leaves x-amz-content-sha256 out, smithy must not add it.
    applyChecksum: wanted === null || wanted.has('x-amz-content-sha256'),
  });
  const signed = await signer.sign(
    {
      method: req.method,
      protocol: 'https:',
      hostname: req.host.replace(/:\d+$/, ''),
      path: req.path,
      query: decodeWireQuery(req.query),
      headers,
      body: req.body,
    },
    { signingDate: req.date, signableHeaders: wanted ?? undefined },
  );
  return signed.headers as Record<string, string>;
}

export interface Verdict {
  status: number;
  reason: string;
}

// What a verified request is answered with (an AWS-like response body).
export type Answer = (req: { method: string; url: string; body: Buffer }) => {
  headers?: Record<string, string>;
  body: string | Buffer;
};

export interface VerifierServer {
  port: number;
  received: { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer; verdict: Verdict }[];
  close(): Promise<void>;
}

function amzDateToDate(v: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(v);
  return m === null ? null : new Date(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`);
}

export async function verifySigV4(
  req: http.IncomingMessage,
  body: Buffer,
  keys: RefKeys,
  scope: { region: string; service: string },
): Promise<Verdict> {
  const auth = req.headers['authorization'] ?? '';
  const list = /SignedHeaders=([^,\s]+)/.exec(auth)?.[1];
  const date = amzDateToDate(String(req.headers['x-amz-date'] ?? ''));
  if (list === undefined || date === null) return { status: 400, reason: 'no SigV4 Authorization or x-amz-date' };
  // smithy writes its own token into what it signs; AWS checks the one sent.
  if ((req.headers['x-amz-security-token'] ?? null) !== (keys.sessionToken ?? null))
    return { status: 403, reason: 'InvalidToken' };
  const declared = String(req.headers['x-amz-content-sha256'] ?? '');
  const bodyHash = createHash('sha256').update(body).digest('hex');
  // An unsigned payload (whole or aws-chunked with a trailer) is not hashed.
  const unsigned = declared === 'UNSIGNED-PAYLOAD' || declared === 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
  if (!unsigned && declared !== bodyHash)
    return { status: 400, reason: 'x-amz-content-sha256 does not match the body' };
  const raw: [string, string][] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = (req.rawHeaders[i] as string).toLowerCase();
    if (name !== 'host' && name !== 'x-amz-content-sha256') raw.push([name, req.rawHeaders[i + 1] as string]);
  }
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const expected = await smithySign(
    {
      method: req.method ?? 'GET',
      host: req.headers.host ?? '',
      path: q === -1 ? url : url.slice(0, q),
      query: q === -1 ? '' : url.slice(q),
      headers: raw,
      body,
      contentSha256: declared,
      region: scope.region,
      service: scope.service,
      date,
      signedHeaders: list.split(';'),
    },
    keys,
  );
  return expected['authorization'] === auth
    ? { status: 200, reason: 'signature verified' }
    : { status: 403, reason: 'SignatureDoesNotMatch' };
}

// A plain HTTP server on 127.0.0.1 handing each request over with its body.
// What an upstream that checks every signature saw of each request.
export interface SeenRequest {
  method: string;
  url: string;
  status: number;
  reason: string;
  auth: string;
}

// A stack upstream's handler that verifies each request's signature,
// records it in `seen`, answers a bad one with its verdict and passes a
// good one to `answer`.
export function verifyingHandler(
  keys: RefKeys,
  scope: { region: string; service: string },
  seen: SeenRequest[],
  answer: (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void,
): (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => Promise<void> {
  return async (req, body, res) => {
    const v = await verifySigV4(req, body, keys, scope);
    seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      status: v.status,
      reason: v.reason,
      auth: String(req.headers.authorization ?? ''),
    });
    if (v.status !== 200) {
      res.writeHead(v.status, { 'content-type': 'text/plain' }).end(v.reason);
      return;
    }
    answer(req, body, res);
  };
}

export async function startBodyServer(
  onRequest: (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => onRequest(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// An HTTP server on 127.0.0.1 that answers 200 only to requests whose
// Authorization smithy computes identically from the request received.
export async function startVerifier(
  keys: RefKeys,
  scope: { region: string; service: string },
  answer?: Answer,
): Promise<VerifierServer> {
  const received: VerifierServer['received'] = [];
  const server = await startBodyServer((req, body, res) => {
    verifySigV4(req, body, keys, scope).then(
      (verdict) => {
        const seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
        received.push({ ...seen, verdict });
        if (verdict.status === 200 && answer) {
          const a = answer(seen);
          res.writeHead(200, a.headers ?? {}).end(a.body);
        } else res.writeHead(verdict.status, { 'content-type': 'text/plain' }).end(verdict.reason);
      },
      (e: unknown) => res.writeHead(500).end(String(e)),
    );
  });
  return { ...server, received };
}
