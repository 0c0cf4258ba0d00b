// A response streamed to a proxy client (SPEC §11, §6.4): a real HTTPS
// upstream, the real pinned pool and streaming send, and the streaming
// shaper into a sink that records what it is given. Every coding the
// redactor's decoder undoes (gzip, x-gzip, zlib and raw deflate, br, a
// transfer coding), written in random pieces; the body equals what the
// whole-body redactor makes of it, cut at the cap and flagged; Set-Cookie
// and the framing headers are dropped and headers redacted; an event stream
// gets its first event to the client before the upstream sends the second;
// undecodable codings are refused before the head and a broken body is
// aborted; and no form of the secret reaches the client.
import t from 'tap';
import zlib from 'node:zlib';
import { createHash, randomBytes } from 'node:crypto';
import http, { type ServerResponse } from 'node:http';
import { Refusal } from '../../shared/errors';
import { PinnedPools } from '../../daemon/stores/pinned-pools';
import { sendStreaming } from '../../daemon/pipeline/execute-http';
import { streamResponse, type ResponseSink, type StreamLimits } from '../../daemon/pipeline/stream-response';
import { buildRedactor, redact } from '../../daemon/pipeline/redact';
import { makeTestCa, startHttpsUpstream, type Handler } from '../helpers/https-upstream';
import { canaryForms, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const HOST = 'api.stream.test';
const SECRET = makeCanary('STREAM');
const ca = makeTestCa([HOST]);
t.teardown(() => ca.cleanup());
const pools = new PinnedPools(() => Buffer.from(ca.caCert));
t.teardown(() => pools.closeAll());

let handler: Handler = (_req, _body, res) => void res.end();
const upstreamReady = startHttpsUpstream(ca, (req, body, res) => handler(req, body, res));

class RecordingSink implements ResponseSink {
  head: { status: number; headers: Record<string, string | string[]> } | null = null;
  chunks: Buffer[] = [];
  ended = false;
  aborted = false;
  private waiters: { text: string; resolve: () => void }[] = [];
  respond(status: number, headers: Record<string, string | string[]>): void {
    this.head = { status, headers };
  }
  write(chunk: Buffer): void {
    this.chunks.push(Buffer.from(chunk));
    const all = this.body().toString('latin1');
    this.waiters = this.waiters.filter((w) => (all.includes(w.text) ? (w.resolve(), false) : true));
  }
  end(): void {
    this.ended = true;
  }
  abort(): void {
    this.aborted = true;
  }
  body(): Buffer {
    return Buffer.concat(this.chunks);
  }
  // Resolves once the client has been given `text`; rejects after `ms`.
  received(text: string, ms = 5000): Promise<void> {
    if (this.body().toString('latin1').includes(text)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the client was not given ${JSON.stringify(text)}`)), ms);
      this.waiters.push({ text, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
}

function redactorFor(): ReturnType<typeof buildRedactor> {
  return buildRedactor([Buffer.from(SECRET), Buffer.from(`Bearer ${SECRET}`)], 'api');
}

async function fetchStreamed(limits: Partial<StreamLimits> = {}, sink = new RecordingSink(), method = 'GET') {
  const up = await upstreamReady;
  const pool = pools.get({
    credential: 'api',
    requester: 'test',
    origin: `https://${HOST}:${up.port}`,
    address: '127.0.0.1',
    family: 4,
  });
  const res = await sendStreaming(pool, HOST, {
    method,
    pathAndQuery: '/',
    headers: { host: `${HOST}:${up.port}`, 'accept-encoding': 'identity' },
    body: null,
    timeoutMs: 10_000,
  });
  const options: StreamLimits = { passSetCookie: false, redactor: redactorFor(), cap: 1 << 20, host: HOST, ...limits };
  const streamed = streamResponse(res, options, sink);
  return { sink, streamed };
}

// Writes `data` in random pieces, each flushed through the coder.
async function writeInPieces(res: ServerResponse, coder: zlib.Gzip | zlib.Deflate | null, data: Buffer): Promise<void> {
  const out = coder ?? res;
  if (coder) coder.pipe(res);
  for (let i = 0; i < data.length;) {
    const n = 1 + Math.floor(Math.random() * 700);
    out.write(data.subarray(i, i + n));
    if (coder) await new Promise<void>((r) => coder.flush(() => r()));
    await new Promise((r) => setImmediate(r));
    i += n;
  }
  out.end();
}

// A body with the secret in several forms, some near each piece boundary.
function bodyWithSecret(size: number): Buffer {
  const b = Buffer.from(SECRET);
  const forms = [
    SECRET,
    b.toString('base64'),
    b.toString('hex'),
    encodeURIComponent(`Bearer ${SECRET}`),
    `"\\u00${b[0]!.toString(16)}${SECRET.slice(1)}"`,
  ];
  const parts: string[] = [];
  let length = 0;
  for (let k = 0; length < size; k++) {
    const filler = randomBytes(40 + Math.floor(Math.random() * 300)).toString('base64url');
    const p = `${filler} ${forms[k % forms.length]} `;
    parts.push(p);
    length += p.length;
  }
  return Buffer.from(parts.join(''));
}

const CODERS: [string, string[], () => zlib.Gzip | zlib.Deflate | zlib.BrotliCompress | null][] = [
  ['identity', [], () => null],
  ['gzip', ['content-encoding', 'gzip'], () => zlib.createGzip()],
  ['x-gzip', ['content-encoding', 'x-gzip'], () => zlib.createGzip()],
  ['deflate (zlib)', ['content-encoding', 'deflate'], () => zlib.createDeflate()],
  ['deflate (raw)', ['content-encoding', 'deflate'], () => zlib.createDeflateRaw()],
  ['br', ['content-encoding', 'br'], () => zlib.createBrotliCompress()],
  ['transfer-encoding gzip', ['transfer-encoding', 'gzip, chunked'], () => zlib.createGzip()],
];

t.test('every coding: decoded, redacted as the whole body would be, cut at the cap', async (t) => {
  const data = bodyWithSecret(40_000);
  for (const [name, header, coder] of CODERS) {
    for (const cap of [1 << 20, 12_345]) {
      handler = (_req, _body, res) => {
        const headers: Record<string, string> = { 'content-type': 'text/plain', 'set-cookie': 'session=1' };
        if (header.length > 0) headers[header[0]!] = header[1]!;
        res.writeHead(200, headers);
        void writeInPieces(res, coder() as zlib.Gzip | null, data);
      };
      const { sink, streamed } = await fetchStreamed({ cap });
      const out = await streamed;
      const whole = redact(redactorFor(), data, cap);
      const label = `${name}, cap ${cap}`;
      t.equal(out.error, null, `${label}: no error`);
      t.ok(sink.body().equals(whole.data), `${label}: the body is the whole-body redaction`);
      t.equal(out.redactions, whole.count, `${label}: ${whole.count} replacements counted`);
      t.equal(out.truncated, whole.cut, `${label}: truncated ${whole.cut}`);
      t.equal(out.sent, sink.body().length, `${label}: bytes sent`);
      t.equal(
        out.bodySha256,
        createHash('sha256').update(sink.body()).digest('hex'),
        `${label}: hash of what was sent`,
      );
      // A cut body is closed unfinished, so the client cannot take it as whole.
      if (whole.cut) t.ok(sink.aborted && !sink.ended, `${label}: cut, the message is closed unfinished`);
      else t.ok(sink.ended && !sink.aborted, `${label}: the message is ended`);
      t.same(exposures(sink.body(), SECRET), [], `${label}: no form of the secret reaches the client`);
      t.same(
        canaryForms(SECRET).filter((f) => sink.body().toString('latin1').includes(f)),
        [],
        `${label}: no canary form`,
      );
      const h = sink.head!.headers;
      t.equal(h['set-cookie'], undefined, `${label}: Set-Cookie dropped`);
      t.equal(h['content-encoding'], undefined, `${label}: no content-encoding`);
      t.equal(h['transfer-encoding'], undefined, `${label}: no transfer-encoding`);
      t.equal(h['content-length'], undefined, `${label}: no content-length`);
    }
  }
});

t.test('server-sent events through gzip: the first event reaches the client before the second is sent', async (t) => {
  const first = 'event: delta\ndata: {"text":"hel"}\n\n';
  const second = `event: delta\ndata: {"text":"${SECRET}"}\n\n`;
  // Settled by the client's side once it has the first event, or not in 5 s.
  let clientHasFirst: (ok: boolean) => void = () => undefined;
  const sawFirst = new Promise<boolean>((resolve) => {
    clientHasFirst = resolve;
    setTimeout(() => resolve(false), 5000).unref();
  });
  const order: string[] = [];
  handler = async (_req, _body, res) => {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'content-encoding': 'gzip',
      'x-echo': `Bearer ${SECRET}`,
      'set-cookie': 'a=b',
    });
    const gz = zlib.createGzip();
    gz.pipe(res);
    gz.write(first);
    gz.flush();
    order.push((await sawFirst) ? 'client had the first event' : 'the first event did not reach the client');
    gz.write(second);
    gz.end();
  };
  const { sink, streamed } = await fetchStreamed({ passSetCookie: true });
  sink.received(first).then(
    () => clientHasFirst(true),
    () => clientHasFirst(false),
  );
  const out = await streamed;
  t.same(order, ['client had the first event']);
  t.equal(sink.body().toString(), `${first}event: delta\ndata: {"text":"[REDACTED:api]"}\n\n`);
  t.equal(sink.head!.headers['x-echo'], '[REDACTED:api]', 'a header is redacted (the whole injected value)');
  t.equal(sink.head!.headers['set-cookie'], 'a=b', 'Set-Cookie passed when the credential passes it');
  t.equal(out.redactions, 2);
  t.equal(out.truncated, false);
});

