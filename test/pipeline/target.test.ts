// The agent's `url`: what postern will send, and every shape that must be
// refused rather than repaired (SPEC §4 path rules, §6.2 URL rules).
import t from 'tap';
import { parseTarget, Target, MAX_URL_BYTES } from '../../daemon/pipeline/target';
import { Refusal } from '../../shared/errors';
import { pathFormProblem } from '../../shared/path-form';

function show(value: string): string {
  const s = JSON.stringify(value).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
}

type Expect = Partial<Target>;

const accepted: [string, Expect][] = [
  [
    'https://api.example.com/v1/items?page=2',
    { scheme: 'https', host: 'api.example.com', hostKind: 'name', port: 443, path: '/v1/items', query: '?page=2' },
  ],
  ['http://api.example.com/', { scheme: 'http', port: 80, path: '/', query: '' }],
  // case, trailing dot, scheme case, explicit default port
  ['https://API.Example.COM/x', { host: 'api.example.com', path: '/x' }],
  ['https://api.example.com./x', { host: 'api.example.com' }],
  ['HTTPS://api.example.com/', { scheme: 'https', port: 443 }],
  ['HtTp://api.example.com/', { scheme: 'http', port: 80 }],
  ['https://api.example.com:443/', { port: 443 }],
  ['http://api.example.com:80/', { port: 80 }],
  ['https://api.example.com:8443/', { port: 8443 }],
  ['http://api.example.com:443/', { scheme: 'http', port: 443 }],
  ['https://api.example.com:65535/', { port: 65535 }],
  ['https://api.example.com:1/', { port: 1 }],
  // empty path is "/"; a query without a path
  ['http://api.example.com', { path: '/', query: '' }],
  ['http://api.example.com?x=1', { path: '/', query: '?x=1' }],
  ['http://api.example.com/p?', { path: '/p', query: '?' }],
  // IDNA, and the Unicode dots and fullwidth letters IDNA maps
  ['https://bücher.example/', { host: 'xn--bcher-kva.example', hostKind: 'name' }],
  ['https://BÜCHER.example/', { host: 'xn--bcher-kva.example' }],
  ['https://xn--bcher-kva.example/', { host: 'xn--bcher-kva.example' }],
  ['https://api.example.com\u3002evil.test/', { host: 'api.example.com.evil.test' }],
  ['https://api.example.com\uff0eevil.test/', { host: 'api.example.com.evil.test' }],
  ['https://api.example.com\uff61evil.test/', { host: 'api.example.com.evil.test' }],
  ['https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/', { host: 'example.com' }],
  ['https://a_b.example.com/', { host: 'a_b.example.com' }],
  // numeric IPv4 spellings become the dotted quad
  ['http://2130706433/', { host: '127.0.0.1', hostKind: 'ipv4' }],
  ['http://0177.0.0.1/', { host: '127.0.0.1', hostKind: 'ipv4' }],
  ['http://0x7f.1/', { host: '127.0.0.1', hostKind: 'ipv4' }],
  ['http://0x7F000001/', { host: '127.0.0.1', hostKind: 'ipv4' }],
  ['http://127.1/', { host: '127.0.0.1', hostKind: 'ipv4' }],
  ['http://127.0.0.1./', { host: '127.0.0.1', hostKind: 'ipv4' }],
  ['http://192.0.2.10:8080/x', { host: '192.0.2.10', port: 8080 }],
  // IPv6 literals, compressed and in brackets as rules store them
  ['http://[::1]/', { host: '[::1]', hostKind: 'ipv6' }],
  ['http://[2001:DB8:0:0:0:0:0:1]:8080/', { host: '[2001:db8::1]', hostKind: 'ipv6', port: 8080 }],
  ['http://[::ffff:127.0.0.1]/', { host: '[::ffff:7f00:1]', hostKind: 'ipv6' }],
  ['http://[0:0:0:0:0:0:0:1]/', { host: '[::1]', hostKind: 'ipv6' }],
  // paths are sent as written: every RFC 3986 path character, %XX kept
  ["https://a.example.com/a/b;c=d/@x:y/~u/(1)!$&'*+,=", { path: "/a/b;c=d/@x:y/~u/(1)!$&'*+,=" }],
  ['https://a.example.com/a/%20b%C3%A9%2a', { path: '/a/%20b%C3%A9%2a' }],
  ['https://a.example.com/.well-known/x', { path: '/.well-known/x' }],
  ['https://a.example.com/a/..b/c.', { path: '/a/..b/c.' }],
  ['https://a.example.com/a/...', { path: '/a/...' }],
  ['https://a.example.com/a/', { path: '/a/' }],
  ['https://a.example.com/Repos/A', { path: '/Repos/A' }],
  // queries are sent as written, including what WHATWG URL would encode
  ["https://a.example.com/x?a='b'&c=[1]|{}^`", { path: '/x', query: "?a='b'&c=[1]|{}^`" }],
  ['https://a.example.com/x?next=/a/../b&y=%2F?z', { path: '/x', query: '?next=/a/../b&y=%2F?z' }],
  ['https://a.example.com/x?path=//a', { path: '/x', query: '?path=//a' }],
  ['https://a.example.com/x?at=user@host', { path: '/x', query: '?at=user@host' }],
  ['https://a.example.com/user@host', { host: 'a.example.com', path: '/user@host' }],
  // look-alikes of the forms origins read differently (SPEC §4): names,
  // parameters on named segments, valid UTF-8, harmless double encoding
  ...[
    '/public/a.b',
    '/public/...',
    '/public/....',
    '/public/..a',
    '/public/a..',
    '/public/.a;x',
    '/public/a..;x',
    '/public/a;b=c',
    '/public/a;b=c/d',
    '/public/x;..',
    '/public/x;../y',
    '/public/a;.;b',
    '/public/;jsessionid=1',
    '/public/%C3%A9',
    '/public/%c3%a9',
    '/public/%2Bplus',
    '/public/%3B',
    '/public/a%3Bb/c',
    '/public/%2520',
    '/public/%25zz',
    '/public/%2541',
    '/public/%25252541',
    '/public/%E2%80%A6',
    '/public/a%EF%BC%8Eb',
    '/public/%EF%BC%8E%EF%BC%8E%EF%BC%8E',
    '/public/.%20x',
    '/public/%20',
    '/public/%C2%A0x',
    '/public/%EF%BB%BF',
    '/public/%F0%9F%98%80',
    '/public/%EF%BF%BF',
    '/public/%F4%8F%BF%BF',
    '/public/%E2%81%84',
    '/public/%EF%BC%8541',
    '/public/%75002e',
    '/public/%CD%BEx',
  ].map((path): [string, Expect] => [`https://a.example.com${path}`, { path }]),
];

