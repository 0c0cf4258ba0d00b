// Step 1 of POST /v1/http: the agent's JSON, its headers (the forbidden
// table of SPEC §6.2) and every field of SPEC §6.1, with the exact code and
// the field each refusal names.
import t from 'tap';
import { validateHttpRequest, parseJsonBody, HTTP_REQUEST_FIELDS } from '../../daemon/pipeline/validate';
import { checkAgentHeaders, FORBIDDEN_HEADERS, HEADER_LIMITS } from '../../daemon/pipeline/headers';
import { Refusal } from '../../shared/errors';

const LIMITS = { maxRequestBody: 1024, maxTimeout: 600_000 };
const BASE = { credential: 'github', method: 'GET', url: 'https://api.github.com/repos/acme/app/issues' };

function show(value: unknown): string {
  const s = JSON.stringify(value) ?? String(value);
  const safe = s.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return safe.length > 100 ? `${safe.slice(0, 100)}…` : safe;
}

function refusal(fn: () => unknown): Refusal {
  try {
    fn();
  } catch (e) {
    if (e instanceof Refusal) return e;
    throw e;
  }
  throw new Error('expected a Refusal, got a result');
}

t.test('a valid request, typed and normalised', async (t) => {
  const r = validateHttpRequest(
    {
      ...BASE,
      method: 'post',
      headers: { Accept: 'application/json', 'X-Trace': 'a\tb' },
      body: '{"title":"é"}',
      timeout_ms: 10000,
      idempotency_key: 'a1b2',
    },
    LIMITS,
  );
  t.equal(r.credential, 'github');
  t.equal(r.method, 'POST');
  t.same(r.target, {
    scheme: 'https',
    host: 'api.github.com',
    hostKind: 'name',
    port: 443,
    path: '/repos/acme/app/issues',
    query: '',
  });
  t.same(r.headers, [
    ['accept', 'application/json'],
    ['x-trace', 'a\tb'],
  ]);
  t.same(r.rawHeaders, { Accept: 'application/json', 'X-Trace': 'a\tb' });
  t.same(r.body, Buffer.from('{"title":"\u00e9"}', 'utf8'));
  t.equal(r.timeoutMs, 10000);
  t.equal(r.idempotencyKey, 'a1b2');

  const min = validateHttpRequest(BASE, LIMITS);
  t.same(min.headers, []);
  t.equal(min.body, null, 'no body field: no body');
  t.equal(min.timeoutMs, null);
  t.equal(min.idempotencyKey, null);
});

t.test('methods: upper-cased tokens; CONNECT, TRACE, TRACK refused', async (t) => {
  const good: [string, string][] = [
    ['get', 'GET'],
    ['Patch', 'PATCH'],
    ['DELETE', 'DELETE'],
    ['propfind', 'PROPFIND'],
    ['M-SEARCH', 'M-SEARCH'],
  ];
  for (const [m, want] of good) t.equal(validateHttpRequest({ ...BASE, method: m }, LIMITS).method, want, m);
});

// [input, code, the field the message must name, reason]
type Row = [Record<string, unknown>, string, RegExp, RegExp];

const B64_MAX = Buffer.alloc(LIMITS.maxRequestBody, 7).toString('base64');
const B64_OVER = Buffer.alloc(LIMITS.maxRequestBody + 1, 7).toString('base64');

