// Hostile URLs through the real daemon (SPEC §4, §6.1–§6.3): IP literal
// spellings with and without a rule naming 127.0.0.1, literals of blocked
// addresses, userinfo, zone ids, Unicode and trailing dots, wildcard
// confusion, schemes, ports, encoded paths and methods. One TABLE of rows;
// each asserts the exact status and code, or success with what the upstream
// received. For every refusal: the upstream saw no request and no
// connection, and the refusal is journaled (a new audit_seq).
//
// Only 127.0.0.1 is ever connected to: the approver approves nothing else,
// so a daemon that let another address through would fail the row at
// approval instead of connecting.
import t from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { Row, runRows } from '../helpers/request-rows';

// The rows need the upstream port, known once the stack runs.
function rows(P: number): Row[] {
  const url = (host: string, path = '/v1/x'): string => `https://${host}:${P}${path}`;
  const get = (credential: string, u: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    credential,
    method: 'GET',
    url: u,
    ...extra,
  });
  const api = (u: string, extra: Record<string, unknown> = {}): Record<string, unknown> => get('api', u, extra);
  const ok = (what: string, req: Record<string, unknown>, seen?: Row['seen']): Row => ({
    what,
    req,
    status: 200,
    ...(seen ? { seen } : {}),
  });
  const no = (what: string, req: Row['req'], status: number, code: string, message?: RegExp): Row => ({
    what,
    req,
    status,
    code,
    ...(message ? { message } : {}),
  });
  const bad = (what: string, req: Row['req'], message?: RegExp): Row => no(what, req, 400, 'bad_request', message);
  const policy = (what: string, req: Row['req'], part: string): Row =>
    no(what, req, 403, 'denied_policy', new RegExp(`allows ${part} `));
  const hostIs =
    (host: string): Row['seen'] =>
    (t, seen, reply) => {
      t.equal(seen.headers['host'], `${host}:${P}`, 'Host is the normalised host');
      t.equal(reply.target.host, host);
      t.equal(reply.target.address, '127.0.0.1');
    };
  const urlIs =
    (path: string): Row['seen'] =>
    (t, seen) =>
      t.equal(seen.url, path, 'the path is sent as written');

  // ---- IP literal spellings of 127.0.0.1: a rule naming 127.0.0.1 matches
  // each (served from 127.0.0.1); a credential without one refuses each.
  const loopbackSpellings = [
    '127.0.0.1',
    '2130706433',
    '0177.0.0.1',
    '0x7f.0.0.1',
    '0x7f000001',
    '0X7F.0X0.0X0.0X1',
    '127.1',
    '127.0.1',
    '017700000001',
    '0177.1',
    '127.0.0.1.',
  ];
  const literals: Row[] = loopbackSpellings.flatMap((spelling) => [
    ok(`${spelling} matches a rule naming 127.0.0.1`, get('lit', url(spelling, '/')), hostIs('127.0.0.1')),
    policy(`${spelling} without a rule naming 127.0.0.1`, api(url(spelling, '/v1/x')), 'host'),
  ]);

  return [
    ...literals,
    no(
      '[::1] under a rule naming it: loopback, not covered by 127.0.0.1/32',
      get('lit', url('[::1]', '/')),
      403,
      'denied_address',
      /::1 is loopback/,
    ),
    policy(
      '[::ffff:127.0.0.1] is not the IPv4 literal the rule names',
      get('lit', url('[::ffff:127.0.0.1]', '/')),
      'host',
    ),
    policy('localhost is a name, not the literal the rule names', get('lit', url('localhost', '/')), 'host'),
    // Literals of blocked addresses under rules that name them: classified.
    no(
      '0xa000001 (10.0.0.1) under a rule naming 10.0.0.1',
      get('lit', url('0xa000001', '/')),
      403,
      'denied_address',
      /10\.0\.0\.1 is private/,
    ),
    no('167772161 (10.0.0.1)', get('lit', url('167772161', '/')), 403, 'denied_address', /10\.0\.0\.1 is private/),
    no(
      '012.0.0.1 (octal 10.0.0.1)',
      get('lit', url('012.0.0.1', '/')),
      403,
      'denied_address',
      /10\.0\.0\.1 is private/,
    ),
    no('10.1 (short 10.0.0.1)', get('lit', url('10.1', '/')), 403, 'denied_address', /10\.0\.0\.1 is private/),
    no(
      '0xa9fea9fe: metadata, although allow_addresses covers 169.254/16',
      get('lit', url('0xa9fea9fe', '/')),
      403,
      'denied_address',
      /169\.254\.169\.254 is a cloud metadata endpoint/,
    ),
    no(
      '[::ffff:a00:1] literal judged as 10.0.0.1',
      get('lit', url('[::ffff:10.0.0.1]', '/')),
      403,
      'denied_address',
      /judged as 10\.0\.0\.1/,
    ),

    // ---- Userinfo, zone ids.
    bad('userinfo user@', api(url('user@api.example.test')), /userinfo/),
    bad('userinfo user:password@', api(url('user:pw@api.example.test')), /userinfo/),
    bad('userinfo hiding the real host', api(`https://api.example.test:${P}@127.0.0.1:${P}/v1/x`), /userinfo/),
    bad('userinfo with an encoded @', api(url('api.example.test%40evil.test')), /percent-encoded host/),
    bad('zone id %25eth0', get('lit', url('[fe80::1%25eth0]', '/')), /zone id/),
    bad('zone id %eth0', get('lit', url('[fe80::1%eth0]', '/')), /zone id/),
    bad('IPv6 without brackets', get('lit', 'https://::1/'), /without brackets/),

    // ---- Unicode dots, trailing dots, case: normalised before matching,
    // and the normalised host is the one sent.
    ok('U+3002 ideographic dots', api(url('api\u3002example\u3002test')), hostIs('api.example.test')),
    ok('U+FF0E fullwidth dots', api(url('api\uff0eexample\uff0etest')), hostIs('api.example.test')),
    ok('U+FF61 halfwidth dots', api(url('api\uff61example\uff61test')), hostIs('api.example.test')),
    ok('one trailing dot', api(url('api.example.test.')), hostIs('api.example.test')),
    ok('upper case host and scheme', api(`HTTPS://API.Example.TEST:${P}/v1/x`), hostIs('api.example.test')),
    policy('Unicode dot hiding a second domain', api(url('api.example.test\u3002evil.test')), 'host'),
    bad('two trailing dots', api(url('api.example.test..')), /empty label/),
    bad('a leading dot', api(url('.api.example.test')), /empty label/),
    bad('an empty label', api(url('api..example.test')), /empty label/),
    bad('a zero-width space in the host', api(url('api.exam\u200bple.test')), /invisible/),
    bad('a percent-encoded host', api(url('%61pi.example.test')), /percent-encoded host/),
    policy('Cyrillic homograph of api', api(url('\u0430pi.example.test')), 'host'),

    // ---- Wildcard confusion.
    policy('api.example.test.evil.test', api(url('api.example.test.evil.test')), 'host'),
    policy('evilapi.example.test', api(url('evilapi.example.test')), 'host'),
    policy('example.test', api(url('example.test')), 'host'),
    policy('the wildcard base itself (wild.test)', api(url('wild.test', '/')), 'host'),
    policy('evilwild.test', api(url('evilwild.test', '/')), 'host'),
    policy('a.wild.test.evil.test', api(url('a.wild.test.evil.test', '/')), 'host'),
    ok('a.wild.test under *.wild.test', api(url('a.wild.test', '/')), hostIs('a.wild.test')),
    ok('x.y.wild.test: a wildcard covers several labels', api(url('x.y.wild.test', '/')), hostIs('x.y.wild.test')),

    // ---- Schemes.
    bad('ftp:', api(`ftp://api.example.test:${P}/v1/x`), /scheme "ftp" is not supported/),
    bad('file:', api('file:///etc/passwd'), /scheme "file" is not supported/),
    bad('gopher:', api(`gopher://api.example.test:${P}/v1/x`), /scheme "gopher"/),
    bad('javascript:', api('javascript:alert(1)'), /scheme "javascript"/),
    bad('data:', api('data:text/plain,hello'), /scheme "data"/),
    policy('http: when the rule allows only https', api(`http://api.example.test:${P}/v1/x`), 'scheme'),
    bad('https: without slashes', api(`https:api.example.test:${P}/v1/x`), /two slashes/),
    bad('https:/ with one slash', api(`https:/api.example.test:${P}/v1/x`), /two slashes/),
    bad('https:/// (empty host)', api(`https:///api.example.test:${P}/v1/x`), /empty host/),
    bad('a relative URL', api('/v1/x'), /not an absolute URL/),
    bad('a fragment', api(url('api.example.test', '/v1/x#frag')), /fragment/),

    // ---- Ports.
    bad('port 0', api('https://api.example.test:0/v1/x'), /port 0 is out of range/),
    bad('port 65536', api('https://api.example.test:65536/v1/x'), /port 65536 is out of range/),
    bad('port 99999', api('https://api.example.test:99999/v1/x'), /out of range/),
    bad('port -1', api('https://api.example.test:-1/v1/x'), /not a number/),
    bad('port +443', api('https://api.example.test:+443/v1/x'), /not a number/),
    bad('an empty port', api('https://api.example.test:/v1/x'), /no port/),
    bad('port 6 digits long', api('https://api.example.test:000443/v1/x'), /not a number/),
    policy('the default port, outside the rule', api('https://api.example.test/v1/x'), 'port'),
    policy('port 443 written with a leading zero', api('https://api.example.test:0443/v1/x'), 'port'),
    policy(`port ${P + 1} outside the rule`, api(`https://api.example.test:${P + 1}/v1/x`), 'port'),

    // ---- Paths and methods.
    bad('%2e%2e segment', api(url('api.example.test', '/v1/%2e%2e/admin')), /encoded/),
    bad('%2E%2E segment', api(url('api.example.test', '/v1/%2E%2E/admin')), /encoded/),
    bad('%2e. mixed segment', api(url('api.example.test', '/v1/%2e./admin')), /encoded/),
    bad('%2F inside a segment', api(url('api.example.test', '/v1/a%2Fb')), /encoded/),
    bad('%2f lower case', api(url('api.example.test', '/v1/a%2fb')), /encoded/),
    bad('%5c (encoded backslash)', api(url('api.example.test', '/v1/a%5cb')), /encoded/),
    bad('%00', api(url('api.example.test', '/v1/a%00')), /encoded/),
    bad('a raw backslash', api(url('api.example.test', '/v1\\..\\admin')), /contains "\\"/),
    bad('/a/./b', api(url('api.example.test', '/v1/./x')), /"\." or "\.\." segment/),
    bad('/a/../b', api(url('api.example.test', '/v1/../admin')), /"\." or "\.\." segment/),
    bad('a trailing ..', api(url('api.example.test', '/v1/x/..')), /"\." or "\.\." segment/),
    bad('// inside the path', api(url('api.example.test', '/v1//x')), /"\/\/"/),
    bad('// at the start of the path', api(url('api.example.test', '//v1/x')), /"\/\/"/),
    bad('a space in the path', api(url('api.example.test', '/v1/a b')), /whitespace/),
    bad('a bad percent escape', api(url('api.example.test', '/v1/%zz')), /"%" not followed/),
    bad('non-ASCII in the path', api(url('api.example.test', '/v1/\u00e9')), /percent-encode/),
    policy('a path outside the rule', api(url('api.example.test', '/admin')), 'path'),
    policy('paths are case-sensitive', api(url('api.example.test', '/V1/x')), 'path'),
    policy('a method outside the rule', { ...api(url('api.example.test')), method: 'DELETE' }, 'method'),
    bad('CONNECT', { ...api(url('api.example.test')), method: 'CONNECT' }, /CONNECT is not allowed/),
    bad('TRACE', { ...api(url('api.example.test')), method: 'trace' }, /TRACE is not allowed/),
    bad(
      'a method with a space and a path',
      { ...api(url('api.example.test')), method: 'GET /admin' },
      /not an HTTP method/,
    ),
    ok(
      'a dot-dot in the query is not a path',
      api(url('api.example.test', '/v1/x?/../admin')),
      urlIs('/v1/x?/../admin'),
    ),
    ok('a lower-case method is upper-cased', { ...api(url('api.example.test')), method: 'post' }, (t, seen) =>
      t.equal(seen.method, 'POST'),
    ),
  ];
}