t.test('accepted URLs and their normal form', async (t) => {
  for (const [url, want] of accepted) {
    let got: Target;
    try {
      got = parseTarget(url);
    } catch (e) {
      t.fail(`${show(url)}: ${(e as Error).message}`);
      continue;
    }
    t.match(got, want, show(url));
    // What is sent is the text the agent wrote after the authority.
    t.ok(
      url.endsWith(got.path + got.query) || (got.path === '/' && url.endsWith(got.query)),
      `${show(url)} sent as written`,
    );
  }
});

const HOST = 'https://api.example.com';

const refused: [string, RegExp][] = [
  // not an absolute http(s) URL
  ['', /is empty/],
  ['not a url', /whitespace/],
  ['api.example.com/x', /not an absolute URL/],
  ['/relative/path', /not an absolute URL/],
  ['//api.example.com/x', /not an absolute URL/],
  ['ftp://example.com/', /scheme "ftp" is not supported; use http or https/],
  ['FTP://example.com/', /scheme "ftp" is not supported/],
  ['javascript:alert(1)', /scheme "javascript" is not supported/],
  ['file:///etc/passwd', /scheme "file" is not supported/],
  ['ws://example.com/', /scheme "ws" is not supported/],
  ['data:text/plain,hello', /scheme "data" is not supported/],
  ['http:example.com/', /must be written as http:\/\/host\/path/],
  ['http:/example.com/', /must be written as http:\/\/host\/path/],
  ['http:///example.com/', /empty host/],
  ['http://:80/', /empty host/],
  ['http://[]/', /empty host/],
  ['http://?x', /empty host/],
  // userinfo in every form
  ['https://user@api.example.com/', /userinfo/],
  ['https://user:pass@api.example.com/', /userinfo/],
  ['https://:pass@api.example.com/', /userinfo/],
  ['https://@api.example.com/', /userinfo/],
  ['https://api.example.com@evil.test/', /userinfo/],
  ['https://api.example.com:443@evil.test/', /userinfo/],
  ['https://evil.test\\@api.example.com/', /"\\"/],
  // zone ids, brackets
  ['http://[fe80::1%25eth0]/', /zone id/],
  ['http://[fe80::1%eth0]/', /zone id/],
  ['http://[fe80::1%251]:80/', /zone id/],
  ['http://::1/', /IPv6 address without brackets/],
  ['http://[::1/', /unclosed "\["/],
  ['http://[::1]x/', /after the "\]"/],
  ['http://[::1]:/', /no port/],
  ['http://[not:an:address]/', /not a valid host/],
  // fragments
  [`${HOST}/x#frag`, /fragment/],
  [`${HOST}/x#`, /fragment/],
  [`${HOST}/x?q=1#a`, /fragment/],
  // ports
  [`${HOST}:0/`, /port 0 is out of range/],
  [`${HOST}:00000/`, /port 0 is out of range/],
  [`${HOST}:65536/`, /port 65536 is out of range/],
  [`${HOST}:99999/`, /port 99999 is out of range/],
  [`${HOST}:123456/`, /not a number from 1 to 65535/],
  [`${HOST}:/`, /no port/],
  [`${HOST}:abc/`, /not a number/],
  [`${HOST}:-1/`, /not a number/],
  [`${HOST}:+80/`, /not a number/],
  [`${HOST}:0x50/`, /not a number/],
  [`${HOST}:443:443/`, /IPv6 address without brackets/],
  // hosts
  ['https://exa\u00admple.com/', /invisible/],
  ['https://exa\u200bmple.com/', /invisible/],
  ['https://api.example.com\u202e/', /invisible/],
  ['https://%65xample.com/', /percent-encoded host/],
  ['https://exa%00mple.com/', /percent-encoded host/],
  ['https://a..b.example/', /empty label/],
  ['https://example.com../', /empty label/],
  ['https://.example.com/', /empty label|not a valid host/],
  ['https://a*b.example.com/', /character a host name cannot have/],
  ['https://*.example.com/', /character a host name cannot have/],
  ['https://a{b.example.com/', /character a host name cannot have/],
  ['https://-a.example.com/', /may not start or end with "-"/],
  ['https://1.2.3.4.5/', /not a valid host/],
  ['https://example.123/', /not a valid host/],
  ['https://256.0.0.1/', /not a valid host/],
  ['https://xn--zz/', /not a valid host/],
  ['https://a<b.example.com/', /not a valid host/],
  [`https://${'a'.repeat(64)}.example.com/`, /longer than 63|not a valid host/],
  [`https://${Array.from({ length: 60 }, () => 'abcd').join('.')}.com/`, /longer than 253/],
  // path rules of SPEC §4: refused, never resolved
  [`${HOST}/a/./b`, /"\." or "\.\." segment/],
  [`${HOST}/a/../b`, /"\." or "\.\." segment/],
  [`${HOST}/..`, /"\." or "\.\." segment/],
  [`${HOST}/.`, /"\." or "\.\." segment/],
  [`${HOST}/a/..`, /"\." or "\.\." segment/],
  [`${HOST}/a/.`, /"\." or "\.\." segment/],
  [`${HOST}//a`, /"\/\/"/],
  [`${HOST}/a//b`, /"\/\/"/],
  [`${HOST}/a/`.concat('/'), /"\/\/"/],
  [`${HOST}/a/%2e%2e/b`, /encoded "\/", "\.", "\\"/],
  [`${HOST}/a/%2E%2E/b`, /encoded/],
  [`${HOST}/a/.%2e/b`, /encoded/],
  [`${HOST}/a/%2e/b`, /encoded/],
  [`${HOST}/a%2fb`, /encoded/],
  [`${HOST}/a%2Fb`, /encoded/],
  [`${HOST}/a%5cb`, /encoded/],
  [`${HOST}/a%5Cb`, /encoded/],
  [`${HOST}/a%00b`, /encoded/],
  [`${HOST}/a\\b`, /"\\"/],
  [`${HOST}\\a`, /"\\"/],
  [`${HOST}/a/..\\b`, /"\\"/],
  // ";" parameters after a dot segment, which servlet stacks strip before
  // resolving the dots
  ...[
    '/public/..;/admin/users',
    '/public/.;/..;/admin/users',
    '/public/..;jsessionid=1/admin/users',
    '/public/..;x=y/admin',
    '/public/.;x/admin',
    '/public/..;',
    '/public/.;',
    '/public/..;/',
    '/..;/admin',
    '/.;/admin',
    '/public/..;;x',
    '/public/..;../a',
    '/a/b/..;/..;/..;/c',
  ].map((path): [string, RegExp] => [
    `${HOST}${path}`,
    /path segment "\.\.?;[^"]*" is a "\." or "\.\." segment with a ";" parameter.*servlet/,
  ]),
  ...['/public/;x/admin', '/;x/admin', '/public/;/admin', '/public/;jsessionid=1/..a'].map((path): [string, RegExp] => [
    `${HOST}${path}`,
    /empty before its ";" parameter.*"\/\/"/,
  ]),
  // encoded dots mixed with plain ones, and with parameters
  [`${HOST}/public/.%2e/admin`, /encoded "\/", "\."/],
  [`${HOST}/public/%2e./admin`, /encoded/],
  [`${HOST}/public/%2E;/admin`, /encoded/],
  [`${HOST}/public/%2e%2e;x/admin`, /encoded/],
  // double (and deeper) encoding of "/", ".", "\" and NUL, any case, also
  // with the escape's digits themselves encoded
  ...[
    '%252e%252e',
    '%252E%252E',
    '%252e',
    '%252f',
    '%252F',
    '%255c',
    '%255C',
    '%2500',
    'a%252Fb',
    '%25252e',
    '%2525252F',
    '%25%32%65',
    '%25%32%45',
    '%25%32e',
    '%252%65',
    '%25%35%43',
    '.%252e',
    '%252e.',
  ].map((seg): [string, RegExp] => [
    `${HOST}/public/${seg}/admin`,
    /is percent-encoded twice into an encoded "\/", "\.", "\\" or NUL/,
  ]),
  [`${HOST}/public/%25u002e%25u002e/admin`, /"%u" escape.*IIS/],
  [`${HOST}/public/%25U002F`, /"%u" escape/],
  [`${HOST}/public/%${'25'.repeat(12)}41`, /still percent-encoded after 8 rounds/],
  // segments read as "." or ".." once decoded: an encoded ";" parameter, or
  // whitespace and invisible characters that servers trim or drop
  ...[
    '..%3B',
    '..%3b',
    '..%3Bx=1',
    '.%3Bx',
    '..%20',
    '%20..',
    '.%20',
    '..%09',
    '.%0A',
    '..%0D',
    '..%C2%A0',
    '..%E2%80%8B',
    '..%EF%BB%BF',
    '.%E2%80%AE.',
  ].map((seg): [string, RegExp] => [
    `${HOST}/public/${seg}/admin`,
    /is read as a "\." or "\.\." segment once percent-decoded/,
  ]),
  [`${HOST}/public/%3Bx/admin`, /empty segment with a ";" parameter once percent-decoded/],
  // percent-encoded bytes that are not valid UTF-8
  ...[
    '%C0%AE',
    '%c0%ae',
    '%C0%AE%C0%AE',
    '%C0%AF',
    '%C1%9C',
    '%E0%80%AE',
    '%F0%80%80%AE',
    '%80',
    '%BF',
    '%C3',
    '%C3x',
    '%E2%82',
    '%F0%9F%98',
    '%ED%A0%80',
    '%ED%BF%BF',
    '%ED%A0%BD%ED%B8%80',
    '%F4%90%80%80',
    '%F5%80%80%80',
    '%F8%88%80%80%80',
    '%FE',
    '%FF',
    'caf%E9',
    '%C3%A9%A9',
    '%25C0%25AE',
    '%25ED%25A0%2580',
  ].map((seg): [string, RegExp] => [`${HOST}/public/${seg}/x`, /not valid UTF-8.*encode text as UTF-8/]),
  // NFKC: dots, and "/" or "\" (the rule over every code point is tested below)
  ...[
    '%EF%BC%8E',
    '%ef%bc%8e%ef%bc%8e',
    '%EF%BC%8E.',
    '.%EF%BC%8E',
    '%E2%80%A4',
    '%E2%80%A4%E2%80%A4',
    '%E2%80%A5',
    '%EF%B9%92',
    '%EF%B8%B0',
    '%EF%BC%8E%EF%BC%8E;x',
    '..%EF%BC%9Bx',
    '..%CD%BE',
    '%25EF%25BC%258E',
  ].map((seg): [string, RegExp] => [
    `${HOST}/public/${seg}/admin`,
    /becomes a "\." or "\.\." segment under Unicode NFKC normalisation/,
  ]),
  ...[
    'a%EF%BC%8Fb',
    'a%EF%BC%BCb',
    'a%EF%B9%A8b',
    '%E2%84%85',
    '%E2%84%80',
    '%E2%84%81',
    '%E2%84%86',
    '%25ef%25bc%258f',
  ].map((seg): [string, RegExp] => [`${HOST}/public/${seg}`, /Unicode NFKC normalisation.*turns into "\/" or "\\"/]),
  ...['%EF%BC%852e', '%EF%BC%85%32%65', '%EF%BC%85%EF%BC%92%EF%BD%85', '%EF%B9%AA2F', '%EF%BC%855c'].map(
    (seg): [string, RegExp] => [
      `${HOST}/public/${seg}`,
      /becomes an encoded "\/", "\.", "\\" or NUL under Unicode NFKC/,
    ],
  ),
  // characters that would be sent encoded, or are not text at all
  [`${HOST}/a b`, /whitespace/],
  [`${HOST}/a\u00a0b`, /whitespace/],
  [`${HOST}/a\u3000b`, /whitespace/],
  [`${HOST}/a\tb`, /control/],
  [`${HOST}/a\nb`, /control/],
  [`${HOST}/a\rb`, /control/],
  [`${HOST}/a\u0000b`, /control/],
  [`${HOST}/a\r\nHost: evil.test`, /control/],
  [`${HOST}/x?q=1\r\nX: y`, /control/],
  ['https://api.exa\nmple.com/', /control/],
  [` ${HOST}/`, /whitespace/],
  [`${HOST}/ `, /whitespace/],
  [`${HOST}/caf\u00e9`, /path contains "\u00e9".*percent-encode/],
  [`${HOST}/a"b`, /path contains "\\"".*percent-encode/],
  [`${HOST}/a<b`, /path contains "<"/],
  [`${HOST}/a{b}`, /path contains "\{"/],
  [`${HOST}/a|b`, /path contains "\|"/],
  [`${HOST}/a^b`, /path contains "\^"/],
  [`${HOST}/a\`b`, /path contains "`"/],
  [`${HOST}/a[b]`, /path contains "\["/],
  [`${HOST}/a%zz`, /path has a "%" not followed by two hex digits/],
  [`${HOST}/a%2`, /path has a "%"/],
  [`${HOST}/a%`, /path has a "%"/],
  [`${HOST}/x?q=caf\u00e9`, /query contains "\u00e9"/],
  [`${HOST}/x?q=%zz`, /query has a "%"/],
  [`${HOST}/x?q=%`, /query has a "%"/],
  // length
  [`${HOST}/${'a'.repeat(MAX_URL_BYTES)}`, /longer than 16384 bytes/],
];

