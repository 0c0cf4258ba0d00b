// A hostile upstream's informational and unusual responses, through BOTH
// front doors (SPEC §6.1–6.4, §11): interim 1xx responses (unasked 100,
// 102, 103, several in a row, a flood, one followed by a close or by
// silence, an unasked 101) whose headers and reason phrase echo the
// injected value; 204/304/HEAD answered with bytes holding the echo;
// status codes outside 100..599; chunked trailers echoing the value raw,
// percent-encoded and base64; the value in two header lines of one name;
// an obs-fold line and a reason phrase carrying it; Content-Length with
// leading zeros, a plus sign, duplicated (same and different values).
// The origin is a raw TLS server (test/helpers/raw-origin.ts) that reads
// the injected `Authorization: Bearer <secret>` from each request.
//
// Each row asserts the exact answer: the redacted response, or the refusal
// SPEC §6.3 and docs/responses.md name (502 upstream_error with
// maybe_executed for an invalid HTTP answer; 504 upstream_timeout when no
// final answer comes in time). After each row an ordinary GET on the same
// requester must get its own answer (no desync, the daemon keeps serving).
// Last: no form of the secret in any byte a client received, the daemon log
// or the journal.
import t, { type Test } from 'tap';
import { startStack, auditEntries, type Stack } from '../helpers/stack';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { chunked, header, rawResponse, startRawOrigin, type RawOrigin, type RouteAnswer } from '../helpers/raw-origin';
import { parseRaw, sendKeptAlive, type KeptAliveAnswer } from '../helpers/proxy-raw-client';

const HOST = 'api.example.test';
const MARK = '[REDACTED:info]';
const TIMEOUT_MS = 3000;