const rows: Row[] = [
  // credential
  [{ method: 'GET', url: BASE.url }, 'bad_request', /credential: is required/, /GET \/v1\/credentials/],
  [{ ...BASE, credential: 'GitHub' }, 'bad_request', /credential: /, /not a credential name/],
  [{ ...BASE, credential: '../x' }, 'bad_request', /credential: /, /not a credential name/],
  [{ ...BASE, credential: '' }, 'bad_request', /credential: /, /not a credential name/],
  [{ ...BASE, credential: 'a'.repeat(65) }, 'bad_request', /credential: /, /not a credential name/],
  [{ ...BASE, credential: 42 }, 'bad_request', /credential: /, /must be a string/],
  // method
  [{ ...BASE, method: undefined }, 'bad_request', /method: is required/, /GET/],
  [{ ...BASE, method: 'CONNECT' }, 'bad_request', /method: /, /CONNECT is not allowed/],
  [{ ...BASE, method: 'connect' }, 'bad_request', /method: /, /CONNECT is not allowed/],
  [{ ...BASE, method: 'TRACE' }, 'bad_request', /method: /, /TRACE is not allowed/],
  [{ ...BASE, method: 'Track' }, 'bad_request', /method: /, /TRACK is not allowed/],
  [{ ...BASE, method: 'GET POST' }, 'bad_request', /method: /, /not an HTTP method/],
  [{ ...BASE, method: 'GET\r\nX: y' }, 'bad_request', /method: /, /not an HTTP method/],
  [{ ...BASE, method: '' }, 'bad_request', /method: /, /not an HTTP method/],
  [{ ...BASE, method: 'G'.repeat(33) }, 'bad_request', /method: /, /not an HTTP method/],
  [{ ...BASE, method: ['GET'] }, 'bad_request', /method: /, /must be a string/],
  // url (parseTarget's own table is in target.test.ts)
  [{ ...BASE, url: undefined }, 'bad_request', /url: is required/, /absolute http or https URL/],
  [{ ...BASE, url: 7 }, 'bad_request', /url: /, /must be a string/],
  [{ ...BASE, url: 'ftp://x.example/' }, 'bad_request', /url: /, /scheme "ftp"/],
  [{ ...BASE, url: 'https://api.github.com/a/../b' }, 'bad_request', /url: /, /segment/],
  // unknown fields
  [{ ...BASE, foo: 1 }, 'bad_request', /"foo": unknown field/, /remove it/],
  [{ ...BASE, Body: 'x' }, 'bad_request', /"Body": unknown field/, /the fields are credential, method, url/],
  [{ ...BASE, follow_redirects: true }, 'bad_request', /"follow_redirects": unknown field/, /remove it/],
  [
    JSON.parse('{"credential":"github","method":"GET","url":"https://a.example.com/","__proto__":{"x":1}}'),
    'bad_request',
    /"__proto__": unknown field/,
    /remove it/,
  ],
  // headers (shape; names and values below)
  [{ ...BASE, headers: ['accept'] }, 'bad_request', /headers: /, /must be an object/],
  [{ ...BASE, headers: 'accept: x' }, 'bad_request', /headers: /, /must be an object/],
  [{ ...BASE, headers: null }, 'bad_request', /headers: /, /must be an object/],
  [{ ...BASE, headers: { accept: 5 } }, 'bad_request', /headers: header "accept"/, /string value/],
  [
    { ...BASE, headers: { 'X-Forwarded-For': '1.2.3.4' } },
    'bad_request',
    /headers: header "x-forwarded-for" may not be sent/,
    /remove it/,
  ],
  // body and body_base64
  [{ ...BASE, body: 'x', body_base64: 'eA==' }, 'bad_request', /body, body_base64: both are given/, /send one/],
  [{ ...BASE, body: '', body_base64: '' }, 'bad_request', /body, body_base64: both are given/, /send one/],
  [{ ...BASE, body: 5 }, 'bad_request', /body: /, /must be a string/],
  [{ ...BASE, body: { a: 1 } }, 'bad_request', /body: /, /must be a string/],
  [{ ...BASE, body: 'a\ud800b' }, 'bad_request', /body: /, /unpaired surrogate/],
  [{ ...BASE, body_base64: 'aGVsbG8' }, 'bad_request', /body_base64: /, /not valid base64/],
  [{ ...BASE, body_base64: 'aGVs bG8=' }, 'bad_request', /body_base64: /, /remove whitespace/],
  [{ ...BASE, body_base64: 'aGVsbG8=\n' }, 'bad_request', /body_base64: /, /remove whitespace/],
  [{ ...BASE, body_base64: 'a-_b' }, 'bad_request', /body_base64: /, /base64url/],
  [{ ...BASE, body_base64: '====' }, 'bad_request', /body_base64: /, /not valid base64/],
  [{ ...BASE, body_base64: 'aGVsbG9=' }, 'bad_request', /body_base64: /, /not canonical/],
  [{ ...BASE, body_base64: 'QR==' }, 'bad_request', /body_base64: /, /not canonical/],
  [{ ...BASE, body_base64: 42 }, 'bad_request', /body_base64: /, /must be a string/],
  [
    { ...BASE, body: 'x'.repeat(LIMITS.maxRequestBody + 1) },
    'body_too_large',
    /body: /,
    /1025 bytes, more than max_request_body \(1024 bytes\)/,
  ],
  [{ ...BASE, body: '\u00e9'.repeat(LIMITS.maxRequestBody / 2 + 1) }, 'body_too_large', /body: /, /1026 bytes/],
  [{ ...BASE, body_base64: B64_OVER }, 'body_too_large', /body_base64: /, /1025 bytes/],
  // timeout_ms
  [{ ...BASE, timeout_ms: 0 }, 'bad_request', /timeout_ms: /, /from 1 to 600000 \(max_timeout\)/],
  [{ ...BASE, timeout_ms: -1 }, 'bad_request', /timeout_ms: /, /from 1 to 600000/],
  [{ ...BASE, timeout_ms: 1.5 }, 'bad_request', /timeout_ms: /, /whole number/],
  [{ ...BASE, timeout_ms: 600_001 }, 'bad_request', /timeout_ms: /, /600000/],
  [{ ...BASE, timeout_ms: 1e21 }, 'bad_request', /timeout_ms: /, /600000/],
  [{ ...BASE, timeout_ms: '1000' }, 'bad_request', /timeout_ms: /, /whole number/],
  [{ ...BASE, timeout_ms: null }, 'bad_request', /timeout_ms: /, /whole number/],
  // idempotency_key
  [{ ...BASE, idempotency_key: '' }, 'bad_request', /idempotency_key: /, /1 to 128 visible ASCII/],
  [{ ...BASE, idempotency_key: 'k'.repeat(129) }, 'bad_request', /idempotency_key: /, /1 to 128/],
  [{ ...BASE, idempotency_key: 'a b' }, 'bad_request', /idempotency_key: /, /no spaces/],
  [{ ...BASE, idempotency_key: 'cl\u00e9' }, 'bad_request', /idempotency_key: /, /visible ASCII/],
  [{ ...BASE, idempotency_key: 'a\nb' }, 'bad_request', /idempotency_key: /, /visible ASCII/],
  [{ ...BASE, idempotency_key: 5 }, 'bad_request', /idempotency_key: /, /visible ASCII/],
];

