// SPEC §11 with §6.4: a response passed on to a client of the proxy front
// door as it arrives. In order, as shapeResponse does for a whole body:
// undo a Transfer-Encoding other than chunked, then a Content-Encoding (each
// a zlib stream), drop Set-Cookie unless the credential passes it, redact
// headers and body (the body by the streaming scanner, which holds back only
// what may begin an occurrence), and cut at max_response_body: then the
// message is closed unfinished (sink.abort(): the client has every byte
// up to the cut and knows the body is not whole) and the outcome says
// truncated.
//
// Decisions where the SPEC is silent:
// - The headers that frame the bytes on the wire are never passed on
//   (content-length, transfer-encoding, and the hop-by-hop headers with
//   those the upstream's `connection` names); the front door frames the
//   message itself. content-encoding goes when its coding was undone.
// - An upstream's `x-postern-error` is never passed on: a client could not
//   tell the upstream's answer from postern's refusal.
// - A failure once the head went out cannot become a refusal: the message
//   is aborted (sink.abort(): the connection is closed without ending it,
//   so the client sees it incomplete) and the outcome records the error.
// - So is a body cut at max_response_body: ended as if whole, a truncated
//   download or clone would pass for a complete one (curl would exit 0
//   with half a file); unfinished, every HTTP/1.1 client reports it.
import { createHash, type Hash } from 'node:crypto';
import { sha256hex } from '../../shared/crypto';
import { Refusal } from '../../shared/errors';
import { responseFailure } from './http-failures';
import { decodeStream, parseContentEncoding, parseTransferEncoding, type Coding } from './decode';
import type { Redactor } from './redact';
import { streamRedactor } from './redact/stream';
import { shapeHeaders } from './response';

const EMPTY = Buffer.alloc(0);

export interface ResponseSink {
  respond(status: number, headers: Record<string, string | string[]>): void;
  // May return a promise when the client is slow to take more.
  write(chunk: Buffer): void | Promise<void>;
  end(): void;
  // The message cannot be completed: close without ending it, after the
  // bytes written so far.
  abort(): void;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: AsyncIterable<Buffer>;
  close(): void;
  bodiless: boolean; // the answer to HEAD, a 204 or a 304
}

export interface StreamLimits {
  passSetCookie: boolean;
  redactor: Redactor | null;
  cap: number; // max_response_body, in bytes of the body as decoded
  host: string;
}

export interface Streamed {
  status: number;
  bytes: number; // read from the upstream, as it sent them
  sent: number; // body bytes given to the client
  redactions: number;
  truncated: boolean;
  bodySha256: string; // of the body bytes given to the client
  error: Refusal | null; // a failure after the head went out
}

// Never passed on, whatever the response (see above). `x-postern-error`
// is postern's own: on this front door it is what tells a refusal from an
// upstream's answer (SPEC §11), so an upstream may not send it.
const NOT_PASSED_ON = new Set([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'x-postern-error',
]);

// The answer to HEAD and a 304 carry no body: their content-length frames
// nothing and tells the length of what a GET would get (RFC 9110 §8.6), as
// long as no coding is undone (a GET through postern would then come back
// decoded, of a length not known in advance). Clients use it (`curl -I`,
// the size of a download before it begins).
const NOT_PASSED_ON_BODILESS = new Set([...NOT_PASSED_ON].filter((n) => n !== 'content-length'));

// The headers of this response not passed on: those above, those its
// `connection` names, and content-encoding when its coding was undone.
function headersNotPassedOn(
  headers: Record<string, string | string[]>,
  contentDecoded: boolean,
  lengthKept: boolean,
): ReadonlySet<string> {
  const base = lengthKept ? NOT_PASSED_ON_BODILESS : NOT_PASSED_ON;
  // Most responses name only keep-alive or close: nothing beyond the base.
  const connection = headers['connection'];
  if (connection === undefined && !contentDecoded) return base;
  const more: string[] = [];
  for (const value of typeof connection === 'string' ? [connection] : (connection ?? []))
    for (const n of value.split(',')) {
      const name = n.trim().toLowerCase();
      if (name !== '' && !base.has(name)) more.push(name);
    }
  if (contentDecoded) more.push('content-encoding');
  return more.length === 0 ? base : new Set([...base, ...more]);
}

// The body's declared length when nothing is to be decoded: the chunk that
// reaches it is the last (undici reads no byte beyond it), so the scanner
// decides the tail at once instead of holding it for an end that follows.
function declaredLength(res: UpstreamResponse, codings: Coding[]): number | null {
  const v = res.headers['content-length'];
  return codings.length === 0 && typeof v === 'string' && /^[0-9]{1,15}$/.test(v) ? Number(v) : null;
}

// Throws a refusal before anything is passed on when the codings cannot be
// undone; once the head is out, failures end up in `error`.
export async function streamResponse(res: UpstreamResponse, o: StreamLimits, sink: ResponseSink): Promise<Streamed> {
  let transfer: Coding[];
  let content: Coding[];
  try {
    transfer = parseTransferEncoding(res.headers['transfer-encoding'], o.host);
    content = parseContentEncoding(res.headers['content-encoding'], o.host);
  } catch (e) {
    res.close();
    throw e;
  }
  const codings = [...transfer, ...content];
  const contentDecoded = content.length > 0;
  const lengthKept = res.bodiless && res.status !== 204 && codings.length === 0;
  const head = shapeHeaders(
    res.headers,
    o.passSetCookie,
    o.redactor,
    headersNotPassedOn(res.headers, contentDecoded, lengthKept),
    true,
  );
  let bytes = 0;
  async function* counted(): AsyncGenerator<Buffer> {
    for await (const chunk of res.body) {
      bytes += chunk.length;
      yield chunk;
    }
  }
  // Without codings the body is read as it comes (counted in the loop).
  const decoding = codings.length > 0;
  const declared = declaredLength(res, codings);
  const scanner = streamRedactor(o.redactor, o.cap);
  // Most bodies reach the client in one piece: hashed in one call, and a
  // Hash object made only for a second piece.
  let first: Buffer | null = null;
  let hash: Hash | null = null;
  let sent = 0;
  // The head goes out with the body's first bytes (or its end): a body
  // that fails before any byte of it is passed on is refused whole (a 502
  // the client can read), not a head and then a cut.
  let responded = false;
  const respond = (): void => {
    if (responded) return;
    responded = true;
    sink.respond(res.status, head.headers);
  };
  const give = async (b: Buffer): Promise<void> => {
    if (b.length === 0) return;
    respond();
    if (hash) hash.update(b);
    else if (first === null) first = b;
    else {
      hash = createHash('sha256').update(first).update(b);
      first = null;
    }
    sent += b.length;
    await sink.write(b);
  };
  const digest = (): string => (hash ? hash.digest('hex') : sha256hex(first ?? EMPTY));
  let error: Refusal | null = null;
  try {
    for await (const chunk of decoding ? decodeStream(codings, counted(), o.host) : res.body) {
      if (!decoding) bytes += chunk.length;
      await give(scanner.push(chunk, bytes === declared));
      // Past the cut, one more byte only tells that the body was truncated.
      if (scanner.full && scanner.truncated) break;
    }
    await give(scanner.end());
  } catch (e) {
    error = e instanceof Refusal ? e : responseFailure(e, o.host);
  } finally {
    res.close();
  }
  if (error && !responded) throw error;
  respond();
  if (error || scanner.truncated) sink.abort();
  else sink.end();
  return {
    status: res.status,
    bytes,
    sent,
    redactions: head.redactions + scanner.count,
    truncated: scanner.truncated,
    bodySha256: digest(),
    error,
  };
}
