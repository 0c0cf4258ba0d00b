// Hostile upstream framing through the proxy front door (SPEC §11 with
// §6.2 and §6.4), where the response is streamed to the client and the front
// door frames it itself: a raw TLS origin writes responses whose lengths,
// framing and codings lie, and a real client under `postern run` reads them
// on ONE kept-alive connection with a strict HTTP/1.1 parser of its own
// (KEPT_ALIVE_PROXY_CLIENT), then waits 150 ms for anything beyond each
// message's end. A response that bled into the next one would show there: as
// stray bytes, as a forged response ({"tag":"FORGED"}, X-Tag: FORGED), or as
// another request's tag (every request carries a unique x-tag, every
// response of the origin names it). After each hostile row an ordinary GET
// must get its own response, on the same client connection whenever that
// connection is still open. The rows: a Content-Length that ends before what
// is sent, a forged response after it at once or 50 ms later; one longer than
// what comes before the close; 204, 304 and HEAD with a length and bytes
// anyway; Content-Length beside chunked, two Content-Lengths, a space before
// the colon, a negative and a non-decimal one, an obs-fold line hiding a
// second Content-Length; a forged response after the last chunk, chunk
// extensions, a chunk size "zz" after the head went out, the injected
// "Bearer <secret>" as a trailer; an unasked 100, a 103 with a Link, an
// unasked 101; HTTP/1.0 and Connection: close without a length; transfer
// codings gzip (the secret echoed inside: decoded and redacted), zstd, and a
// 64 MiB gzip bomb (cut at max_response_body). The list runs once on one
// client, once on three clients at once (separate `postern run`s, one
// credential, so one pool of upstream connections), and once more as a race:
// the late forgery forty times while six clients keep the pool busy with
// ordinary GETs. The origin checks that each request reached it once, and
// that no request arrived on an upstream connection after bytes that ran
// past a message or could not be framed. Last, the secret in no form in any
// byte a client received, the daemon log or the journal; a second credential
// with redact_response = false shows the search finds the echo.
//
// Where either answer is defensible, the rows assert what was observed and
// what a careful user needs (no desync, no forgery, no secret): a body-less
// status or HEAD with bytes after it passes without them (undici closes the
// upstream connection on the bytes); every length no parser may read one way
// (CL with TE, two CLs, "Content-Length :", -1, 0x10, obs-fold) is a refusal
// before the head, 502 upstream_error; an unasked 100 Continue is refused the
// same way (undici takes it for a broken response and closes: neither passed
// on nor skipped), as is an unasked 101; a 103 is dropped, and no interim
// response reaches the client; a body ended by the close is re-framed
// chunked and the client's connection stays open; a message that breaks
// after its head (a bad chunk size, a length longer than the bytes, the bomb
// at the cap) reaches the client as the head and the bytes so far, then the
// connection closes without the last chunk. The bomb's upstream connection
// may be reused: its 65 KB message is framed whole and undici reads it to
// its end, only decoding stops.
//
// The late forgery found a bug, fixed with this suite: when a request went
// out on the pooled upstream connection in the moment before the forged
// response arrived, the forgery became that request's answer, and the
// connection stayed one response behind: every request after it on that
// connection got the answer to the one before, another client's (another
// `postern run`'s), until it went idle. One client alone never meets it (it
// waits 150 ms, and undici closes a connection that receives bytes while
// idle); three clients at once met it in some runs; the race, forty
// forgeries beside six busy clients, in every run (106 failed assertions).
// Pools are now per requester (daemon/stores/pinned-pools.ts): a broken
// upstream can still confuse the answers of the run that keeps using it,
// never hand them to another.
import t, { type Test } from 'tap';
import zlib from 'node:zlib';
import { startStack, type Stack } from '../helpers/stack';
import { cli } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import {
  chunked,
  header,
  rawResponse,
  startRawOrigin,
  type RawOrigin,
  type RawRoute,
  type RouteAnswer,
} from '../helpers/raw-origin';
import { sendKeptAlive, type KeptAliveAnswer, type KeptAliveRequest } from '../helpers/proxy-raw-client';

const HOST = 'api.example.test';
const CAP = 64 * 1024;
const MARK = '[REDACTED:hostile]';
const LATER_MS = 50;
const BOMB = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });

// Every body names the request it answers; the origin's forgeries name none.
const json = (o: unknown): Buffer => Buffer.from(JSON.stringify(o) + '\n');
const ownBody = (tag: string): Buffer => json({ tag });
const echoBody = (tag: string, injected: string): Buffer => json({ tag, 'you sent': injected });
const FORGED_BODY = json({ tag: 'FORGED' });
const FORGED = rawResponse(
  200,
  [
    ['Content-Type', 'application/json'],
    ['X-Tag', 'FORGED'],
    ['Content-Length', String(FORGED_BODY.length)],
  ],
  FORGED_BODY,
);

type Fields = [string, string][];
const tagged = (tag: string, more: Fields = []): Fields => [
  ['Content-Type', 'application/json'],
  ['X-Tag', tag],
  ...more,
];
const length = (b: Buffer): [string, string] => ['Content-Length', String(b.length)];
const cat = (...parts: (Buffer | string)[]): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : p)));
// A head written as given: a status line rawResponse does not write.
const rawHead = (statusLine: string, fields: Fields): string =>
  `${statusLine}\r\n${fields.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;

// The ordinary answer to a request: its tag, its declared length.
function own(tag: string): Buffer {
  const body = ownBody(tag);
  return rawResponse(200, tagged(tag, [length(body)]), body);
}

// What the origin writes for a row: `now` at once, `later` LATER_MS after.
interface Reply {
  now: Buffer;
  later?: Buffer;
  close?: boolean;
}

type Expect =
  // The response to this request: the status, and the body (its own JSON, the
  // echo with the injected value replaced by the mark, or none at all).
  | { kind: 'own'; status: number; body: 'own' | 'none' | 'redacted' }
  // postern's refusal before any head: 502, x-postern-error, the JSON code.
  | { kind: 'refused'; code: 'upstream_error' }
  // The head went out, then the message was closed unfinished.
  | { kind: 'cut'; body: 'own-prefix' | 'cap-zeros' };

interface Row {
  name: string; // its path is /h/<name>
  method?: 'HEAD';
  reply(tag: string, injected: string): Reply;
  expect: Expect;
  // It writes bytes past its message's end, or a message no parser can frame
  // to its end: its connection must carry no request after them.
  poisons: boolean;
}

const OWN: Expect = { kind: 'own', status: 200, body: 'own' };
const REFUSED: Expect = { kind: 'refused', code: 'upstream_error' };

const ROWS: Row[] = [
  // 1. A Content-Length that ends before what is sent: a whole forged
  // response follows, in the same write or 50 ms later.
  { name: 'cl-short', reply: (tag) => ({ now: cat(own(tag), FORGED) }), expect: OWN, poisons: true },
  { name: 'cl-short-later', reply: (tag) => ({ now: own(tag), later: FORGED }), expect: OWN, poisons: true },
  // ... and one that promises more than comes before the close.
  {
    name: 'cl-long-close',
    reply: (tag) => {
      const body = ownBody(tag);
      return {
        now: rawResponse(200, tagged(tag, [['Content-Length', String(body.length + 32)]]), body),
        close: true,
      };
    },
    expect: { kind: 'cut', body: 'own-prefix' },
    poisons: true,
  },
  // 2. Statuses that never have a body, with a length and one anyway.
  {
    name: '204-body',
    reply: (tag) => ({ now: rawResponse(204, tagged(tag, [length(FORGED)]), FORGED) }),
    expect: { kind: 'own', status: 204, body: 'none' },
    poisons: true,
  },
  {
    name: '304-body',
    reply: (tag) => ({ now: rawResponse(304, tagged(tag, [['ETag', '"v1"'], length(FORGED)]), FORGED) }),
    expect: { kind: 'own', status: 304, body: 'none' },
    poisons: true,
  },
  // 3. A HEAD answered with its length and the bytes anyway.
  {
    name: 'head-body',
    method: 'HEAD',
    reply: (tag) => ({ now: rawResponse(200, tagged(tag, [length(FORGED)]), FORGED) }),
    expect: { kind: 'own', status: 200, body: 'none' },
    poisons: true,
  },
  // 4. Lengths no parser may pick one reading of.
  {
    // Chunked, the forged response after the last chunk; the length covers
    // it all, so a parser that believed it would pass the forgery on as body.
    name: 'cl-and-te',
    reply: (tag) => {
      const body = cat(chunked(ownBody(tag), [7]), FORGED);
      return { now: rawResponse(200, tagged(tag, [['Transfer-Encoding', 'chunked'], length(body)]), body) };
    },
    expect: REFUSED,
    poisons: true,
  },
  {
    name: 'two-cl',
    reply: (tag) => {
      const body = ownBody(tag);
      const both = cat(body, FORGED);
      return { now: rawResponse(200, tagged(tag, [length(body), length(both)]), both) };
    },
    expect: REFUSED,
    poisons: true,
  },
  {
    name: 'cl-space',
    reply: (tag) => {
      const body = ownBody(tag);
      return { now: rawResponse(200, tagged(tag, [['Content-Length ', String(body.length)]]), cat(body, FORGED)) };
    },
    expect: REFUSED,
    poisons: true,
  },
  {
    name: 'cl-negative',
    reply: (tag) => ({ now: rawResponse(200, tagged(tag, [['Content-Length', '-1']]), cat(ownBody(tag), FORGED)) }),
    expect: REFUSED,
    poisons: true,
  },
  {
    name: 'cl-not-a-number',
    reply: (tag) => ({
      now: rawResponse(200, tagged(tag, [['Content-Length', '0x10']]), cat(ownBody(tag), FORGED)),
    }),
    expect: REFUSED,
    poisons: true,
  },
  {
    // A continuation line that a parser not folding would read as a second
    // Content-Length, of 0: the body would then be the next response.
    name: 'obs-fold',
    reply: (tag) => {
      const body = ownBody(tag);
      return { now: rawResponse(200, tagged(tag, [length(body), ['X-Folded', 'first\r\n Content-Length: 0']]), body) };
    },
    expect: REFUSED,
    poisons: true,
  },
  // 5. Chunked: a forged response after the last chunk; extensions; a size
  // that is not hex once the head is out; the secret in a trailer.
  {
    name: 'chunked-forged',
    reply: (tag) => ({
      now: rawResponse(200, tagged(tag, [['Transfer-Encoding', 'chunked']]), cat(chunked(ownBody(tag), [5]), FORGED)),
    }),
    expect: OWN,
    poisons: true,
  },
  {
    name: 'chunk-extensions',
    reply: (tag) => {
      const body = ownBody(tag);
      const a = body.subarray(0, 5);
      const b = body.subarray(5);
      const chunks = cat(
        `${a.length.toString(16)};ext=1\r\n`,
        a,
        `\r\n${b.length.toString(16)};x=y;z\r\n`,
        b,
        '\r\n0;ext=1\r\n\r\n',
      );
      return { now: rawResponse(200, tagged(tag, [['Transfer-Encoding', 'chunked']]), chunks) };
    },
    expect: OWN,
    poisons: false,
  },
  {
    name: 'chunk-bad-size',
    reply: (tag) => {
      const body = ownBody(tag);
      const first = body.subarray(0, 8);
      return {
        now: rawResponse(200, tagged(tag, [['Transfer-Encoding', 'chunked']]), cat('8\r\n', first, '\r\n')),
        later: cat('zz\r\n', body.subarray(8), '\r\n0\r\n\r\n'),
      };
    },
    expect: { kind: 'cut', body: 'own-prefix' },
    poisons: true,
  },
  {
    name: 'trailer-secret',
    reply: (tag, injected) => {
      const chunks = chunked(ownBody(tag), [6]);
      const withTrailer = cat(chunks.subarray(0, chunks.length - 2), `X-Token: ${injected}\r\n\r\n`);
      return {
        now: rawResponse(
          200,
          tagged(tag, [
            ['Transfer-Encoding', 'chunked'],
            ['Trailer', 'X-Token'],
          ]),
          withTrailer,
        ),
      };
    },
    expect: OWN,
    poisons: false,
  },
  // 6. Interim responses, one asked for by no one.
  {
    name: '100-continue',
    reply: (tag) => ({ now: cat('HTTP/1.1 100 Continue\r\n\r\n', own(tag)) }),
    expect: REFUSED,
    poisons: false,
  },
  {
    name: '103-early-hints',
    reply: (tag) => ({
      now: cat(rawHead('HTTP/1.1 103 Early Hints', [['Link', '</style.css>; rel=preload; as=style']]), own(tag)),
    }),
    expect: OWN,
    poisons: false,
  },
  {
    name: '101-unasked',
    reply: (tag) => ({
      now: cat(
        rawHead('HTTP/1.1 101 Switching Protocols', [
          ['Upgrade', 'websocket'],
          ['Connection', 'Upgrade'],
          ['X-Tag', tag],
        ]),
        FORGED,
      ),
    }),
    expect: REFUSED,
    poisons: true,
  },
  // 7. No length: the body ends at the close.
  {
    name: 'http10-close',
    reply: (tag) => ({ now: cat(rawHead('HTTP/1.0 200 OK', tagged(tag)), ownBody(tag)), close: true }),
    expect: OWN,
    poisons: false,
  },
  {
    name: 'http11-close',
    reply: (tag) => ({ now: rawResponse(200, tagged(tag, [['Connection', 'close']]), ownBody(tag)), close: true }),
    expect: OWN,
    poisons: false,
  },
  // 8. Transfer codings: one postern undoes (the secret echoed inside), one
  // it cannot, and a bomb.
  {
    name: 'te-gzip',
    reply: (tag, injected) => ({
      now: rawResponse(
        200,
        tagged(tag, [['Transfer-Encoding', 'gzip, chunked']]),
        chunked(zlib.gzipSync(echoBody(tag, injected)), [3, 17, 400]),
      ),
    }),
    expect: { kind: 'own', status: 200, body: 'redacted' },
    poisons: false,
  },
  {
    name: 'te-zstd',
    reply: (tag) => ({
      now: rawResponse(200, tagged(tag, [['Transfer-Encoding', 'zstd, chunked']]), chunked(ownBody(tag), [9])),
    }),
    expect: REFUSED,
    poisons: false,
  },
  {
    // Decoded to the cap only. Its message is framed whole, so its connection
    // may carry more, but no byte of it may answer another request.
    name: 'te-bomb',
    reply: (tag) => ({
      now: rawResponse(
        200,
        [
          ['Content-Type', 'application/octet-stream'],
          ['X-Tag', tag],
          ['Transfer-Encoding', 'gzip, chunked'],
        ],
        chunked(BOMB, [16 * 1024]),
      ),
    }),
    expect: { kind: 'cut', body: 'cap-zeros' },
    poisons: false,
  },
];
const ROW_BY_PATH = new Map(ROWS.map((r) => [`/h/${r.name}`, r]));

// One request of a client's list: a hostile row, or the ordinary GET after it.
interface Sent {
  id: string;
  tag: string;
  row: Row | null; // null: the follow-up GET /tag
  after?: string; // a follow-up's row request id
}

let s: Stack;
let origin: RawOrigin;
let secret: string;
let plainSecret: string;
// Per origin connection, in order: the requests it parsed (by tag) and the
// moments a row's poisoning bytes were written.
const timeline = new Map<number, ({ tag: string } | { poisoned: string })[]>();
const sentTags: string[] = [];
const everything: { what: string; bytes: Buffer }[] = [];

function route(head: Parameters<RawRoute>[0]): RouteAnswer {
  const path = head.target.split('?')[0] as string;
  const tag = header(head, 'x-tag') ?? '(untagged)';
  const events = timeline.get(head.conn) ?? [];
  timeline.set(head.conn, events);
  events.push({ tag });
  if (path === '/tag') return { read: 'declared', respond: () => own(tag) };
  const row = ROW_BY_PATH.get(path);
  if (!row) return { read: 'declared', respond: () => rawResponse(404, [['Content-Length', '0']]) };
  const r = row.reply(tag, header(head, 'authorization') ?? '');
  const poisoned = (): void => {
    if (row.poisons) events.push({ poisoned: tag });
  };
  return {
    read: 'declared',
    respond: () => {
      if (!r.later) poisoned();
      return r.now;
    },
    ...(r.close ? { close: true } : {}),
    ...(r.later ? { later: { ms: LATER_MS, bytes: r.later, written: poisoned } } : {}),
  };
}

function credentialDef(name: string, env: string, extra = ''): string {
  return (
    `name = "${name}"\nkind = "http"\nenv = ["${env}"]\nallow_addresses = ["127.0.0.1/32"]\n${extra}` +
    `[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
    `[[allow]]\nhost = "${HOST}"\nports = [${origin.port}]\nmethods = ["GET", "HEAD"]\npaths = ["/h/*", "/tag"]\n`
  );
}