// SPEC §6.3's table, written out here so the statuses are checked against
// the contract, not against postern's own list.
const SPEC_STATUS: Record<string, number> = {
  bad_request: 400,
  body_too_large: 413,
  unknown_credential: 404,
  denied_policy: 403,
};

t.test('refused requests: exact code, field named, what to do', async (t) => {
  for (const [input, code, field, why] of rows) {
    const clean = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined));
    const r = refusal(() => validateHttpRequest(clean, LIMITS));
    t.equal(r.code, code, `${show(clean)} code`);
    t.equal(r.status, SPEC_STATUS[code], `${show(clean)} status`);
    t.match(r.message, field, `${show(clean)} field`);
    t.match(r.message, why, `${show(clean)} reason`);
  }
});

t.test('bodies at the limit and the forms of an empty body', async (t) => {
  const max = LIMITS.maxRequestBody;
  t.equal(validateHttpRequest({ ...BASE, body: 'x'.repeat(max) }, LIMITS).body?.length, max);
  t.equal(validateHttpRequest({ ...BASE, body: '\u00e9'.repeat(max / 2) }, LIMITS).body?.length, max);
  t.same(validateHttpRequest({ ...BASE, body_base64: B64_MAX }, LIMITS).body, Buffer.alloc(max, 7));
  t.same(validateHttpRequest({ ...BASE, body: '' }, LIMITS).body, Buffer.alloc(0), '"body": "" is an empty body');
  t.same(validateHttpRequest({ ...BASE, body_base64: '' }, LIMITS).body, Buffer.alloc(0));
  t.same(validateHttpRequest({ ...BASE, body_base64: 'aGVsbG8=' }, LIMITS).body, Buffer.from('hello'));
  t.same(validateHttpRequest({ ...BASE, body_base64: '/+8=' }, LIMITS).body, Buffer.from([0xff, 0xef]));
  t.same(
    validateHttpRequest({ ...BASE, body: 'a\ud83d\ude00b' }, LIMITS).body,
    Buffer.from('a\u{1f600}b', 'utf8'),
    'a paired surrogate is fine',
  );
});

