// A request read by the proxy front door, turned into the pipeline's
// request (SPEC §11): hop-by-hop headers, accept-encoding and the framing
// the front door consumed are removed, not refused; `host` must name the
// CONNECT target (or the absolute URL's authority); every §6.2 header and
// URL rule of POST /v1/http still applies; a placeholder designates its
// credential only in that credential's inject slot (header per template,
// Basic password, query parameter), which is then removed; anywhere else,
// or not honoured for this process, it is refused, each with the exact code.
import t, { type Test } from 'tap';
import { proxiedRequest, type PlaceholderLookup, type ProxiedParts } from '../../daemon/pipeline/proxied';
import { checkHeadersForCredential, checkQueryForCredential } from '../../daemon/pipeline/policy';
import { validateDefinition, type HttpCredentialDef } from '../../shared/credential';
import { Refusal } from '../../shared/errors';

const LIMITS = { maxRequestBody: 1000, maxTimeout: 600_000 };

function http(name: string, inject: Record<string, unknown>): HttpCredentialDef {
  const d = validateDefinition({ kind: 'http', name, inject, allow: [{ host: 'api.example.com' }] });
  if (d.kind !== 'http') throw new Error('not http');
  return d;
}

const DEFS: Record<string, HttpCredentialDef> = {
  gh: http('gh', { header: 'Authorization', template: 'Bearer {secret}' }),
  key: http('key', { header: 'X-Api-Key', template: '{secret}' }),
  basic: http('basic', { basic_user: 'x-access-token' }),
  q: http('q', { query: 'api_key' }),
};
const PH = {
  gh: 'postern-gh-0123456789abcdef',
  key: 'postern-key-00112233445566ff',
  basic: 'postern-basic-a1b2c3d4e5f60718',
  q: 'postern-q-fedcba9876543210',
};
const ENDED = 'postern-gh-1111111111111111';
const lookup: PlaceholderLookup = (v) => {
  if (v === ENDED) return 'not-honoured';
  const hit = Object.entries(PH).find(([, p]) => p === v);
  return hit ? { credential: hit[0] } : null;
};
const defs = (name: string) => DEFS[name];

function parts(o: Partial<ProxiedParts> & { extra?: [string, string][] }): ProxiedParts {
  return {
    method: 'GET',
    target: '/v1/items',
    headers: [['Host', 'api.example.com'], ...(o.extra ?? [])],
    body: null,
    connect: { host: 'api.example.com', port: 443 },
    ...o,
  };
}

const run = (p: ProxiedParts) => proxiedRequest(p, LIMITS, lookup, defs);

function refused(t: Test, p: ProxiedParts, code: string, pattern: RegExp, what: string): void {
  try {
    run(p);
    t.fail(`${what}: accepted`);
  } catch (e) {
    if (!(e instanceof Refusal)) throw e;
    t.equal(e.code, code, `${what}: ${code}`);
    t.match(e.message, pattern, `${what}: the message says why`);
    t.notOk(/\n/.test(e.message), `${what}: one line`);
  }
}

t.test('hop-by-hop headers, accept-encoding and the consumed framing are removed, not refused', async (t) => {
  const r = run(
    parts({
      method: 'post',
      body: Buffer.from('hello'),
      extra: [
        ['Connection', 'keep-alive, X-Trace'],
        ['X-Trace', '1'],
        ['Keep-Alive', 'timeout=5'],
        ['Proxy-Authorization', 'Basic eDp5'],
        ['Proxy-Connection', 'keep-alive'],
        ['TE', 'trailers'],
        ['Trailer', 'x-sum'],
        ['Upgrade', 'h2c'],
        ['Accept-Encoding', 'gzip, br'],
        ['Content-Length', '5'],
        ['Expect', '100-continue'],
        ['Accept', 'application/json'],
      ],
    }),
  );
  t.same(r.headers, [['accept', 'application/json']]);
  t.equal(r.method, 'POST');
  t.same(r.target, {
    scheme: 'https',
    host: 'api.example.com',
    hostKind: 'name',
    port: 443,
    path: '/v1/items',
    query: '',
  });
  t.equal(r.credential, null, 'no placeholder: no credential');
  t.equal(r.body?.toString(), 'hello');
  const chunked = run(parts({ method: 'POST', body: Buffer.from('x'), extra: [['Transfer-Encoding', 'chunked']] }));
  t.same(chunked.headers, [], 'transfer-encoding removed');
});

