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

export async function sendPinned(pool: Pool, host: string, o: SendOptions): Promise<RawResponse> {
  const abort = new AbortController();
  let timedOut = false;
  // undici does not give up a connection that is still being made (a TLS
  // handshake that stalls) when the signal fires; racing the deadline keeps
  // timeout_ms a promise whatever the stage. The abandoned attempt ends on
  // its own (connect timeout) and its failure is ignored.
  let expire: () => void = () => undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    expire = () => reject(Object.assign(new Error('deadline'), { code: 'ABORT_ERR' }));
  });
  deadline.catch(() => undefined);
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
    expire();
  }, o.timeoutMs);
  const via = tracked(pool);
  try {
    const pending = via.dispatcher.request({
      path: o.pathAndQuery,
      method: o.method as never,
      headers: o.headers,
      body: o.body ?? undefined,
      signal: abort.signal,
      // A connection that carried a body is closed after its response (and
      // asks the origin to close it too): an origin that misreads the body's
      // length would take the start of the next request on it, with its
      // injected secret, as part of this body (SPEC §6.2, "CL.0").
      reset: o.body !== null,
      // undici's own timers tick coarsely (~500 ms) and fire early; the
      // timer above is the only deadline.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    pending.catch(() => undefined);
    const res = await Promise.race([pending, deadline]);
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
    await Promise.race([reading, deadline]);
    return {
      status: res.statusCode,
      headers: res.headers as Record<string, string | string[]>,
      body: Buffer.concat(chunks),
      complete,
    };
  } catch (e) {
    throw upstreamFailure(e, host, timedOut, via.sent());
  } finally {
    clearTimeout(timer);
  }
}