t.test('hostile URLs through the real daemon', async (t) => {
  const s: Stack = await startStack({
    names: ['api.example.test', '*.wild.test', 'x.y.wild.test', '127.0.0.1'],
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'a.wild.test': { A: ['127.0.0.1'] },
      'x.y.wild.test': { A: ['127.0.0.1'] },
    },
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "X-Api-Key"\ntemplate = "Key {secret}"\n` +
      `[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n` +
      `[[allow]]\nhost = "*.wild.test"\nports = [${P}]\n`,
    secret,
  );
  // Rules naming literals; allow_addresses opens 127.0.0.1 and link-local
  // (which still leaves the metadata address blocked).
  s.addCredential(
    'lit',
    `name = "lit"\nkind = "http"\nallow_addresses = ["127.0.0.1/32", "169.254.0.0/16"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      ['127.0.0.1', '10.0.0.1', '169.254.169.254', '[::ffff:10.0.0.1]', '[::1]']
        .map((h) => `[[allow]]\nhost = "${h}"\nports = [${P}]\n`)
        .join(''),
    secret,
  );
  await s.approver((card) =>
    card.action['address'] === '127.0.0.1' ? { decision: 'session', root_key: card.process.key } : { decision: 'deny' },
  );

  await runRows(t, s, rows(P), secret);
});