t.test('host must name the CONNECT target', async (t) => {
  t.equal(run(parts({ headers: [['host', 'API.Example.com.:443']] })).target.host, 'api.example.com', 'normalised');
  refused(
    t,
    parts({ headers: [['Host', 'evil.example.net']] }),
    'bad_request',
    /"host" must name the CONNECT target \(api\.example\.com:443\)/,
    'another host',
  );
  refused(
    t,
    parts({ headers: [['Host', 'api.example.com:8443']] }),
    'bad_request',
    /"host" must name the CONNECT target/,
    'another port',
  );
  refused(t, parts({ headers: [] }), 'bad_request', /"host" is missing/, 'no host');
  refused(t, parts({ extra: [['host', 'api.example.com']] }), 'bad_request', /"host" is given twice/, 'two hosts');
  refused(t, parts({ headers: [['Host', 'api.example.com/x']] }), 'bad_request', /"host" must name/, 'a path in host');
});

// The target's own authority is taken without parsing it again; every other
// spelling is parsed, and the two must agree on what they accept.
t.test('host: the same answer for the target as written and for every other spelling', async (t) => {
  const on = (host: string, port: number, header: string) =>
    parts({ connect: { host, port }, headers: [['Host', header]] });
  for (const [host, port, header] of [
    ['api.example.com', 443, 'api.example.com'],
    ['api.example.com', 443, 'api.example.com:443'],
    ['api.example.com', 8443, 'api.example.com:8443'],
    ['api.example.com', 443, 'API.example.COM'],
    ['api.example.com', 443, 'api.example.com.'],
    ['api.example.com', 8443, ' api.example.com:8443 '],
    ['::1', 443, '[::1]'],
    ['::1', 8443, '[::1]:8443'],
    ['::1', 8443, '[0:0::1]:8443'],
    ['127.0.0.1', 443, '127.0.0.1'],
    ['127.0.0.1', 443, '2130706433'],
  ] as const)
    t.doesNotThrow(() => run(on(host, port, header)), `${header} names ${host} port ${port}`);
  for (const [host, port, header] of [
    ['api.example.com', 8443, 'api.example.com'],
    ['api.example.com', 443, 'api.example.com:8443'],
    ['api.example.com', 443, 'api.example.com:'],
    ['api.example.com', 443, 'user@api.example.com'],
    ['api.example.com', 443, 'api.example.com:443/'],
    ['api.example.com', 443, 'api.example.com?'],
    ['api.example.com', 443, 'api.example.com#'],
    ['api.example.com', 443, 'api.example.com\\'],
    ['api.example.com', 443, 'api.example.com.evil.test'],
    ['::1', 443, '::1'],
    ['::1', 8443, '[::1]'],
    ['127.0.0.1', 8443, '127.0.0.1'],
  ] as const)
    refused(
      t,
      on(host, port, header),
      'bad_request',
      /"host" must name the CONNECT target/,
      `${header} for ${host}:${port}`,
    );
});