// A client's list: every row in turn from `start`, each followed by a GET.
function list(prefix: string, rows: Row[], start = 0): Sent[] {
  const out: Sent[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[(start + i) % rows.length] as Row;
    const id = `${prefix}.${row.name}`;
    out.push({ id, tag: id, row }, { id: `${id}.after`, tag: `${id}.after`, row: null, after: id });
  }
  return out;
}

function wire(x: Sent, env: string): KeptAliveRequest {
  const method = x.row?.method ?? 'GET';
  const path = x.row ? `/h/${x.row.name}` : '/tag';
  return {
    id: x.id,
    head: `${method} ${path} HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\nAuthorization: Bearer @@PH:${env}@@\r\nx-tag: ${x.tag}\r\n\r\n`,
  };
}

async function runClient(
  what: string,
  sent: Sent[],
  credential: string,
  env: string,
): Promise<Map<string, KeptAliveAnswer>> {
  sentTags.push(...sent.map((x) => x.tag));
  const run = await sendKeptAlive(
    s.h,
    `${HOST}:${origin.port}`,
    sent.map((x) => wire(x, env)),
    ['--credential', credential],
  );
  everything.push({
    what: `${what}: what postern run printed`,
    bytes: Buffer.concat([run.stdout, Buffer.from(run.stderr)]),
  });
  if (run.code !== 0) throw new Error(`${what}: postern run exited ${run.code}: ${run.stderr}`);
  const answers = new Map(run.answers.map((a) => [a.id, a]));
  for (const a of run.answers) everything.push({ what: `${what}: ${a.id}`, bytes: received(a) });
  return answers;
}

