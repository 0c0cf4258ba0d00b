// The agent's `url`: what postern will send, and every shape that must be
// refused rather than repaired (SPEC §4 path rules, §6.2 URL rules).
import t from 'tap';
import { parseTarget, Target, MAX_URL_BYTES } from '../../daemon/pipeline/target';
import { Refusal } from '../../shared/errors';

function show(value: string): string {
  const s = JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
}

type Expect = Partial<Target>;

const accepted: [string, Expect][] = [
  ['https://api.example.com/v1/items?page=2', { scheme: 'https', host: 'api.example.com', hostKind: 'name', port: 443, path: '/v1/items', query: '?page=2' }],
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
    t.ok(url.endsWith(got.path + got.query) || (got.path === '/' && url.endsWith(got.query)), `${show(url)} sent as written`);
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