t.test('a coding postern cannot undo is refused before anything is passed on', async (t) => {
  for (const [header, value] of [
    ['content-encoding', 'zstd'],
    ['transfer-encoding', 'compress, chunked'],
  ] as const) {
    handler = (_req, _body, res) => {
      res.writeHead(200, { [header]: value });
      res.end(header === 'transfer-encoding' ? '1\r\nx\r\n0\r\n\r\n' : 'x');
    };
    const { sink, streamed } = await fetchStreamed();
    const e = await streamed.then(
      () => null,
      (err: unknown) => err,
    );
    t.ok(e instanceof Refusal && e.code === 'upstream_error', `${header}: ${value} refused as upstream_error`);
    t.equal(sink.head, null, `${header}: no head was passed on`);
  }
});

t.test('a body that does not decode from its first byte is refused whole: no head passed on', async (t) => {
  handler = (_req, _body, res) => {
    res.writeHead(200, { 'content-encoding': 'gzip' });
    res.end(Buffer.from('this is not gzip at all, not even close'));
  };
  const { sink, streamed } = await fetchStreamed();
  const e = await streamed.then(
    () => null,
    (err: unknown) => err,
  );
  t.ok(e instanceof Refusal && e.code === 'upstream_error', 'refused as upstream_error');
  t.equal(sink.head, null, 'no head was passed on');
});

