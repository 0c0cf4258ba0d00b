// Step 3 of POST /v1/http: does a rule of the credential cover the request?
// Credentials are real normalised definitions (validateDefinition) and
// requests go through the real validator, as in the daemon.
import t from 'tap';
import {
  checkPolicy,
  checkHeadersForCredential,
  checkQueryForCredential,
  pathPatternMatches,
} from '../../daemon/pipeline/policy';
import { validateHttpRequest, HttpRequest } from '../../daemon/pipeline/validate';
import { validateDefinition, HttpCredentialDef } from '../../shared/credential';
import { Refusal } from '../../shared/errors';

const LIMITS = { maxRequestBody: 1 << 20, maxTimeout: 600_000 };

function http(def: Record<string, unknown>): HttpCredentialDef {
  const d = validateDefinition({
    kind: 'http',
    inject: { header: 'Authorization', template: 'Bearer {secret}' },
    ...def,
  });
  if (d.kind !== 'http') throw new Error('not http');
  return d;
}

function req(method: string, url: string, headers: Record<string, string> = {}): HttpRequest {
  return validateHttpRequest({ credential: 'c', method, url, headers }, LIMITS);
}

function show(value: string): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
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

// The SPEC §4 example.
const github = http({
  name: 'github',
  allow: [
    {
      host: 'api.github.com',
      schemes: ['https'],
      ports: [443],
      methods: ['GET', 'POST'],
      paths: ['/repos/acme/app/*'],
      approve: 'each-use',
    },
  ],
});
const wildcard = http({ name: 'wild', allow: [{ host: '*.example.com' }] });
const literal4 = http({ name: 'local', allow: [{ host: '127.0.0.1', schemes: ['http'], ports: [8080] }] });
const literal6 = http({ name: 'v6', allow: [{ host: '[2001:db8::1]', schemes: ['http'] }] });
const named = http({ name: 'named', allow: [{ host: 'localhost', schemes: ['http'], ports: [8080] }] });
const paths = http({
  name: 'paths',
  allow: [
    {
      host: 'api.example.com',
      methods: ['GET', 'DELETE'],
      paths: ['/repos/*/issues', '/exact', '/a+b', '/a.b', '/x/*/y/*/z', '/files/*.txt'],
    },
  ],
});
const both = http({ name: 'both', allow: [{ host: 'api.example.com', schemes: ['http', 'https'] }] });

// [credential, method, url, index of the rule that covers it | the part refused]
type Row = [HttpCredentialDef, string, string, number | 'host' | 'scheme' | 'port' | 'method' | 'path'];