type Fields = [string, string][];
const cat = (...parts: (Buffer | string)[]): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : p)));
const head = (statusLine: string, fields: Fields): string =>
  `${statusLine}\r\n${fields.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
const pct = (s: string): string =>
  Buffer.from(s)
    .toString('hex')
    .replace(/../g, (h) => `%${h.toUpperCase()}`);
const b64 = (s: string): string => Buffer.from(s).toString('base64');

const ownBody = (path: string): string => JSON.stringify({ own: path });
const own = (path: string): Buffer => {
  const b = ownBody(path);
  return rawResponse(
    200,
    [
      ['Content-Type', 'application/json'],
      ['Content-Length', String(b.length)],
    ],
    b,
  );
};
const echoBody = (auth: string): string => JSON.stringify({ 'you sent': auth });

type Expect =
  { kind: 'ok'; status: number; body: string } | { kind: 'refused'; http: number; code: string; maybe: boolean };

interface Row {
  name: string; // the path is /r/<name>
  method?: 'HEAD';
  why: string;
  reply(auth: string, path: string): { bytes: Buffer; close?: boolean };
  expect: Expect;
  // Extra checks on the JSON reply's headers (the proxy's head is checked
  // by checkProxy with the same function on its parsed fields).
  headers?(t: Test, h: Record<string, string | string[]>, door: string): void;
  // The test's strict proxy client refuses the status line (it reads only
  // 1xx–5xx): the answer is read from the raw bytes instead, and the GET
  // after it goes on a new tunnel (the client gave up on the connection).
  clientRejects?: boolean;
}

const ok = (status: number, body: string): Expect => ({ kind: 'ok', status, body });
const OWN = (name: string): Expect => ok(200, ownBody(`/r/${name}`));
const INVALID: Expect = { kind: 'refused', http: 502, code: 'upstream_error', maybe: true };

const ROWS: Row[] = [
  {
    name: '100-echo',
    why: 'an unasked 100 Continue whose header echoes the value (docs/responses.md: refused)',
    reply: (auth, path) => ({ bytes: cat(head('HTTP/1.1 100 Continue', [['X-Echo', auth]]), own(path)) }),
    expect: INVALID,
  },
  {
    name: '102-echo',
    why: '102 Processing echoing the value in a header and (percent-encoded) in a Link, then the final 200',
    reply: (auth, path) => ({
      bytes: cat(
        head('HTTP/1.1 102 Processing', [
          ['X-Echo', auth],
          ['Link', `<https://cdn.example/?t=${pct(auth)}>; rel=preload`],
        ]),
        own(path),
      ),
    }),
    expect: OWN('102-echo'),
  },
  {
    name: '103-reason-echo',
    why: '103 whose reason phrase is the value, a Link with its base64, a header with it percent-encoded',
    reply: (auth, path) => ({
      bytes: cat(
        head(`HTTP/1.1 103 ${auth}`, [
          ['Link', `</${b64(auth)}.css>; rel=preload; as=style`],
          ['X-Echo', pct(auth)],
        ]),
        own(path),
      ),
    }),
    expect: OWN('103-reason-echo'),
  },
  {
    name: '1xx-series',
    why: '102, 103, 103, an unknown 150 and a 199 in a row, each echoing, then the final 200',
    reply: (auth, path) => ({
      bytes: cat(
        head('HTTP/1.1 102 Processing', [['X-Echo', auth]]),
        head('HTTP/1.1 103 Early Hints', [['Link', `</${auth.replace(' ', '%20')}>; rel=preload`]]),
        head('HTTP/1.1 103 Early Hints', [['X-Echo-B64', b64(auth)]]),
        head(`HTTP/1.1 150 ${auth}`, [['X-Echo', auth]]),
        head('HTTP/1.1 199 Whatever', [['Set-Cookie', `sid=${auth.replace(' ', '_')}`]]),
        own(path),
      ),
    }),
    expect: OWN('1xx-series'),
  },
  {
    name: '1xx-flood',
    why: '2000 103s echoing the value, then the final 200',
    reply: (auth, path) => ({
      bytes: cat(head('HTTP/1.1 103 Early Hints', [['X-Echo', auth]]).repeat(2000), own(path)),
    }),
    expect: OWN('1xx-flood'),
  },
  {
    name: '1xx-with-length',
    why: 'a 103 declaring Content-Length and Transfer-Encoding (a 1xx has no body), then the final 200',
    reply: (auth, path) => ({
      bytes: cat(
        head('HTTP/1.1 103 Early Hints', [
          ['Content-Length', '9999'],
          ['X-Echo', auth],
        ]),
        head('HTTP/1.1 103 Early Hints', [['Transfer-Encoding', 'chunked']]),
        own(path),
      ),
    }),
    expect: OWN('1xx-with-length'),
  },
  {
    name: '1xx-then-close',
    why: 'a 102 echoing the value, then the connection closes with no final response',
    reply: (auth) => ({ bytes: Buffer.from(head('HTTP/1.1 102 Processing', [['X-Echo', auth]])), close: true }),
    expect: INVALID,
  },
  {
    name: '1xx-then-silence',
    why: 'a 102 echoing the value, then nothing: the deadline answers, no hang',
    reply: (auth) => ({ bytes: Buffer.from(head('HTTP/1.1 102 Processing', [['X-Echo', auth]])) }),
    expect: { kind: 'refused', http: 504, code: 'upstream_timeout', maybe: true },
  },
  {
    name: '101-echo',
    why: 'an unasked 101 whose header echoes the value, then raw bytes with the value',
    reply: (auth) => ({
      bytes: cat(
        head('HTTP/1.1 101 Switching Protocols', [
          ['Upgrade', 'websocket'],
          ['Connection', 'Upgrade'],
          ['X-Echo', auth],
        ]),
        `\x81\x7e${auth}`,
      ),
    }),
    expect: INVALID,
  },
  {
    name: '204-body-echo',
    why: 'a 204 with a Content-Length and a body echoing the value',
    reply: (auth) => {
      const b = echoBody(auth);
      return {
        bytes: rawResponse(
          204,
          [
            ['Content-Length', String(b.length)],
            ['X-Done', 'yes'],
          ],
          b,
        ),
      };
    },
    expect: ok(204, ''),
  },
  {
    name: '204-chunked-echo',
    why: 'a 204 with Transfer-Encoding: chunked and a chunked body echoing the value',
    reply: (auth) => ({
      bytes: rawResponse(204, [['Transfer-Encoding', 'chunked']], chunked(Buffer.from(echoBody(auth)), [11])),
    }),
    expect: ok(204, ''),
  },
  {
    name: '304-body-echo',
    why: 'a 304 with a Content-Length and a body echoing the value',
    reply: (auth) => {
      const b = echoBody(auth);
      return {
        bytes: rawResponse(
          304,
          [
            ['ETag', '"v1"'],
            ['Content-Length', String(b.length)],
          ],
          b,
        ),
      };
    },
    expect: ok(304, ''),
  },
  {
    name: 'head-body-echo',
    method: 'HEAD',
    why: 'a HEAD answered with a Content-Length and the body anyway, echoing the value',
    reply: (auth) => {
      const b = echoBody(auth);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['Content-Length', String(b.length)],
          ],
          b,
        ),
      };
    },
    expect: ok(200, ''),
  },
  ...(['000', '099'] as const).map((code): Row => ({
    name: `status-${code}`,
    why: `status ${code}: below 100, not a status (RFC 9110 §15)`,
    reply: (auth) => {
      const b = echoBody(auth);
      return {
        bytes: Buffer.from(
          `HTTP/1.1 ${code} ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n${b}`,
        ),
      };
    },
    expect: INVALID,
  })),
  ...(['600', '999'] as const).map((code): Row => ({
    name: `status-${code}`,
    why: `status ${code}: three digits but beyond 599; passed on as given ("whatever the upstream status"), the echo redacted`,
    reply: (auth) => {
      const b = echoBody(auth);
      return {
        bytes: Buffer.from(
          `HTTP/1.1 ${code} ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n${b}`,
        ),
      };
    },
    expect: ok(Number(code), echoBody(MARK)),
    clientRejects: true,
  })),
  {
    name: 'trailers-echo',
    why: 'chunked trailers echoing the value raw, percent-encoded and base64',
    reply: (auth, path) => {
      const c = chunked(Buffer.from(ownBody(path)), [5]);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['Transfer-Encoding', 'chunked'],
            ['Trailer', 'X-Token, X-Pct, X-B64'],
          ],
          cat(c.subarray(0, c.length - 2), `X-Token: ${auth}\r\nX-Pct: ${pct(auth)}\r\nX-B64: ${b64(auth)}\r\n\r\n`),
        ),
      };
    },
    expect: OWN('trailers-echo'),
    headers: (t, h, door) => {
      for (const n of ['x-token', 'x-pct', 'x-b64'])
        t.equal(h[n], undefined, `${door}: the trailer field ${n} is not among the headers`);
    },
  },
  {
    name: 'two-lines-echo',
    why: 'the value in two header lines of one name, raw and base64',
    reply: (auth, path) => {
      const b = ownBody(path);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['X-Echo', auth],
            ['X-Echo', b64(auth)],
            ['Content-Length', String(b.length)],
          ],
          b,
        ),
      };
    },
    expect: OWN('two-lines-echo'),
    headers: (t, h, door) => {
      const v = [h['x-echo'] ?? []].flat();
      t.equal(v.length, 2, `${door}: both x-echo lines`);
      for (const x of v) t.match(x, MARK, `${door}: each x-echo line redacted (${x})`);
    },
  },
  {
    name: 'split-lines-echo',
    why: 'the value split across two header lines of one name (no whole occurrence: passed as sent; docs say splitting defeats redaction)',
    reply: (auth, path) => {
      const b = ownBody(path);
      const half = Math.floor(auth.length / 2);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['X-Echo', auth.slice(0, half)],
            ['X-Echo', auth.slice(half)],
            ['Content-Length', String(b.length)],
          ],
          b,
        ),
      };
    },
    expect: OWN('split-lines-echo'),
    headers: (t, h, door) => {
      const v = [h['x-echo'] ?? []].flat();
      t.equal(v.length, 2, `${door}: both x-echo lines, as two values`);
    },
  },
  {
    name: 'obs-fold-echo',
    why: 'an obs-fold continuation line carrying the value (docs: an obs-fold line is an invalid answer)',
    reply: (auth, path) => {
      const b = ownBody(path);
      return {
        bytes: Buffer.from(
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Echo: seen\r\n ${auth}\r\nContent-Length: ${b.length}\r\n\r\n${b}`,
        ),
      };
    },
    expect: INVALID,
  },
  {
    name: 'reason-echo',
    why: 'the final status line whose reason phrase is the value',
    reply: (auth, path) => {
      const b = ownBody(path);
      return {
        bytes: Buffer.from(
          `HTTP/1.1 200 ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n${b}`,
        ),
      };
    },
    expect: OWN('reason-echo'),
  },
  {
    name: 'cl-leading-zeros',
    why: 'Content-Length with leading zeros (1*DIGIT: valid)',
    reply: (_auth, path) => {
      const b = ownBody(path);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['Content-Length', `000000000000000000000000${b.length}`],
          ],
          b,
        ),
      };
    },
    expect: OWN('cl-leading-zeros'),
  },
  {
    name: 'cl-plus',
    why: 'Content-Length with a plus sign (not 1*DIGIT)',
    reply: (auth, path) => {
      const b = ownBody(path);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['X-Echo', auth],
            ['Content-Length', `+${b.length}`],
          ],
          b,
        ),
      };
    },
    expect: INVALID,
  },
  {
    name: 'cl-two-different',
    why: 'two Content-Length lines with different values (the longer one would take an echo)',
    reply: (auth, path) => {
      const b = ownBody(path);
      const tail = echoBody(auth);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['Content-Length', String(b.length)],
            ['Content-Length', String(b.length + tail.length)],
          ],
          b + tail,
        ),
      };
    },
    expect: INVALID,
  },
  {
    name: 'cl-two-same',
    why: 'two Content-Length lines with the same value (RFC 9112 §6.3 lets a recipient accept or reject)',
    reply: (_auth, path) => {
      const b = ownBody(path);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['Content-Length', String(b.length)],
            ['Content-Length', String(b.length)],
          ],
          b,
        ),
      };
    },
    expect: INVALID,
  },
  {
    name: 'cl-list-same',
    why: 'Content-Length: N, N in one line',
    reply: (_auth, path) => {
      const b = ownBody(path);
      return {
        bytes: rawResponse(
          200,
          [
            ['Content-Type', 'application/json'],
            ['Content-Length', `${b.length}, ${b.length}`],
          ],
          b,
        ),
      };
    },
    expect: INVALID,
  },
];
const BY_PATH = new Map(ROWS.map((r) => [`/r/${r.name}`, r]));

let s: Stack;
let origin: RawOrigin;
let secret: string;
const received: { what: string; bytes: Buffer }[] = [];
const journalChecks: ((entries: Map<number, Record<string, unknown>>, t: Test) => void)[] = [];

function route(target: string, auth: string): RouteAnswer {
  const path = target.split('?')[0] as string;
  if (path === '/own') return { read: 'declared', respond: () => own(path) };
  const row = BY_PATH.get(path);
  if (!row) return { read: 'declared', respond: () => rawResponse(404, [['Content-Length', '0']]) };
  const r = row.reply(auth, path);
  return { read: 'declared', respond: () => r.bytes, ...(r.close ? { close: true } : {}) };
}

t.before(async () => {
  s = await startStack({ httpConfig: `timeout = "${TIMEOUT_MS / 1000}s"` });
  origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, (h) =>
    route(h.target, header(h, 'authorization') ?? ''),
  );
  secret = makeCanary('INFO1XX');
  s.addCredential(
    'info',
    `name = "info"\nkind = "http"\nenv = ["INFO_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "${HOST}"\nports = [${origin.port}]\nmethods = ["GET", "HEAD"]\npaths = ["/*"]\n`,
    secret,
  );
  await s.approver();
});
t.teardown(async () => {
  await origin.close();
  await s.close();
});

interface Reply {
  status?: number;
  headers?: Record<string, string | string[]>;
  body?: string;
  redactions?: number;
  audit_seq?: number;
  error?: { code?: string; maybe_executed?: boolean; audit_seq?: number; message?: string };
}

t.test('POST /v1/http: each row, then an ordinary GET', async (t) => {
  for (const row of ROWS) {
    await t.test(`${row.name}: ${row.why}`, async (t) => {
      const started = Date.now();
      const r = await s.request({
        credential: 'info',
        method: row.method ?? 'GET',
        url: `https://${HOST}:${origin.port}/r/${row.name}`,
        timeout_ms: TIMEOUT_MS,
      });
      const took = Date.now() - started;
      received.push({ what: `json ${row.name}`, bytes: Buffer.from(r.text) });
      const j = (r.json ?? {}) as Reply;
      const e = row.expect;
      if (e.kind === 'ok') {
        t.equal(r.status, 200, `postern answered 200: ${r.text.slice(0, 300)}`);
        t.equal(j.status, e.status, `upstream status ${e.status}`);
        t.equal(j.body, e.body, 'the body');
        row.headers?.(t, j.headers ?? {}, 'json');
        journalChecks.push((entries, t) => {
          const out = entries.get(j.audit_seq ?? -1);
          t.equal(out?.['kind'], 'http_outcome', `${row.name}: audit_seq names the outcome`);
          t.equal(out?.['status'], e.status, `${row.name}: the outcome records the status`);
          t.equal(out?.['error'], undefined, `${row.name}: the outcome has no error`);
        });
      } else {
        t.equal(r.status, e.http, `postern answered ${e.http}: ${r.text.slice(0, 300)}`);
        t.equal(j.error?.code, e.code, `code ${e.code}`);
        t.equal(j.error?.maybe_executed, e.maybe, `maybe_executed ${e.maybe}`);
        journalChecks.push((entries, t) => {
          const out = entries.get(j.error?.audit_seq ?? -1);
          t.equal(out?.['kind'], 'http_outcome', `${row.name}: audit_seq names the outcome`);
          t.equal(out?.['error'], e.code, `${row.name}: the outcome records the code`);
          t.equal(out?.['maybe_executed'], e.maybe, `${row.name}: the outcome records maybe_executed`);
        });
        t.ok(took < TIMEOUT_MS + 4000, `answered in ${took} ms, no hang`);
      }
      t.same(exposures(r.text, secret), [], 'no form of the secret in the reply');
      const after = await s.request({
        credential: 'info',
        method: 'GET',
        url: `https://${HOST}:${origin.port}/own`,
        timeout_ms: TIMEOUT_MS,
      });
      received.push({ what: `json ${row.name} after`, bytes: Buffer.from(after.text) });
      t.equal(after.status, 200, `the GET after it: ${after.text.slice(0, 200)}`);
      t.equal((after.json as Reply | null)?.body, ownBody('/own'), 'the GET after it: its own answer');
    });
  }
  await t.test('the journal outcome of each row', async (t) => {
    const entries = auditEntries(s);
    for (const c of journalChecks) c(entries, t);
  });
});

function fields(a: KeptAliveAnswer): Record<string, string | string[]> {
  const m: Record<string, string | string[]> = {};
  for (const line of (a.head ?? '').split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).toLowerCase();
    const v = line.slice(i + 1).trim();
    const before = m[name];
    m[name] = before === undefined ? v : [...[before].flat(), v];
  }
  return m;
}

t.test('the proxy front door: each row, then an ordinary GET, on one kept-alive client connection', async (t) => {
  const ph = 'Authorization: Bearer @@PH:INFO_TOKEN@@\r\n';
  const reqs = ROWS.flatMap((row) => [
    {
      id: row.name,
      head: `${row.method ?? 'GET'} /r/${row.name} HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n${ph}\r\n`,
    },
    { id: `${row.name}.after`, head: `GET /own HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n${ph}\r\n` },
  ]);
  const run = await sendKeptAlive(s.h, `${HOST}:${origin.port}`, reqs, ['--credential', 'info']);
  received.push({ what: 'proxy: run output', bytes: Buffer.concat([run.stdout, Buffer.from(run.stderr)]) });
  t.equal(run.code, 0, run.stderr);
  const answers = new Map(run.answers.map((a) => [a.id, a]));
  for (const row of ROWS) {
    await t.test(`${row.name}: ${row.why}`, async (t) => {
      const a = answers.get(row.name);
      if (!a) return t.fail('no answer');
      const raw = Buffer.from(a.raw ?? '', 'base64');
      received.push({ what: `proxy ${row.name}`, bytes: raw });
      received.push({ what: `proxy ${row.name} (body)`, bytes: Buffer.from(a.body ?? '', 'base64') });
      received.push({ what: `proxy ${row.name} (trailers)`, bytes: Buffer.from((a.trailers ?? []).join('\n')) });
      t.same(exposures(raw, secret), [], 'no form of the secret in any byte received');
      t.same(a.interim ?? [], [], 'no interim response passed on');
      if (row.clientRejects) {
        const p = parseRaw(raw);
        const e = row.expect as { kind: 'ok'; status: number; body: string };
        t.match(
          p.head,
          new RegExp(`^HTTP/1\\.1 ${e.status} `),
          `the status line passed on: ${p.head.split('\r\n')[0]}`,
        );
        t.equal(p.headers['x-postern-error'], undefined, 'not a refusal');
        t.equal(p.body, e.body, 'the body');
        const f = answers.get(`${row.name}.after`);
        received.push({ what: `proxy ${row.name} after`, bytes: Buffer.from(f?.raw ?? '', 'base64') });
        t.equal(f?.status, 200, 'the GET after it (new tunnel): 200');
        t.equal(Buffer.from(f?.body ?? '', 'base64').toString(), ownBody('/own'), 'the GET after it: its own answer');
        return;
      }
      t.equal(Buffer.from(a.stray ?? '', 'base64').toString('latin1'), '', 'no stray byte after the message');
      t.equal(a.error, null, `read whole (${a.error})`);
      const h = fields(a);
      const body = Buffer.from(a.body ?? '', 'base64').toString();
      const e = row.expect;
      if (e.kind === 'ok') {
        t.equal(a.status, e.status, `status ${e.status} (${(a.head ?? '').slice(0, 200)})`);
        t.equal(h['x-postern-error'], undefined, 'not a refusal');
        t.equal(body, e.body, 'the body');
        t.same(a.trailers ?? [], [], 'no trailer passed on');
        row.headers?.(t, h, 'proxy');
      } else {
        t.equal(a.status, e.http, `status ${e.http} (${(a.head ?? '').slice(0, 200)})`);
        t.equal(h['x-postern-error'], e.code, `x-postern-error: ${e.code}`);
        let parsed: Reply | null = null;
        try {
          parsed = JSON.parse(body) as Reply;
        } catch {
          parsed = null;
        }
        t.equal(parsed?.error?.code, e.code, 'the JSON error names the code');
        t.equal(parsed?.error?.maybe_executed, e.maybe, `maybe_executed ${e.maybe}`);
      }
      t.equal(a.closed, false, 'the client connection stays open');
      const f = answers.get(`${row.name}.after`);
      const fb = Buffer.from(f?.body ?? '', 'base64');
      received.push({ what: `proxy ${row.name} after`, bytes: Buffer.from(f?.raw ?? '', 'base64') });
      t.equal(f?.status, 200, 'the GET after it: 200');
      t.equal(fb.toString(), ownBody('/own'), 'the GET after it: its own answer');
      t.equal(f?.reopened, false, 'the GET after it: on the same client connection');
    });
  }
});

t.test('the daemon keeps serving; no form of the secret anywhere', async (t) => {
  const h = await s.request({ credential: 'info', method: 'GET', url: `https://${HOST}:${origin.port}/own` });
  t.equal(h.status, 200, 'still serving');
  for (const r of received) {
    const found = [...exposures(r.bytes, secret), ...findCanary(r.bytes, secret)];
    if (found.length > 0) t.same(found, [], r.what);
  }
  t.same(exposures(Buffer.concat(received.map((r) => r.bytes)), secret), [], 'all client bytes together');
  await s.d.stop();
  t.same(exposures(s.d.logs(), secret), [], 'the daemon log');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log (canary forms)');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files');
  const journal = await journalText(s.h);
  t.same(exposures(journal, secret), [], 'the decrypted journal');
  t.same(findCanary(journal, secret), [], 'the decrypted journal (canary forms)');
  t.notMatch(
    s.d.logs(),
    /AssertionError|ERR_ASSERTION|TypeError|RangeError|internal_error/,
    'no internal error logged',
  );
});