t.test(
  'a body that stops decoding after some of it was passed on is aborted, the outcome holds the error',
  async (t) => {
    // A gzip stream flushed after its first part, then a reserved block type.
    const first = zlib.gzipSync(Buffer.from('the first part decodes\n'.repeat(50)), {
      finishFlush: zlib.constants.Z_SYNC_FLUSH,
    });
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip' });
      res.write(first);
      setTimeout(() => res.end(Buffer.alloc(64, 0xff)), 20);
    };
    const { sink, streamed } = await fetchStreamed();
    const out = await streamed;
    t.equal(out.error?.code, 'upstream_error');
    t.ok(sink.head !== null && sink.aborted && !sink.ended, 'head sent, message aborted');
  },
);

t.test('a body of declared length: its last piece decided at once, redacted as the whole body would be', async (t) => {
  // The secret straddles every write boundary, the last one included; the
  // upstream's `connection` names a header of its own, which goes too.
  const at = [SECRET.slice(0, 9), SECRET.slice(9)];
  const pieces = [`head ${at[0]}`, `${at[1]} middle ${at[0]}`, `${at[1]} tail`].map((p) => Buffer.from(p));
  const data = Buffer.concat(pieces);
  handler = (_req, _body, res) => {
    res.writeHead(200, {
      'content-length': data.length,
      connection: 'keep-alive, X-Hop',
      'x-hop': 'for the next hop only',
      'x-kept': 'yes',
    });
    void (async () => {
      for (const p of pieces) {
        res.write(p);
        await new Promise((r) => setTimeout(r, 5));
      }
      res.end();
    })();
  };
  const { sink, streamed } = await fetchStreamed();
  const out = await streamed;
  const whole = redact(redactorFor(), data, 1 << 20);
  t.equal(out.error, null);
  t.ok(sink.body().equals(whole.data), 'the body is the whole-body redaction');
  t.equal(out.redactions, 2);
  t.equal(out.bytes, data.length);
  t.ok(sink.ended && !sink.aborted, 'the message is ended');
  t.same(exposures(sink.body(), SECRET), []);
  t.equal(sink.head!.headers['x-hop'], undefined, "a header the upstream's connection names is dropped");
  t.equal(sink.head!.headers['x-kept'], 'yes', 'an end-to-end header is kept');
  t.equal(sink.head!.headers['connection'], undefined);
});

t.test('bytes beyond the declared length are never scanned apart: the message is aborted', async (t) => {
  // undici reads no byte beyond content-length; a source that did would
  // split an occurrence across the "last" piece and the next.
  const first = Buffer.from(`ok ${SECRET.slice(0, 9)}`);
  const res = {
    status: 200,
    headers: { 'content-length': String(first.length) },
    body: (async function* () {
      yield first;
      yield Buffer.from(SECRET.slice(9));
    })(),
    close: () => undefined,
    bodiless: false,
  };
  const sink = new RecordingSink();
  const out = await streamResponse(
    res,
    { passSetCookie: false, redactor: redactorFor(), cap: 1 << 20, host: HOST },
    sink,
  );
  t.equal(out.error?.code, 'upstream_error');
  t.ok(sink.aborted && !sink.ended, 'aborted, not ended');
  t.notOk(sink.body().toString('latin1').includes(SECRET.slice(9)), 'the rest of the occurrence never goes out');
});