const rows: Row[] = [
  [github, 'GET', 'https://api.github.com/repos/acme/app/issues', 0],
  [github, 'post', 'https://api.github.com/repos/acme/app/issues', 0],
  [github, 'GET', 'https://API.GITHUB.COM./repos/acme/app/x', 0],
  [github, 'GET', 'https://api.github.com:443/repos/acme/app/x', 0],
  [github, 'GET', 'https://api.github.com/repos/acme/app/', 0],
  [github, 'GET', 'https://api.github.com/repos/acme/app/a/b/c?x=1', 0],
  [github, 'GET', 'https://api.github.com/repos/acme/app', 'path'],
  [github, 'GET', 'http://api.github.com/repos/acme/app/issues', 'scheme'],
  [github, 'GET', 'http://api.github.com:443/repos/acme/app/issues', 'scheme'],
  [github, 'GET', 'https://api.github.com:8443/repos/acme/app/issues', 'port'],
  [github, 'DELETE', 'https://api.github.com/repos/acme/app/issues', 'method'],
  [github, 'PUT', 'https://api.github.com/repos/acme/app/issues', 'method'],
  [github, 'GET', 'https://evil.test/repos/acme/app/issues', 'host'],
  [github, 'GET', 'https://api.github.com.evil.test/repos/acme/app/x', 'host'],
  [github, 'GET', 'https://api.github.com\u3002evil.test/repos/acme/app/x', 'host'],
  [github, 'GET', 'https://github.com/repos/acme/app/x', 'host'],
  [github, 'GET', 'https://xapi.github.com/repos/acme/app/x', 'host'],
  [github, 'GET', 'https://api.github.co/repos/acme/app/x', 'host'],
  [github, 'GET', 'https://140.82.112.6/repos/acme/app/x', 'host'],
  // paths: never the query, byte for byte, case-sensitive
  [github, 'GET', 'https://api.github.com/other?x=/repos/acme/app/', 'path'],
  [github, 'GET', 'https://api.github.com/other?/repos/acme/app/x', 'path'],
  [github, 'GET', 'https://api.github.com/Repos/acme/app/x', 'path'],
  [github, 'GET', 'https://api.github.com/repos/acme/APP/x', 'path'],
  [github, 'GET', 'https://api.github.com/repos/acme/ap%70/x', 'path'],
  [github, 'GET', 'https://api.github.com/repos/acme/app2/x', 'path'],
  [github, 'GET', 'https://api.github.com/x/repos/acme/app/x', 'path'],
  // wildcard hosts: one or more labels before the base, never the base
  [wildcard, 'GET', 'https://a.example.com/', 0],
  [wildcard, 'GET', 'https://a.b.example.com/', 0],
  [wildcard, 'GET', 'https://A.EXAMPLE.COM./x', 0],
  [wildcard, 'GET', 'https://\uff41.example.com/', 0],
  [wildcard, 'GET', 'https://b\u00fccher.example.com/', 0],
  [wildcard, 'GET', 'https://example.com/', 'host'],
  [wildcard, 'GET', 'https://evilexample.com/', 'host'],
  [wildcard, 'GET', 'https://xexample.com/', 'host'],
  [wildcard, 'GET', 'https://example.com.evil.test/', 'host'],
  [wildcard, 'GET', 'https://a.example.com.evil.test/', 'host'],
  [wildcard, 'GET', 'https://a.example.com\u3002evil.test/', 'host'],
  [wildcard, 'GET', 'https://a.example.co/', 'host'],
  [wildcard, 'GET', 'https://a.example.com:8443/', 'port'],
  [wildcard, 'GET', 'http://a.example.com/', 'scheme'],
  // IP literals: only a rule naming that literal; every spelling of it
  [literal4, 'GET', 'http://127.0.0.1:8080/', 0],
  [literal4, 'GET', 'http://2130706433:8080/', 0],
  [literal4, 'GET', 'http://0177.0.0.1:8080/', 0],
  [literal4, 'GET', 'http://0x7f.1:8080/', 0],
  [literal4, 'GET', 'http://127.1:8080/', 0],
  [literal4, 'GET', 'http://127.0.0.1.:8080/', 0],
  [literal4, 'GET', 'http://localhost:8080/', 'host'],
  [literal4, 'GET', 'http://127.0.0.2:8080/', 'host'],
  [literal4, 'GET', 'http://[::ffff:127.0.0.1]:8080/', 'host'],
  [literal4, 'GET', 'http://[::1]:8080/', 'host'],
  [literal4, 'GET', 'http://127.0.0.1/', 'port'],
  [named, 'GET', 'http://localhost:8080/', 0],
  [named, 'GET', 'http://127.0.0.1:8080/', 'host'],
  [named, 'GET', 'http://2130706433:8080/', 'host'],
  [literal6, 'GET', 'http://[2001:db8::1]/', 0],
  [literal6, 'GET', 'http://[2001:DB8:0:0:0:0:0:1]/', 0],
  [literal6, 'GET', 'http://[2001:db8::2]/', 'host'],
  [literal6, 'GET', 'http://[::ffff:2001:db8]/', 'host'],
  // ports are the scheme's defaults; any scheme × any port of the rule
  [both, 'GET', 'http://api.example.com/', 0],
  [both, 'GET', 'https://api.example.com/', 0],
  [both, 'GET', 'http://api.example.com:443/', 0],
  [both, 'GET', 'https://api.example.com:8080/', 'port'],
  // path patterns
  [paths, 'GET', 'https://api.example.com/repos/acme/issues', 0],
  [paths, 'GET', 'https://api.example.com/repos/acme/app/issues', 0],
  [paths, 'GET', 'https://api.example.com/repos/acme/issues/1', 'path'],
  [paths, 'GET', 'https://api.example.com/repos/issues', 'path'],
  [paths, 'GET', 'https://api.example.com/exact', 0],
  [paths, 'GET', 'https://api.example.com/exact/', 'path'],
  [paths, 'GET', 'https://api.example.com/exactly', 'path'],
  [paths, 'GET', 'https://api.example.com/a+b', 0],
  [paths, 'GET', 'https://api.example.com/aab', 'path'],
  [paths, 'GET', 'https://api.example.com/a.b', 0],
  [paths, 'GET', 'https://api.example.com/axb', 'path'],
  [paths, 'GET', 'https://api.example.com/x/1/y/2/z', 0],
  [paths, 'GET', 'https://api.example.com/x/1/2/y/3/4/z', 0],
  [paths, 'GET', 'https://api.example.com/x/y/z', 'path'],
  [paths, 'GET', 'https://api.example.com/x/1/y/z', 'path'],
  [paths, 'GET', 'https://api.example.com/files/report.txt', 0],
  [paths, 'GET', 'https://api.example.com/files/a/b.txt', 0],
  [paths, 'GET', 'https://api.example.com/files/report.txt.exe', 'path'],
  [paths, 'GET', 'https://api.example.com/files/report.TXT', 'path'],
  [paths, 'DELETE', 'https://api.example.com/exact', 0],
  [paths, 'POST', 'https://api.example.com/exact', 'method'],
];