t.test('refused URLs: bad_request naming the url', async (t) => {
  for (const [url, why] of refused) {
    t.throws(() => parseTarget(url), Refusal, show(url));
    try {
      parseTarget(url);
    } catch (e) {
      t.equal((e as Refusal).code, 'bad_request', `${show(url)} code`);
      t.match((e as Error).message, /^url /, `${show(url)} names the field`);
      t.match((e as Error).message, why, `${show(url)} reason`);
      t.match((e as Error).message, /; |remove|use|write|fix|shorten|percent-encode/i, `${show(url)} says what to do`);
    }
  }
});

// Accepted hosts' verdicts are kept (a bounded number); a refused host is
// judged afresh. Interleaved, in reverse, and after the memory has been
// churned past its bound, every URL gets the verdict it got alone.
t.test('the same verdict for every URL however many hosts were parsed before it', async (t) => {
  const verdict = (url: string): string => {
    try {
      return JSON.stringify(parseTarget(url));
    } catch (e) {
      return `refused: ${(e as Error).message}`;
    }
  };
  const all = [...accepted.map(([u]) => u), ...refused.map(([u]) => u)];
  const alone = new Map(all.map((u) => [u, verdict(u)]));
  const churn = Array.from({ length: 600 }, (_, i) => `https://host-${i}.example.com/`);
  const wrong: string[] = [];
  for (const order of [
    [...all].reverse(),
    all.flatMap((u, i) => [u, churn[i % churn.length] as string]),
    [...churn, ...all],
  ])
    for (const u of order) if (alone.has(u) && verdict(u) !== alone.get(u)) wrong.push(show(u));
  t.same(wrong, [], 'no URL changed its verdict');
  // A host refused, then one accepted that differs only by what made the
  // first refused, then the refused one again.
  t.throws(() => parseTarget('https://api.exa%6dple.com/'), /percent-encoded host/);
  t.equal(parseTarget('https://api.example.com/').host, 'api.example.com');
  t.throws(() => parseTarget('https://api.exa%6dple.com/'), /percent-encoded host/);
  // What a caller does with its target does not reach the next one.
  const first = parseTarget('https://Kept.Example.com/a');
  (first as { host: string }).host = 'changed.example';
  t.equal(parseTarget('https://Kept.Example.com/b').host, 'kept.example.com');
});