// Every byte the client received in an exchange, and the body with the
// chunk framing undone (a form cut by a chunk boundary hides from a search
// of the raw bytes).
function received(a: KeptAliveAnswer): Buffer {
  return cat(
    Buffer.from(a.raw ?? '', 'base64'),
    '\n',
    Buffer.from(a.body ?? '', 'base64'),
    '\n',
    Buffer.from(a.stray ?? '', 'base64'),
  );
}

function fields(a: KeptAliveAnswer): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of (a.head ?? '').split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).toLowerCase();
    m.set(name, [...(m.get(name) ?? []), line.slice(i + 1).trim()]);
  }
  return m;
}

function one(a: KeptAliveAnswer, name: string): string | undefined {
  return fields(a).get(name)?.join(', ');
}

const bodyOf = (a: KeptAliveAnswer): Buffer => Buffer.from(a.body ?? '', 'base64');

function checkEvery(t: Test, a: KeptAliveAnswer): void {
  t.equal(Buffer.from(a.stray ?? '', 'base64').toString('latin1'), '', 'no stray byte after the message');
  t.notOk(received(a).includes('FORGED'), 'no forged byte reached the client');
  const te = one(a, 'transfer-encoding');
  t.ok(te === undefined || te === 'chunked', `no transfer coding of the upstream's wire (${te})`);
  t.equal(one(a, 'content-encoding'), undefined, 'no content-encoding');
  t.notOk(one(a, 'x-postern-error') === 'internal_error', 'not an internal error');
  for (const h of a.interim ?? []) t.match(h, /^HTTP\/1\.1 1(0[02-9]|[1-9][0-9]) /, 'an interim response is a 1xx');
}