t.test('rules: which requests a credential covers, and which part refuses', async (t) => {
  for (const [def, method, url, want] of rows) {
    const name = `${def.name} ${method} ${show(url)}`;
    const r = req(method, url);
    if (typeof want === 'number') {
      try {
        t.equal(checkPolicy(def, r).ruleIndex, want, name);
      } catch (e) {
        t.fail(`${name}: ${(e as Error).message}`);
      }
      continue;
    }
    const e = refusal(() => checkPolicy(def, r));
    t.equal(e.code, 'denied_policy', `${name} code`);
    t.equal(e.status, 403, `${name} status`);
    t.equal(e.detail?.part, want, `${name} part`);
    t.match(e.message, new RegExp(`^no rule of credential ${def.name} allows ${want} `), `${name} message`);
    t.match(e.message, /GET \/v1\/credentials/, `${name} says what to do`);
  }
});

t.test('denials name the part and the allowed values, never the query', async (t) => {
  const host = refusal(() => checkPolicy(github, req('GET', 'https://evil.test/x?token=abc')));
  t.equal(host.message.split('.')[0], 'no rule of credential github allows host evil');
  t.match(host.message, /allows host evil\.test; allowed hosts: api\.github\.com\./);
  const scheme = refusal(() => checkPolicy(github, req('GET', 'http://api.github.com/repos/acme/app/x')));
  t.match(scheme.message, /allows scheme http for api\.github\.com; allowed schemes: https\./);
  const port = refusal(() => checkPolicy(github, req('GET', 'https://api.github.com:8443/repos/acme/app/x')));
  t.match(port.message, /allows port 8443 for api\.github\.com; allowed ports: 443\./);
  const method = refusal(() => checkPolicy(github, req('DELETE', 'https://api.github.com/repos/acme/app/x')));
  t.match(method.message, /allows method DELETE for api\.github\.com; allowed methods: GET, POST\./);
  const path = refusal(() => checkPolicy(github, req('GET', 'https://api.github.com/other?secret=/repos/acme/app/')));
  t.match(path.message, /allows path "\/other" for api\.github\.com; allowed paths: \/repos\/acme\/app\/\*\./);
  t.notMatch(path.message, /secret/, 'the query is not echoed');
});

t.test('the strictest approve of the covering rules applies', async (t) => {
  const mixed = http({
    name: 'mixed',
    allow: [
      { host: 'api.example.com', paths: ['/*'] },
      { host: 'api.example.com', paths: ['/admin/*'], approve: 'each-use' },
      { host: '*.example.com', paths: ['/admin/*'], approve: 'each-use' },
    ],
  });
  t.same(checkPolicy(mixed, req('GET', 'https://api.example.com/x')), {
    rule: mixed.allow[0],
    ruleIndex: 0,
    approve: 'session',
  });
  t.same(checkPolicy(mixed, req('GET', 'https://api.example.com/admin/x')), {
    rule: mixed.allow[1],
    ruleIndex: 1,
    approve: 'each-use',
  });
  t.same(checkPolicy(mixed, req('GET', 'https://b.example.com/admin/x')), {
    rule: mixed.allow[2],
    ruleIndex: 2,
    approve: 'each-use',
  });
  const strictCred = http({ name: 'strict', approve: 'each-use', allow: [{ host: 'api.example.com' }] });
  t.equal(
    checkPolicy(strictCred, req('GET', 'https://api.example.com/')).approve,
    'each-use',
    "the credential's approve counts",
  );
});