t.test('the length limit is in bytes, and exactly the limit is accepted', async (t) => {
  const prefix = `${HOST}/`;
  const atLimit = prefix + 'a'.repeat(MAX_URL_BYTES - prefix.length);
  t.equal(Buffer.byteLength(atLimit), MAX_URL_BYTES);
  t.equal(parseTarget(atLimit).path.length, MAX_URL_BYTES - HOST.length);
  // Multi-byte host characters count as their UTF-8 bytes.
  const idn = `https://b\u00fccher.example/`;
  const padded = idn + 'a'.repeat(MAX_URL_BYTES - idn.length);
  t.equal(padded.length, MAX_URL_BYTES);
  t.throws(() => parseTarget(padded), { code: 'bad_request', message: /longer than 16384 bytes/ });
});

t.test('WHATWG URL agrees on host, port and path for every accepted URL', async (t) => {
  for (const [url] of accepted) {
    const got = parseTarget(url);
    const u = new URL(url);
    t.equal(u.pathname, got.path, `${show(url)} path`);
    t.equal(u.hostname.replace(/\.$/, ''), got.host, `${show(url)} host`);
  }
});

t.test('the messages never echo a long URL whole', async (t) => {
  const secretish = `${HOST}/${'s'.repeat(500)} tail`;
  try {
    parseTarget(secretish);
    t.fail('accepted');
  } catch (e) {
    t.notMatch((e as Error).message, /s{100}/);
  }
});