t.test('timeout and idempotency key at their bounds', async (t) => {
  t.equal(validateHttpRequest({ ...BASE, timeout_ms: 1 }, LIMITS).timeoutMs, 1);
  t.equal(validateHttpRequest({ ...BASE, timeout_ms: LIMITS.maxTimeout }, LIMITS).timeoutMs, LIMITS.maxTimeout);
  t.equal(validateHttpRequest({ ...BASE, idempotency_key: '~'.repeat(128) }, LIMITS).idempotencyKey, '~'.repeat(128));
});

t.test('every problem is reported at once, each with its field', async (t) => {
  const r = refusal(() =>
    validateHttpRequest({ credential: 'Bad', method: 'CONNECT', url: 'ftp://x/', timeout_ms: 0, extra: 1 }, LIMITS),
  );
  t.equal(r.code, 'bad_request');
  const paths = (r.detail?.problems as { path: string }[]).map((p) => p.path).sort();
  t.same(paths, ['"extra"', 'credential', 'method', 'timeout_ms', 'url']);
  for (const p of paths) t.ok(r.message.includes(`${p}: `), `message names ${p}`);
});

t.test('a bad_request problem is reported before the body size', async (t) => {
  const r = refusal(() => validateHttpRequest({ ...BASE, method: 'TRACE', body: 'x'.repeat(5000) }, LIMITS));
  t.equal(r.code, 'bad_request');
  t.notMatch(r.message, /xxxx/, 'the body is never echoed');
});

t.test('the request must be an object', async (t) => {
  for (const input of [null, undefined, [], [BASE], 'GET', 5, true]) {
    const r = refusal(() => validateHttpRequest(input, LIMITS));
    t.equal(r.code, 'bad_request', show(input));
    t.match(r.message, /JSON object with fields credential, method, url/, show(input));
  }
});

t.test('HTTP_REQUEST_FIELDS lists exactly the fields SPEC §6.1 names', async (t) => {
  t.same([...HTTP_REQUEST_FIELDS].sort(), [
    'body',
    'body_base64',
    'credential',
    'headers',
    'idempotency_key',
    'method',
    'reason',
    'timeout_ms',
    'url',
  ]);
});

// ------------------------------------------------------------ headers

// Names that each row of the table forbids: the name itself in three
// spellings, and for prefixes some names under it.
function namesFor(row: { name: string; prefix: boolean }): string[] {
  const base = row.prefix ? [`${row.name}for`, `${row.name}authorization`, `${row.name}x`] : [row.name];
  return base.flatMap((n) => [
    n,
    n.toUpperCase(),
    n.replace(/(^|-)([a-z])/g, (_, d: string, c: string) => d + c.toUpperCase()),
  ]);
}

// The same names with "_" for "-" (CGI-style servers read them alike), and
// mixtures of both.
function underscoreNamesFor(row: { name: string; prefix: boolean }): string[] {
  return namesFor(row)
    .filter((n) => n.includes('-'))
    .flatMap((n) => [n.replace(/-/g, '_'), n.replace('-', '_')]);
}