function checkRow(t: Test, row: Row, x: Sent, a: KeptAliveAnswer | undefined): void {
  if (!a) {
    t.fail('no answer');
    return;
  }
  checkEvery(t, a);
  const e = row.expect;
  if (e.kind === 'own') {
    t.equal(a.error, null, 'read whole');
    t.equal(a.complete, true, 'complete');
    t.equal(a.status, e.status, `status ${e.status}`);
    t.equal(one(a, 'x-tag'), x.tag, 'the response to this request');
    t.notOk(one(a, 'x-postern-error'), 'not a refusal');
    const want =
      e.body === 'none' ? '' : e.body === 'own' ? ownBody(x.tag).toString() : echoBody(x.tag, MARK).toString();
    t.equal(bodyOf(a).toString(), want, 'its body');
    t.equal(a.closed, false, 'the connection stays open');
  } else if (e.kind === 'refused') {
    t.equal(a.error, null, 'read whole');
    t.equal(a.status, 502, 'status 502');
    t.equal(one(a, 'x-postern-error'), e.code, `x-postern-error: ${e.code}`);
    let code: unknown;
    try {
      code = (JSON.parse(bodyOf(a).toString()) as { error?: { code?: string } }).error?.code;
    } catch {
      code = `not JSON: ${bodyOf(a).toString().slice(0, 200)}`;
    }
    t.equal(code, e.code, 'the JSON error names the code');
    t.equal(a.closed, false, 'the connection stays open');
  } else {
    t.equal(a.status, 200, 'the head went out: 200');
    t.equal(one(a, 'x-tag'), x.tag, 'the head of the response to this request');
    t.equal(a.complete, false, 'the message is not complete');
    t.match(a.error, /^incomplete: /, 'the client sees it cut');
    t.equal(a.closed, true, 'the connection is closed');
    const body = bodyOf(a);
    if (e.body === 'cap-zeros') {
      t.equal(body.length, CAP, 'exactly max_response_body bytes');
      t.ok(
        body.every((b) => b === 0),
        'the decoded zeros',
      );
    } else {
      t.ok(ownBody(x.tag).subarray(0, body.length).equals(body), `a prefix of its own body (${body.length} bytes)`);
    }
  }
}