// The NFKC rule over every code point, computed here by scanning rather
// than listed: each character is sent percent-encoded as UTF-8 (the only way
// a non-ASCII character can be in a path).
const enc = (c: string): string => encodeURIComponent(c);
const nfkc = (c: string): string => c.normalize('NFKC');
function everyCodePoint(): string[] {
  const out: string[] = [];
  for (let cp = 0x80; cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp > 0xdfff) out.push(String.fromCodePoint(cp));
  return out;
}
const ALL = everyCodePoint();
const DOT_LIKE = ALL.filter((c) => nfkc(c) === '.' || nfkc(c) === '..');
const SEPARATOR_LIKE = ALL.filter((c) => /[/\\]/.test(nfkc(c)));
const SEMICOLON_LIKE = ALL.filter((c) => nfkc(c).startsWith(';'));
const PERCENT_LIKE = ALL.filter((c) => nfkc(c) === '%');

function refusal(url: string): Refusal | null {
  try {
    parseTarget(url);
    return null;
  } catch (e) {
    return e as Refusal;
  }
}

function codePoints(chars: string[]): string {
  return chars.map((c) => `U+${(c.codePointAt(0) as number).toString(16).toUpperCase()}`).join(' ');
}

t.test('the scan finds the known characters (a sanity check of the scan itself)', async (t) => {
  t.equal(ALL.length, 0x110000 - 0x80 - 0x800);
  for (const c of ['\uff0e', '\u2024', '\ufe52', '\u2025', '\ufe30']) t.ok(DOT_LIKE.includes(c), codePoints([c]));
  for (const c of ['\uff0f', '\uff3c', '\ufe68', '\u2100', '\u2105']) t.ok(SEPARATOR_LIKE.includes(c), codePoints([c]));
  t.notOk(SEPARATOR_LIKE.includes('\u2044'), 'FRACTION SLASH stays itself under NFKC');
  t.ok(SEMICOLON_LIKE.includes('\u037e') && SEMICOLON_LIKE.includes('\uff1b'));
  t.ok(PERCENT_LIKE.includes('\uff05'));
  t.comment(`NFKC "." or "..": ${codePoints(DOT_LIKE)}; "/" or "\\": ${codePoints(SEPARATOR_LIKE)}`);
});