t.test('every forbidden header is refused with "_" for "-" too', async (t) => {
  let n = 0;
  for (const row of FORBIDDEN_HEADERS) {
    for (const name of new Set(underscoreNamesFor(row))) {
      const r = refusal(() => checkAgentHeaders({ accept: 'x', [name]: 'v' }));
      t.equal(r.code, 'bad_request', name);
      t.equal(r.message, `header "${name.toLowerCase()}" may not be sent: ${row.reason}; remove it`, name);
      n += 1;
    }
  }
  t.ok(n > 40, `${n} spellings`);
  const twins = refusal(() => checkAgentHeaders({ 'x-trace': 'a', X_Trace: 'b' }));
  t.match(
    twins,
    { code: 'bad_request', message: /header "x_trace" is given twice/ },
    'x-trace and X_Trace are one header',
  );
});

t.test('every forbidden header of the table is refused, in any case', async (t) => {
  t.equal(FORBIDDEN_HEADERS.length, 19, 'the SPEC §6.2 list has 19 entries');
  for (const row of FORBIDDEN_HEADERS) {
    for (const name of namesFor(row)) {
      const r = refusal(() => checkAgentHeaders({ accept: 'x', [name]: 'v' }));
      t.equal(r.code, 'bad_request', name);
      t.equal(r.message, `header "${name.toLowerCase()}" may not be sent: ${row.reason}; remove it`, name);
      // The same through the request validator.
      const v = refusal(() => validateHttpRequest({ ...BASE, headers: { [name]: 'v' } }, LIMITS));
      t.equal(v.code, 'bad_request', `${name} via validate`);
      t.match(v.message, `headers: header "${name.toLowerCase()}" may not be sent`);
    }
  }
});

t.test('the SPEC §6.2 names are all in the table', async (t) => {
  const spec = [
    'host',
    'content-length',
    'transfer-encoding',
    'connection',
    'upgrade',
    'te',
    'trailer',
    'keep-alive',
    'expect',
    'accept-encoding',
    'proxy-*',
    'forwarded',
    'x-forwarded-*',
    'x-real-ip',
    'x-http-method-override',
    'x-http-method',
    'x-method-override',
    'x-original-url',
    'x-rewrite-url',
  ];
  t.same(FORBIDDEN_HEADERS.map((r) => (r.prefix ? `${r.name}*` : r.name)).sort(), [...spec].sort());
});

t.test('headers near the forbidden names are allowed', async (t) => {
  const fine = {
    Accept: 'application/json',
    'Content-Type': 'application/json',
    'User-Agent': 'agent/1',
    Authorization: 'Bearer mine',
    Cookie: 'a=b',
    Proxy: 'x',
    'X-Forwarded': 'x',
    'XForwarded-For': 'x',
    Hosts: 'x',
    'X-Real-IP-Note': 'x',
    'Content-Length-Hint': 'x',
    'If-None-Match': '"etag"',
    'X-Empty': '',
  };
  const got = checkAgentHeaders(fine);
  t.same(
    got.map(([n]) => n),
    Object.keys(fine).map((n) => n.toLowerCase()),
    'lower-cased, in order',
  );
  t.same(
    got.map(([, v]) => v),
    Object.values(fine),
    'values unchanged',
  );
});

const headerRows: [Record<string, string>, RegExp][] = [
  [{ 'x-a\r\nx-b': 'v' }, /header name "x-a\\r\\nx-b" contains CR, LF or NUL; remove the header/],
  [{ 'x-a\n': 'v' }, /contains CR, LF or NUL/],
  [{ 'x-a\u0000': 'v' }, /contains CR, LF or NUL/],
  [{ 'x-a': 'v\r\nHost: evil.test' }, /header "x-a" has a value containing CR, LF or NUL; remove them/],
  [{ 'x-a': 'v\n' }, /header "x-a" has a value containing CR, LF or NUL/],
  [{ 'x-a': 'v\r' }, /header "x-a" has a value containing CR, LF or NUL/],
  [{ 'x-a': 'v\u0000' }, /header "x-a" has a value containing CR, LF or NUL/],
  [{ 'x-a': 'v\u0007' }, /control or non-ASCII/],
  [{ 'x-a': 'caf\u00e9' }, /control or non-ASCII/],
  [{ 'x-a': '\u0100' }, /control or non-ASCII/],
  [{ '': 'v' }, /empty header name/],
  [{ 'a b': 'v' }, /not a valid HTTP header name/],
  [{ 'a:b': 'v' }, /not a valid HTTP header name/],
  [{ ':authority': 'evil.test' }, /not a valid HTTP header name/],
  [{ 'caf\u00e9': 'v' }, /not a valid HTTP header name/],
  [{ 'x(y)': 'v' }, /not a valid HTTP header name/],
  [{ ['h'.repeat(HEADER_LIMITS.nameBytes + 1)]: 'v' }, /longer than 128 bytes/],
  [{ 'x-a': 'v'.repeat(HEADER_LIMITS.valueBytes + 1) }, /header "x-a" has a value longer than 16384 bytes/],
  [{ Accept: 'a', accept: 'b' }, /header "accept" is given twice/],
  [
    Object.fromEntries(Array.from({ length: HEADER_LIMITS.count + 1 }, (_, i) => [`x-h${i}`, 'v'])),
    /has 101 headers; send at most 100/,
  ],
];