t.test('path patterns: * matches anything including "/", the rest is literal', async (t) => {
  const cases: [string, string, boolean][] = [
    ['/*', '/', true],
    ['/*', '/a/b/c', true],
    ['/a/*', '/a/', true],
    ['/a/*', '/a', false],
    ['*', '/anything', true],
    ['/a*b*c', '/abc', true],
    ['/a*b*c', '/aXbYc', true],
    ['/a*b*c', '/acb', false],
    ['/ab*ba', '/aba', false],
    ['/ab*ba', '/abba', true],
    ['/a**b', '/ab', true],
    ['/a/*/b', '/a//b', true],
    ['/a?b', '/aXb', false],
    ['/a[bc]', '/ab', false],
    ['/a(b)+', '/abb', false],
    ['/a(b)+', '/a(b)+', true],
    ['/%2A', '/*', false],
    ['/A', '/a', false],
  ];
  for (const [pattern, path, want] of cases) t.equal(pathPatternMatches(pattern, path), want, `${pattern} ~ ${path}`);
  // A hostile path against a many-star pattern stays linear.
  const start = process.hrtime.bigint();
  t.equal(pathPatternMatches('/*a*a*a*a*a*a*a*b', `/${'a'.repeat(15000)}`), false);
  t.ok(Number(process.hrtime.bigint() - start) / 1e6 < 500, 'no backtracking');
});

t.test('headers against the credential: the injected header, Authorization for Basic', async (t) => {
  const apiKey = http({
    name: 'apikey',
    inject: { header: 'X-Api-Key', template: '{secret}' },
    allow: [{ host: 'api.example.com' }],
  });
  const basic = http({ name: 'basic', inject: { basic_user: 'me' }, allow: [{ host: 'api.example.com' }] });
  const query = http({ name: 'query', inject: { query: 'api_key' }, allow: [{ host: 'api.example.com' }] });
  const url = 'https://api.example.com/';
  const refused: [HttpCredentialDef, string][] = [
    [apiKey, 'X-Api-Key'],
    [apiKey, 'x-api-key'],
    [apiKey, 'X-API-KEY'],
    [basic, 'Authorization'],
    [basic, 'authorization'],
    [github, 'Authorization'],
    [github, 'AUTHORIZATION'],
  ];
  for (const [def, name] of refused) {
    const r = req('GET', url, { [name]: 'mine' });
    const e = refusal(() => checkHeadersForCredential(r, def));
    t.equal(e.code, 'bad_request', `${def.name} ${name}`);
    t.match(e.message, `header "${name.toLowerCase()}" may not be sent: `, `${def.name} ${name}`);
    t.match(e.message, /; remove it$/);
  }
  t.match(
    refusal(() => checkHeadersForCredential(req('GET', url, { 'x-api-key': 'k' }), apiKey)).message,
    /credential apikey injects its secret into it/,
  );
  t.match(
    refusal(() => checkHeadersForCredential(req('GET', url, { Authorization: 'k' }), basic)).message,
    /credential basic sends its secret as HTTP Basic/,
  );
  // Allowed: what this credential does not inject into.
  t.same(checkHeadersForCredential(req('GET', url, { Authorization: 'Bearer mine' }), apiKey), [
    ['authorization', 'Bearer mine'],
  ]);
  t.same(checkHeadersForCredential(req('GET', url, { Authorization: 'Bearer mine' }), query), [
    ['authorization', 'Bearer mine'],
  ]);
  t.same(checkHeadersForCredential(req('GET', url, { 'X-Api-Key': 'k' }), basic), [['x-api-key', 'k']]);
  t.same(checkHeadersForCredential(req('GET', url, { Accept: 'a', 'X-Api-Key-Id': '1' }), apiKey), [
    ['accept', 'a'],
    ['x-api-key-id', '1'],
  ]);
});

t.test('the query injection form: the agent may not send that parameter', async (t) => {
  const query = http({ name: 'query', inject: { query: 'api_key' }, allow: [{ host: 'api.example.com' }] });
  for (const q of [
    '?api_key=x',
    '?API_KEY=x',
    '?api%5Fkey=x',
    '?api%5fkey=x',
    '?a=1&api_key',
    '?a=1;api_key=2',
    '?api_key[]=x',
    '?api_key%5B0%5D=x',
    '?api_key=',
  ]) {
    const e = refusal(() => checkQueryForCredential(req('GET', `https://api.example.com/x${q}`), query));
    t.equal(e.code, 'bad_request', q);
    t.match(
      e.message,
      /^url query parameter "api_key" may not be sent: credential query injects its secret into it; remove it/,
      q,
    );
  }
  for (const q of ['', '?', '?api_keyx=1', '?x=api_key', '?xapi_key=1', '?a=%zz']) {
    t.doesNotThrow(
      () => checkQueryForCredential(req('GET', `https://api.example.com/x${q.replace('%zz', '%25zz')}`), query),
      q,
    );
  }
  t.doesNotThrow(
    () => checkQueryForCredential(req('GET', 'https://api.example.com/x?api_key=1'), github),
    'other forms: no check',
  );
});