t.test(
  'every code point whose NFKC form is "." or ".." is refused as a segment, alone, doubled or beside a dot',
  async (t) => {
    const wrong: string[] = [];
    for (const c of DOT_LIKE) {
      const e = enc(c);
      const forms = [e, `${e};x`, ...(nfkc(c) === '.' ? [`.${e}`, `${e}${e}`, `${e}.`] : [])];
      for (const seg of forms) {
        for (const path of [`/public/${seg}/admin`, `/public/${seg}`]) {
          const r = refusal(`${HOST}${path}`);
          if (r?.code !== 'bad_request' || !/NFKC/.test(r.message))
            wrong.push(`${path}: ${r ? `${r.code} ${r.message}` : 'accepted'}`);
        }
      }
    }
    t.same(wrong, []);
    // Three dots in any spelling are a name.
    t.equal(
      parseTarget(`${HOST}/public/${enc('\u2024')}${enc('\u2024')}${enc('\u2024')}`).path,
      `/public/${enc('\u2024').repeat(3)}`,
    );
  },
);

t.test('every code point whose NFKC form has "/" or "\\" is refused anywhere in a segment', async (t) => {
  const wrong: string[] = [];
  for (const c of SEPARATOR_LIKE) {
    for (const path of [`/public/a${enc(c)}b/x`, `/public/${enc(c)}`]) {
      const r = refusal(`${HOST}${path}`);
      if (r?.code !== 'bad_request' || !/NFKC normalisation.*"\/" or "\\"/.test(r.message))
        wrong.push(`${path}: ${r ? `${r.code} ${r.message}` : 'accepted'}`);
    }
  }
  t.same(wrong, []);
});

