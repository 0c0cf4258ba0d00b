// Send the request over the pinned pool and read the response within limits
// (SPEC §6.1 steps 8–9). Redirects are never followed: a 3xx comes back with
// its Location. postern never retries. Only a request without a body leaves
// its connection to be reused.
import type { Dispatcher, Pool } from 'undici';
import { upstreamFailure } from './http-failures';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer; // up to `readLimit` bytes
  complete: boolean; // false when the body was longer than readLimit
}

export interface SendOptions {
  method: string;
  pathAndQuery: string;
  headers: Record<string, string>;
  body: Buffer | null;
  timeoutMs: number;
  readLimit: number;
}

// The pool, seen through an interceptor that notes when undici begins to
// write this request (legacy handlers hear onConnect, newer ones
// onRequestStart): the line between "not sent" and "may have executed".
function tracked(pool: Pool): { dispatcher: Dispatcher; sent: () => boolean } {
  let sent = false;
  const mark =
    (f: (...a: unknown[]) => unknown) =>
    (...a: unknown[]) => {
      sent = true;
      return f(...a);
    };
  const dispatcher = pool.compose(
    (dispatch) => (opts, handler) =>
      dispatch(
        opts,
        new Proxy(handler, {
          get(target, key) {
            const v = Reflect.get(target, key, target) as unknown;
            if (typeof v !== 'function') return v;
            const bound = (v as (...a: unknown[]) => unknown).bind(target);
            return key === 'onConnect' || key === 'onRequestStart' ? mark(bound) : bound;
          },
        }),
      ),
  );
  return { dispatcher, sent: () => sent };
}

// One deadline for a request. undici does not give up a connection that is
// still being made (a TLS handshake that stalls) when the signal fires;
// racing the deadline keeps timeout_ms a promise whatever the stage. The
// abandoned attempt ends on its own (connect timeout) and its failure is
// ignored.
interface Deadline {
  signal: AbortSignal;
  expiry: Promise<never>;
  expired(): boolean;
  restart(): void; // the same span again, from now
  clear(): void;
}

function deadline(ms: number): Deadline {
  const abort = new AbortController();
  let timedOut = false;
  let expire: () => void = () => undefined;
  const expiry = new Promise<never>((_resolve, reject) => {
    expire = () => reject(Object.assign(new Error('deadline'), { code: 'ABORT_ERR' }));
  });
  expiry.catch(() => undefined);
  const fire = (): void => {
    timedOut = true;
    abort.abort();
    expire();
  };
  const timer = setTimeout(fire, ms);
  return {
    signal: abort.signal,
    expiry,
    expired: () => timedOut,
    // The same timer rescheduled (no new one per chunk); once fired or
    // cleared it stays so.
    restart() {
      if (!timedOut) timer.refresh();
    },
    clear: () => clearTimeout(timer),
  };
}

function dispatch(via: Dispatcher, o: SendOptions, clock: Deadline): Promise<Dispatcher.ResponseData> {
  const pending = via.request({
    path: o.pathAndQuery,
    method: o.method as never,
    headers: o.headers,
    body: o.body ?? undefined,
    signal: clock.signal,
    // A connection that carried a body is closed after its response (and
    // asks the origin to close it too): an origin that misreads the body's
    // length would take the start of the next request on it, with its
    // injected secret, as part of this body (SPEC §6.2, "CL.0").
    reset: o.body !== null,
    // undici's own timers tick coarsely (~500 ms) and fire early; the
    // deadline is the only one.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  pending.catch(() => undefined);
  return Promise.race([pending, clock.expiry]);
}

// A response that has no body whatever its headers say (RFC 9110 §6.4.1):
// to HEAD, and a 204 or 304. A 304 may carry the Content-Length a 200 would
// have had (§8.6, as ASP.NET, Tornado and others send it); undici takes it
// for the body's and fails the body as a length mismatch when no byte
// follows, so such a body is drained, not read, and its failure ignored
// (undici has already closed that connection).
function bodiless(method: string, status: number): boolean {
  return method === 'HEAD' || status === 204 || status === 304;
}

function drain(res: Dispatcher.ResponseData): Promise<void> {
  return res.body.dump().then(
    () => undefined,
    () => undefined,
  );
}

export async function sendPinned(pool: Pool, host: string, o: SendOptions): Promise<RawResponse> {
  const clock = deadline(o.timeoutMs);
  const via = tracked(pool);
  try {
    const res = await dispatch(via.dispatcher, o, clock);
    const headers = res.headers as Record<string, string | string[]>;
    if (bodiless(o.method, res.statusCode)) {
      await Promise.race([drain(res), clock.expiry]);
      return { status: res.statusCode, headers, body: Buffer.alloc(0), complete: true };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let complete = true;
    const reading = (async () => {
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        if (size + b.length > o.readLimit) {
          chunks.push(b.subarray(0, o.readLimit - size));
          size = o.readLimit;
          complete = false;
          res.body.destroy();
          break;
        }
        chunks.push(b);
        size += b.length;
      }
    })();
    reading.catch(() => undefined);
    await Promise.race([reading, clock.expiry]);
    return {
      status: res.statusCode,
      headers,
      body: Buffer.concat(chunks),
      complete,
    };
  } catch (e) {
    throw upstreamFailure(e, host, clock.expired(), via.sent());
  } finally {
    clock.clear();
  }
}

export interface StreamingResponse {
  status: number;
  headers: Record<string, string | string[]>;
  // The body as it arrives; leaving the iteration early closes it.
  body: AsyncIterable<Buffer>;
  // Closes the body without reading it (a response refused on its head).
  close(): void;
  // The answer to HEAD, a 204 or a 304: no body, whatever the headers say.
  bodiless: boolean;
}

// As sendPinned, for a response passed on as it arrives (the proxy front
// door, SPEC §11): timeout_ms bounds the wait for the response head and
// then each wait for more of the body, so an event stream that keeps
// sending is not cut, and one that goes quiet for that long is. A failure
// while the body is read is the refusal sendPinned would give.
export async function sendStreaming(
  pool: Pool,
  host: string,
  o: Omit<SendOptions, 'readLimit'>,
): Promise<StreamingResponse> {
  const clock = deadline(o.timeoutMs);
  const via = tracked(pool);
  let res: Dispatcher.ResponseData;
  try {
    res = await dispatch(via.dispatcher, { ...o, readLimit: 0 }, clock);
  } catch (e) {
    clock.clear();
    throw upstreamFailure(e, host, clock.expired(), via.sent());
  }
  // Closing the body early makes undici emit an abort error; unheard, it
  // would end the process. Failures while reading reach the iterator.
  res.body.on('error', () => undefined);
  const empty = bodiless(o.method, res.statusCode);
  // The deadline is restarted for each chunk; when it fires, its signal
  // aborts the request and undici destroys the body, which ends the loop
  // with the abort (no race per chunk against the expiry, whose reactions
  // would pile up over a long stream).
  async function* body(): AsyncGenerator<Buffer> {
    if (empty) {
      clock.clear();
      await drain(res);
      return;
    }
    try {
      clock.restart();
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        yield chunk;
        clock.restart();
      }
    } catch (e) {
      throw upstreamFailure(e, host, clock.expired(), true);
    } finally {
      clock.clear();
      res.body.destroy();
    }
  }
  return {
    status: res.statusCode,
    headers: res.headers as Record<string, string | string[]>,
    body: body(),
    close() {
      clock.clear();
      res.body.destroy();
    },
    bodiless: empty,
  };
}