t.test("an upstream's x-postern-error is not passed on: only postern's refusals carry it", async (t) => {
  handler = (_req, _body, res) => {
    res.writeHead(403, { 'X-Postern-Error': 'denied_policy', 'content-type': 'application/json', 'x-kept': 'yes' });
    res.end('{"error":{"code":"denied_policy","message":"forged by the upstream","audit_seq":1}}');
  };
  const { sink, streamed } = await fetchStreamed();
  const out = await streamed;
  t.equal(out.error, null);
  t.equal(sink.head?.status, 403, "the upstream's status, as it is");
  t.equal(sink.head?.headers['x-postern-error'], undefined, 'no x-postern-error');
  t.equal(sink.head?.headers['x-kept'], 'yes', 'other headers kept');
});

t.test('no body after HEAD, a 204 or a 304: the length a GET would get is passed on where it can be', async (t) => {
  const rows: { method: string; status: number; headers: Record<string, string>; length: string | undefined }[] = [
    { method: 'GET', status: 304, headers: { 'content-length': '1234', etag: '"a"' }, length: '1234' },
    { method: 'GET', status: 304, headers: { etag: '"a"' }, length: undefined },
    { method: 'GET', status: 204, headers: { 'content-length': '0' }, length: undefined },
    { method: 'HEAD', status: 200, headers: { 'content-length': '1234' }, length: '1234' },
    // A GET would come back decoded, of a length not known in advance.
    {
      method: 'HEAD',
      status: 200,
      headers: { 'content-length': '1234', 'content-encoding': 'gzip' },
      length: undefined,
    },
  ];
  for (const row of rows) {
    handler = (_req, _body, res) => {
      res.writeHead(row.status, row.headers);
      res.end();
    };
    const { sink, streamed } = await fetchStreamed({}, new RecordingSink(), row.method);
    const out = await streamed;
    const what = `${row.method} ${row.status} ${JSON.stringify(row.headers)}`;
    t.equal(out.error, null, `${what}: no error`);
    t.equal(sink.head?.status, row.status, `${what}: the status`);
    t.equal(
      sink.head?.headers['content-length'],
      row.length,
      `${what}: content-length ${row.length ?? 'not passed on'}`,
    );
    t.equal(sink.head?.headers['content-encoding'], undefined, `${what}: no content-encoding`);
    t.equal(sink.body().length, 0, `${what}: no body`);
    t.ok(sink.ended && !sink.aborted, `${what}: ended`);
  }
});

t.teardown(async () => (await upstreamReady).close());

t.test('header names are written as tokens: a mark in a name becomes redacted-<credential>', async (t) => {
  const hex = Buffer.from(SECRET).toString('hex');
  handler = (_req, _body, res) => {
    // A name echoing the secret (as hex, since a name is a token), and one
    // that is already what the first becomes once redacted.
    res.setHeader(`x-name-${hex}`, 'one');
    res.setHeader('x-name-redacted-api', 'two');
    res.setHeader('x-value', `Bearer ${SECRET}`);
    res.end('ok');
  };
  const { sink, streamed } = await fetchStreamed();
  const out = await streamed;
  t.equal(out.error, null);
  const headers = sink.head?.headers ?? {};
  for (const name of Object.keys(headers)) {
    t.doesNotThrow(() => http.validateHeaderName(name), `${name}: a valid header name`);
    t.notOk(name.toLowerCase().includes(hex), `${name}: no hex of the secret`);
  }
  t.same(headers['x-name-redacted-api'], ['one', 'two'], 'both values, under the one token name');
  t.equal(headers['x-value'], '[REDACTED:api]', 'a value keeps the mark as it is');
  t.equal(out.redactions, 2, 'the name and the value, each counted');
});

t.test('a failure once the head is out names its code, not "see the log"', async (t) => {
  // The client's side fails as Node's streams do when written after they
  // were destroyed.
  handler = (_req, _body, res) => {
    res.end('a body');
  };
  class GoneSink extends RecordingSink {
    override write(): void {
      throw Object.assign(new Error(`write after a destroy, with ${SECRET} in its message`), {
        code: 'ERR_STREAM_DESTROYED',
      });
    }
  }
  const { sink, streamed } = await fetchStreamed({}, new GoneSink());
  const out = await streamed;
  t.ok(sink.head !== null && sink.aborted, 'head sent, message aborted');
  t.equal(out.error?.code, 'upstream_error');
  t.equal(
    out.error?.message,
    'the response from api.stream.test could not be passed on (ERR_STREAM_DESTROYED); the request reached api.stream.test — check before retrying',
    "the error's code, never its message",
  );
  t.equal(out.error?.detail?.['maybe_executed'], true);
});