t.test('NFKC semicolons put a parameter on a dot segment; NFKC percent signs make encoded separators', async (t) => {
  const wrong: string[] = [];
  const expectRefused = (path: string, why: RegExp): void => {
    const r = refusal(`${HOST}${path}`);
    if (r?.code !== 'bad_request' || !why.test(r.message))
      wrong.push(`${path}: ${r ? `${r.code} ${r.message}` : 'accepted'}`);
  };
  const expectAccepted = (path: string): void => {
    const r = refusal(`${HOST}${path}`);
    if (r) wrong.push(`${path}: ${r.code} ${r.message}`);
  };
  for (const c of SEMICOLON_LIKE) {
    expectRefused(`/public/..${enc(c)}x/admin`, /"\." or "\.\." segment under Unicode NFKC/);
    expectRefused(`/public/.${enc(c)}`, /"\." or "\.\." segment under Unicode NFKC/);
    expectRefused(`/public/${enc(c)}x/admin`, /empty segment with a ";" parameter once NFKC-normalised/);
    expectAccepted(`/public/a${enc(c)}b/c`);
  }
  for (const c of PERCENT_LIKE) {
    for (const hex of ['2e', '2E', '2f', '5c', '00'])
      expectRefused(`/public/a${enc(c)}${hex}`, /encoded "\/", "\.", "\\" or NUL under Unicode NFKC/);
    expectAccepted(`/public/a${enc(c)}41`);
  }
  t.same(wrong, []);
});