// An ordinary GET: its own response, read whole.
function checkOwnGet(t: Test, x: Sent, a: KeptAliveAnswer | undefined, what: string): a is KeptAliveAnswer {
  if (!a) {
    t.fail(`${what}: no answer`);
    return false;
  }
  checkEvery(t, a);
  t.equal(a.error, null, `${what}: read whole`);
  t.equal(a.status, 200, `${what}: 200`);
  t.equal(one(a, 'x-tag'), x.tag, `${what}: its own response`);
  t.equal(bodyOf(a).toString(), ownBody(x.tag).toString(), `${what}: its own body`);
  return true;
}

function checkFollowUp(t: Test, x: Sent, a: KeptAliveAnswer | undefined, before: KeptAliveAnswer | undefined): void {
  if (!checkOwnGet(t, x, a, 'the GET after it') || !before) return;
  if (before.closed) t.equal(a.reopened, true, 'the GET after it: on a new tunnel (the last one closed)');
  else {
    t.equal(a.reopened, false, 'the GET after it: not on a new tunnel');
    t.equal(a.tunnel, before.tunnel, 'the GET after it: on the same client connection');
  }
}

async function checkClient(t: Test, sent: Sent[], answers: Map<string, KeptAliveAnswer>): Promise<void> {
  await t.test('every row', async (t) => {
    t.equal(answers.size, sent.length, 'every request answered');
    for (const x of sent) {
      if (!x.row) continue;
      const f = sent.find((y) => y.after === x.id) as Sent;
      await t.test(x.row.name, async (t) => {
        checkRow(t, x.row as Row, x, answers.get(x.id));
        checkFollowUp(t, f, answers.get(f.id), answers.get(x.id));
      });
    }
  });
}

t.before(async () => {
  s = await startStack({ httpConfig: `max_response_body = "${CAP / 1024}KiB"\ntimeout = "10s"` });
  origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: false }, route);
  secret = makeCanary('HOSTILE');
  plainSecret = makeCanary('PLAIN');
  s.addCredential('hostile', credentialDef('hostile', 'HOSTILE_TOKEN'), secret);
  s.addCredential('plain', credentialDef('plain', 'PLAIN_TOKEN', 'redact_response = false\n'), plainSecret);
  await s.approver();
});
t.teardown(async () => {
  await origin.close();
  await s.close();
});

t.test('one client, every row in turn on one kept-alive connection', async (t) => {
  const sent = list('seq', ROWS);
  const answers = await runClient('sequential', sent, 'hostile', 'HOSTILE_TOKEN');
  await checkClient(t, sent, answers);
});

t.test('three clients at once, each through the rows from another start', async (t) => {
  const lists = [0, 1, 2].map((i) => list(`par${i + 1}`, ROWS, i * 8));
  const all = await Promise.all(lists.map((l, i) => runClient(`client ${i + 1}`, l, 'hostile', 'HOSTILE_TOKEN')));
  for (const [i, l] of lists.entries()) await t.test(`client ${i + 1}`, (t) => checkClient(t, l, all[i]!));
});