t.test('request targets: origin-form in a tunnel, absolute http:// without one', async (t) => {
  // The absolute form of the tunnel's own origin is its path (RFC 9112
  // §3.2.2); any other origin, scheme, port or user information is refused.
  const accepted: [string, string, string][] = [
    ['https://api.example.com/v1?x=1', '/v1', '?x=1'],
    ['https://api.example.com:443/v1', '/v1', ''],
    ['HTTPS://API.Example.COM/v1/a', '/v1/a', ''],
    ['https://api.example.com', '/', ''],
    ['https://api.example.com?q', '/', '?q'],
  ];
  for (const [target, path, query] of accepted) {
    const r = run(parts({ target }));
    t.same(
      [r.target.host, r.target.port, r.target.path, r.target.query],
      ['api.example.com', 443, path, query],
      target,
    );
  }
  const refusedTargets = [
    'https://other.example.com/v1',
    'https://api.example.com.evil.test/v1',
    'https://api.example.com:8443/v1',
    'https://user@api.example.com/v1',
    'https://api.example.com@other.example.com/v1',
    'http://api.example.com/v1',
    'https:/api.example.com/v1',
    'https://api.example.com#frag',
    'api.example.com/v1',
    '*',
  ];
  for (const target of refusedTargets)
    refused(t, parts({ target }), 'bad_request', /must be a path \("\/\.\.\."\) or a URL of that origin/, target);
  const plain = run(
    parts({ connect: null, target: 'http://api.example.com:8080/a?b=1', headers: [['Host', 'api.example.com:8080']] }),
  );
  t.same([plain.target.scheme, plain.target.port, plain.target.path, plain.target.query], ['http', 8080, '/a', '?b=1']);
  refused(
    t,
    parts({ connect: null, target: '/a' }),
    'bad_request',
    /absolute http:\/\/ URL/,
    'origin form without CONNECT',
  );
  refused(
    t,
    parts({ connect: null, target: 'https://api.example.com/' }),
    'bad_request',
    /absolute http:\/\/ URL/,
    'https without CONNECT',
  );
  refused(
    t,
    parts({ connect: null, target: 'http://api.example.com/', headers: [['Host', 'other.example.com']] }),
    'bad_request',
    /"host" must name the URL/,
    'host other than the URL',
  );
});

t.test("POST /v1/http's header and URL rules apply unchanged", async (t) => {
  for (const [name, value] of [
    ['Forwarded', 'for=1.2.3.4'],
    ['X-Forwarded-For', '1.2.3.4'],
    ['X-Real-IP', '1.2.3.4'],
    ['X-HTTP-Method-Override', 'DELETE'],
    ['X-Original-URL', '/admin'],
    ['X_Forwarded_Host', 'x'],
  ] as const)
    refused(
      t,
      parts({ extra: [[name, value]] }),
      'bad_request',
      new RegExp(`header "${name.toLowerCase()}" may not be sent`),
      name,
    );
  refused(
    t,
    parts({
      extra: [
        ['Accept', 'a'],
        ['accept', 'b'],
      ],
    }),
    'bad_request',
    /given twice/,
    'a header twice',
  );
  refused(t, parts({ extra: [['X-A', 'caf\u00e9']] }), 'bad_request', /non-ASCII/, 'a non-ASCII value');
  refused(t, parts({ target: '/a/../admin' }), 'bad_request', /"\.\." segment|dot/i, 'a dot segment');
  refused(t, parts({ target: '/a%2fb' }), 'bad_request', /encoded/, 'an encoded slash');
  refused(t, parts({ method: 'CONNECT' }), 'bad_request', /CONNECT is not allowed/, 'CONNECT inside the tunnel');
  refused(
    t,
    parts({ method: 'GET', body: Buffer.alloc(1001) }),
    'body_too_large',
    /more than max_request_body/,
    'a body over the limit',
  );
  refused(
    t,
    parts({ body: Buffer.from('ab'), extra: [['Content-Length', '3']] }),
    'bad_request',
    /does not match the body/,
    'a wrong length',
  );
});