t.test('header names and values: syntax, CR/LF/NUL, limits, duplicates', async (t) => {
  for (const [headers, why] of headerRows) {
    const r = refusal(() => checkAgentHeaders(headers));
    t.equal(r.code, 'bad_request', show(headers));
    t.match(r.message, why, show(headers));
    t.match(r.message, /header/, `${show(headers)} names the header`);
    const v = refusal(() => validateHttpRequest({ ...BASE, headers }, LIMITS));
    t.equal(v.code, 'bad_request', `${show(headers)} via validate`);
    t.match(v.message, /^headers: /, `${show(headers)} via validate names the field`);
  }
});

t.test('header limits: exactly at the limit is accepted', async (t) => {
  const many = Object.fromEntries(Array.from({ length: HEADER_LIMITS.count }, (_, i) => [`x-h${i}`, 'v']));
  t.equal(checkAgentHeaders(many).length, HEADER_LIMITS.count);
  t.equal(checkAgentHeaders({ ['h'.repeat(HEADER_LIMITS.nameBytes)]: 'v' }).length, 1);
  t.equal(checkAgentHeaders({ 'x-a': 'v'.repeat(HEADER_LIMITS.valueBytes) }).length, 1);
});

t.test('a header value is never echoed in a message', async (t) => {
  const r = refusal(() => checkAgentHeaders({ 'x-forwarded-for': 'SECRETVALUE123' }));
  t.notMatch(r.message, /SECRETVALUE123/);
  const s = refusal(() => checkAgentHeaders({ 'x-a': 'SECRETVALUE123\r\n' }));
  t.notMatch(s.message, /SECRETVALUE123/);
});

// ------------------------------------------------------------ raw JSON

t.test('parseJsonBody: one UTF-8 JSON object', async (t) => {
  t.same(parseJsonBody(Buffer.from(JSON.stringify(BASE))), BASE);
  t.same(parseJsonBody(Buffer.from(`\ufeff${JSON.stringify(BASE)}`)), BASE, 'a byte-order mark is ignored');
  const bad: [Buffer, RegExp][] = [
    [Buffer.alloc(0), /empty/],
    [Buffer.from('not json SECRET123'), /not valid JSON/],
    [Buffer.from('{"credential": "github", SECRET123'), /not valid JSON/],
    [Buffer.from('{"a":1}{"b":2}'), /not valid JSON/],
    [Buffer.from("{'a':1}"), /not valid JSON/],
    [Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), /not valid UTF-8/],
    [Buffer.from('[1,2]'), /must be a JSON object/],
    [Buffer.from('null'), /must be a JSON object/],
    [Buffer.from('"SECRET123"'), /must be a JSON object/],
    [Buffer.from('42'), /must be a JSON object/],
  ];
  for (const [raw, why] of bad) {
    const r = refusal(() => parseJsonBody(raw));
    t.equal(r.code, 'bad_request', show(raw.toString('latin1')));
    t.match(r.message, why, show(raw.toString('latin1')));
    t.notMatch(r.message, /SECRET123/, 'the input is never echoed');
  }
});