t.test('a forgery written 50 ms after a response, while six more clients keep the pool busy', async (t) => {
  const late = ROWS.find((r) => r.name === 'cl-short-later') as Row;
  const forger = Array.from({ length: 40 }, (_, i) => list(`race${i + 1}`, [late])).flat();
  const gets = (who: string): Sent[] =>
    Array.from({ length: 80 }, (_, i) => ({ id: `${who}.${i + 1}`, tag: `${who}.${i + 1}`, row: null }));
  const busy = [1, 2, 3, 4, 5, 6].map((i) => gets(`busy${i}`));
  const [forged, ...others] = await Promise.all([
    runClient('race: the forger', forger, 'hostile', 'HOSTILE_TOKEN'),
    ...busy.map((l, i) => runClient(`race: busy client ${i + 1}`, l, 'hostile', 'HOSTILE_TOKEN')),
  ]);
  await t.test('the late forgery', (t) => checkClient(t, forger, forged!));
  for (const [i, l] of busy.entries())
    await t.test(`busy client ${i + 1}: every GET its own response`, async (t) => {
      for (const x of l) checkOwnGet(t, x, others[i]!.get(x.id), x.id);
    });
});

t.test('redact_response = false: the echoed secret reaches the client, so the search can fail', async (t) => {
  const gzipRow = ROWS.find((r) => r.name === 'te-gzip') as Row;
  const sent = list('control', [gzipRow]);
  const answers = await runClient('control', sent, 'plain', 'PLAIN_TOKEN');
  const a = answers.get(sent[0]!.id);
  t.equal(a?.status, 200, 'answered');
  t.equal(bodyOf(a!).toString(), echoBody(sent[0]!.tag, `Bearer ${plainSecret}`).toString(), 'the echo, unredacted');
  t.ok(exposures(received(a!), plainSecret).length > 0, 'exposures finds the secret');
  t.ok(findCanary(received(a!), plainSecret).length > 0, 'findCanary finds the secret');
});

t.test('the origin: each request once, and nothing after a poisoned message on its connection', async (t) => {
  const seen = [...timeline.values()].flatMap((es) => es.flatMap((e) => ('tag' in e ? [e.tag] : [])));
  const counts = new Map<string, number>();
  for (const tag of seen) counts.set(tag, (counts.get(tag) ?? 0) + 1);
  t.same(
    sentTags.filter((tag) => counts.get(tag) !== 1),
    [],
    'every request reached the origin exactly once',
  );
  t.same(
    seen.filter((tag) => !sentTags.includes(tag)),
    [],
    'nothing reached it that no client sent',
  );
  let poisoned = 0;
  for (const [conn, events] of timeline) {
    const at = events.findIndex((e) => 'poisoned' in e);
    if (at === -1) continue;
    poisoned += 1;
    const after = events.slice(at + 1).flatMap((e) => ('tag' in e ? [e.tag] : []));
    t.same(after, [], `connection ${conn}: no request after ${(events[at] as { poisoned: string }).poisoned}'s bytes`);
  }
  t.ok(poisoned >= ROWS.filter((r) => r.poisons).length, `${poisoned} poisoned connections checked`);
});

t.test('no form of the secret in any byte a client received, the daemon log or the journal', async (t) => {
  t.ok(everything.length > 4 * 2 * ROWS.length, `${everything.length} exchanges and run outputs searched`);
  for (const e of everything) {
    if (e.what.startsWith('control')) continue;
    const found = [...exposures(e.bytes, secret), ...findCanary(e.bytes, secret)];
    if (found.length > 0) t.same(found, [], e.what);
  }
  const hostileBytes = Buffer.concat(everything.filter((e) => !e.what.startsWith('control')).map((e) => e.bytes));
  t.same(exposures(hostileBytes, secret), [], 'what the clients received, together');
  t.same(findCanary(hostileBytes, secret), [], 'what the clients received, together (canary forms)');
  await s.d.stop();
  const journal = await journalText(s.h);
  for (const x of [secret, plainSecret]) {
    t.same(exposures(s.d.logs(), x), [], 'the daemon log');
    t.same(findCanary(s.d.logs(), x), [], 'the daemon log (canary forms)');
    t.same(findCanary(journalBytes(s.h.home), x), [], 'the journal files');
    t.same(exposures(journal, x), [], 'the decrypted journal');
    t.same(findCanary(journal, x), [], 'the decrypted journal (canary forms)');
  }
  const v = cli(s.h, ['audit', 'verify']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});
