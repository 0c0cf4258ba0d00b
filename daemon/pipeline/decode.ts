// Undo a Content-Encoding the upstream applied although postern asked for
// `identity` (SPEC §6.1 step 9), and a Transfer-Encoding other than chunked
// (which undici undoes; SPEC §6.2): redaction must see the bytes the agent
// will see. Decompression is capped, so a small bomb cannot become a large
// allocation; a body that decompresses beyond the cap is truncated.
import zlib from 'node:zlib';
import { Readable, pipeline } from 'node:stream';
import { Refusal } from '../../shared/errors';

export interface Decoded {
  data: Buffer;
  complete: boolean; // false when the limit cut the output (or the input was already cut)
  decoded: boolean; // true when a coding was removed
}

export type Coding = 'gzip' | 'deflate' | 'br';

// A Map, not an object: the upstream names the coding, and a name such as
// "constructor" or "__proto__" would be found on an object's prototype.
const CODINGS = new Map<string, Coding | null>([
  ['identity', null],
  ['gzip', 'gzip'],
  ['x-gzip', 'gzip'],
  ['deflate', 'deflate'],
  ['br', 'br'],
]);

// "gzip, br" means gzip was applied first: undo br, then gzip. Unknown
// codings are refused by name: what postern cannot read it cannot redact.
export function parseContentEncoding(value: string | string[] | undefined, host: string): Coding[] {
  if (value === undefined) return [];
  const text = Array.isArray(value) ? value.join(',') : value;
  const out: Coding[] = [];
  for (const part of text.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '') continue;
    if (!CODINGS.has(name)) {
      // The name is not quoted: the upstream chose it, and it could be the secret.
      throw new Refusal(
        'upstream_error',
        `${host} answered with a content-encoding postern cannot decode (it decodes gzip, deflate and br), so the body cannot be checked for the secret; the request was executed — do not repeat it blindly`,
        { maybe_executed: true },
      );
    }
    const c = CODINGS.get(name);
    if (c) out.push(c);
  }
  return out.reverse();
}

// "gzip, chunked": the body was gzipped, then chunked; undici removes the
// chunking, the rest is undone here, last applied first. Anything postern
// cannot undo is refused, as is "chunked" anywhere but last (RFC 9112: then
// the message is not chunked at all, and its framing cannot be trusted).
export function parseTransferEncoding(value: string | string[] | undefined, host: string): Coding[] {
  if (value === undefined) return [];
  const names = (Array.isArray(value) ? value.join(',') : value)
    .split(',')
    .map((p) => p.trim().toLowerCase())
    .filter((p) => p !== '');
  const out: Coding[] = [];
  names.forEach((name, i) => {
    if (name === 'chunked' && i === names.length - 1) return;
    const c = CODINGS.get(name);
    if (name === 'chunked' || c === undefined) {
      throw new Refusal(
        'upstream_error',
        `${host} answered with a transfer-encoding postern cannot undo (it undoes gzip, deflate and br, then chunked last), so the body cannot be checked for the secret; the request was executed — do not repeat it blindly`,
        { maybe_executed: true },
      );
    }
    if (c) out.push(c);
  });
  return out.reverse();
}

// zlib-wrapped deflate starts with a header whose check bits hold; some
// servers send raw deflate under the same name.
function isZlibWrapped(b: Buffer): boolean {
  return b.length >= 2 && ((b[0] as number) & 0x0f) === 8 && (((b[0] as number) << 8) | (b[1] as number)) % 31 === 0;
}

function decompressor(
  coding: Coding,
  input: Buffer,
  inputComplete: boolean,
): zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress {
  // Input cut by the read limit ends mid-stream: flush what it holds rather
  // than failing.
  const flush = inputComplete ? undefined : zlib.constants.Z_SYNC_FLUSH;
  switch (coding) {
    case 'gzip':
      return zlib.createGunzip(flush === undefined ? {} : { finishFlush: flush });
    case 'deflate':
      return isZlibWrapped(input)
        ? zlib.createInflate(flush === undefined ? {} : { finishFlush: flush })
        : zlib.createInflateRaw(flush === undefined ? {} : { finishFlush: flush });
    case 'br':
      return zlib.createBrotliDecompress(inputComplete ? {} : { finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
  }
}

function undecodable(host: string, coding: Coding): Refusal {
  return new Refusal(
    'upstream_error',
    `${host} sent a ${coding} body that does not decode; the request was executed — do not repeat it blindly`,
    { maybe_executed: true },
  );
}

function decodeOne(
  coding: Coding,
  input: Buffer,
  inputComplete: boolean,
  limit: number,
  host: string,
): Promise<{ data: Buffer; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const z = decompressor(coding, input, inputComplete);
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (complete: boolean): void => {
      if (done) return;
      done = true;
      resolve({ data: Buffer.concat(chunks), complete });
    };
    z.on('data', (c: Buffer) => {
      if (done) return;
      if (size + c.length > limit) {
        chunks.push(c.subarray(0, limit - size));
        size = limit;
        finish(false);
        z.destroy();
        return;
      }
      chunks.push(c);
      size += c.length;
    });
    z.on('end', () => finish(inputComplete));
    z.on('error', () => {
      if (done) return;
      done = true;
      reject(undecodable(host, coding));
    });
    z.end(input);
  });
}

export async function decodeBody(
  codings: Coding[],
  body: Buffer,
  complete: boolean,
  limit: number,
  host: string,
): Promise<Decoded> {
  // Nothing to undo: a bodiless answer (HEAD, 204, 304, a length of 0)
  // names the coding of a body it does not carry, and zlib fails on no input.
  if (body.length === 0) return { data: body, complete, decoded: codings.length > 0 };
  let data = body;
  let whole = complete;
  for (const c of codings) {
    const r = await decodeOne(c, data, whole, limit, host);
    data = r.data;
    whole = r.complete;
  }
  return { data, complete: whole, decoded: codings.length > 0 };
}

// The same undoing for a body passed on as it arrives (the proxy front
// door): each coding a zlib stream, so what decodes goes out at once (an
// upstream that flushes its compressor per event streams). No limit here:
// the reader stops when it has enough, which closes every stage.
export function decodeStream(codings: Coding[], source: AsyncIterable<Buffer>, host: string): AsyncIterable<Buffer> {
  let out = source;
  for (const c of codings) out = decodeStage(c, out, host);
  return out;
}

async function* decodeStage(coding: Coding, source: AsyncIterable<Buffer>, host: string): AsyncGenerator<Buffer> {
  const it = source[Symbol.asyncIterator]();
  // Deflate's two forms are told apart by the first two bytes.
  const head: Buffer[] = [];
  let size = 0;
  let ended = false;
  while (size < 2) {
    const n = await it.next();
    if (n.done) {
      ended = true;
      break;
    }
    head.push(n.value);
    size += n.value.length;
  }
  if (size === 0) return;
  const first = Buffer.concat(head);
  async function* all(): AsyncGenerator<Buffer> {
    yield first;
    if (ended) return;
    for (let n = await it.next(); !n.done; n = await it.next()) yield n.value;
  }
  const z = pipeline(Readable.from(all()), decompressor(coding, first, true), () => undefined);
  try {
    for await (const chunk of z) yield chunk as Buffer;
  } catch (e) {
    // A failure of the upstream is already its refusal; anything else is
    // the decompressor's: the body does not decode.
    throw e instanceof Refusal ? e : undecodable(host, coding);
  } finally {
    z.destroy();
    await it.return?.();
  }
}