t.test('a placeholder in its inject slot designates the credential, and the slot is removed', async (t) => {
  const bearer = run(
    parts({
      extra: [
        ['Authorization', `Bearer ${PH.gh}`],
        ['Accept', '*/*'],
      ],
    }),
  );
  t.equal(bearer.credential, 'gh');
  t.same(bearer.headers, [['accept', '*/*']], 'the Authorization header is removed for injection');
  t.doesNotThrow(() => checkHeadersForCredential(bearer as never, DEFS.gh!), 'the credential header rule then passes');

  const key = run(parts({ extra: [['x-api-key', PH.key]] }));
  t.same([key.credential, key.headers], ['key', []], 'a header with the bare template');

  const basic = run(
    parts({ extra: [['Authorization', `Basic ${Buffer.from(`anyone:${PH.basic}`).toString('base64')}`]] }),
  );
  t.same([basic.credential, basic.headers], ['basic', []], 'the Basic password');

  const q = run(parts({ target: `/v1/items?page=2&api_key=${PH.q}&sort=asc` }));
  t.equal(q.credential, 'q');
  t.equal(q.target.query, '?page=2&sort=asc', 'the query parameter is removed');
  t.doesNotThrow(() => checkQueryForCredential(q as never, DEFS.q!));
  t.equal(run(parts({ target: `/v1?api_key=${PH.q}` })).target.query, '', 'the only parameter removed');
});

t.test('a placeholder anywhere else is refused, naming where', async (t) => {
  const cases: [string, ProxiedParts, RegExp][] = [
    ['another header', parts({ extra: [['X-Token', PH.gh]] }), /in header "x-token"/],
    [
      'the slot header with another template',
      parts({ extra: [['Authorization', `token ${PH.gh}`]] }),
      /in header "authorization"/,
    ],
    ["another credential's slot", parts({ extra: [['X-Api-Key', PH.gh]] }), /in header "x-api-key"/],
    ['the path', parts({ target: `/repos/${PH.gh}/issues` }), /in the URL path/],
    ['the path, percent-encoded', parts({ target: `/repos/${PH.gh.replace(/-/g, '%2D')}` }), /in the URL path/],
    ['another query parameter', parts({ target: `/v1?token=${PH.q}` }), /in query parameter "token"/],
    ['a query parameter name', parts({ target: `/v1?${PH.q}=1` }), /in a query parameter name/],
    ['the body', parts({ method: 'POST', body: Buffer.from(`{"token":"${PH.gh}"}`) }), /in the body/],
    [
      'the Basic user',
      parts({ extra: [['Authorization', `Basic ${Buffer.from(`${PH.basic}:x`).toString('base64')}`]] }),
      /in the Basic user/,
    ],
    [
      'a Basic password for a header credential',
      parts({ extra: [['Authorization', `Basic ${Buffer.from(`u:${PH.gh}`).toString('base64')}`]] }),
      /in the Basic password/,
    ],
    [
      'an unknown placeholder in a slot-less place',
      parts({ extra: [['X-A', 'postern-nobody-0000000000000000']] }),
      /in header "x-a"/,
    ],
    [
      'a slot and the body too',
      parts({ method: 'POST', body: Buffer.from(PH.gh), extra: [['Authorization', `Bearer ${PH.gh}`]] }),
      /in the body/,
    ],
  ];
  for (const [what, p, pattern] of cases) refused(t, p, 'bad_request', pattern, what);
});

t.test('a placeholder not honoured for this process, or two credentials, are refused', async (t) => {
  refused(
    t,
    parts({ extra: [['Authorization', `Bearer ${ENDED}`]] }),
    'bad_request',
    /not valid for this process: it belongs to another run, or its run ended \(a run ends when its command exits and when the vault is locked/,
    'an ended run',
  );
  refused(
    t,
    parts({ extra: [['Authorization', 'Bearer postern-gh-9999999999999999']] }),
    'bad_request',
    /not valid for this process/,
    'one no run knows',
  );
  refused(
    t,
    parts({ target: `/v1?api_key=${PH.q}`, extra: [['Authorization', `Bearer ${PH.gh}`]] }),
    'bad_request',
    /two credentials/,
    'two credentials',
  );
});