// The whole range through the shared rule (parseTarget's and the path
// rules' check), the Basic Multilingual Plane also through parseTarget.
t.test('every other code point is accepted alone as a segment, sent as written', async (t) => {
  const special = new Set([...DOT_LIKE, ...SEPARATOR_LIKE, ...SEMICOLON_LIKE]);
  const wrong: string[] = [];
  let accepted = 0;
  for (const c of ALL) {
    if (special.has(c)) continue;
    const path = `/public/${enc(c)}/x`;
    const p = pathFormProblem(path);
    if (p) wrong.push(`${path}: ${p.problem}`);
    else accepted++;
    if ((c.codePointAt(0) as number) > 0xffff) continue;
    try {
      if (parseTarget(`${HOST}${path}`).path !== path) wrong.push(`${path}: changed`);
    } catch (e) {
      wrong.push(`${path}: ${(e as Error).message}`);
    }
  }
  t.same(wrong.slice(0, 20), [], `${wrong.length} wrongly refused`);
  t.equal(accepted, ALL.length - special.size);
});

t.test(
  '".." followed by any code point: refused exactly when servers may drop it (whitespace, control, invisible) or it is a parameter or separator',
  async (t) => {
    // What a server may trim or drop: whitespace at the ends, control and
    // format (invisible) characters anywhere, also after NFKC.
    const droppable = (s: string): boolean => /^[\s\p{Cc}\p{Cf}]+$/u.test(s);
    const wrong: string[] = [];
    let refusedCount = 0;
    for (const c of ALL) {
      const n = nfkc(c);
      const expected = droppable(c) || droppable(n) || /[/\\]/.test(n) || n.startsWith(';');
      const p = pathFormProblem(`/public/..${enc(c)}/x`);
      if ((p !== null) !== expected) wrong.push(`${codePoints([c])}: ${p ? p.problem : 'accepted'}`);
      if (p) {
        refusedCount++;
        // The same verdict, code and all, through the URL parser.
        const r = refusal(`${HOST}/public/..${enc(c)}/x`);
        if (r?.code !== 'bad_request') wrong.push(`${codePoints([c])}: parseTarget ${r ? r.code : 'accepted'}`);
      }
    }
    t.same(wrong.slice(0, 20), [], `${wrong.length} disagreements`);
    t.ok(refusedCount > 100, `${refusedCount} refused`);
  },
);
