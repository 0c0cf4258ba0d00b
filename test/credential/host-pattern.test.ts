// Host names and patterns of credential definitions: normal forms that
// compare equal to what WHATWG URL makes of a request's host, and every
// shape of host that must be refused.
import t from 'tap';
import { parseHostPattern, parseSshHost, hostPatternMatches, normaliseUrlHost } from '../../shared/host-pattern';

function show(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

t.test('HTTP rule hosts: accepted and normalised', async (t) => {
  const good: [string, string, boolean][] = [
    ['api.github.com', 'api.github.com', false],
    ['API.GitHub.COM', 'api.github.com', false],
    ['example.com.', 'example.com', false],
    ['bücher.example', 'xn--bcher-kva.example', false],
    ['BÜCHER.example', 'xn--bcher-kva.example', false],
    ['xn--bcher-kva.example', 'xn--bcher-kva.example', false],
    ['localhost', 'localhost', false],
    ['a_b.example.com', 'a_b.example.com', false],
    ['*.example.com', '*.example.com', true],
    ['*.Example.COM.', '*.example.com', true],
    ['*.bücher.example', '*.xn--bcher-kva.example', true],
    ['*.co.uk', '*.co.uk', true],
    ['192.0.2.1', '192.0.2.1', false],
    ['192.0.2.1.', '192.0.2.1', false],
    ['[2001:DB8::1]', '[2001:db8::1]', false],
    ['2001:db8:0:0:0:0:0:1', '[2001:db8::1]', false],
    ['::1', '[::1]', false],
    ['::ffff:127.0.0.1', '[::ffff:7f00:1]', false],
  ];
  for (const [input, host, wildcard] of good) {
    const r = parseHostPattern(input);
    t.same(r, { ok: true, value: { host, wildcard, ip: r.ok ? r.value.ip : null } }, show(input));
  }
});

t.test('HTTP rule hosts: refused with a reason', async (t) => {
  const bad: [unknown, RegExp][] = [
    ['', /is empty/],
    ['*', /whole first label/],
    ['*.com', /at least two labels/],
    ['*.com.', /at least two labels/],
    ['*.', /not a valid host name/],
    ['a.*.com', /whole first label/],
    ['foo*.com', /whole first label/],
    ['*foo.example.com', /whole first label/],
    ['**.example.com', /whole first label/],
    ['*.*.example.com', /whole first label/],
    [' example.com', /whitespace/],
    ['exa mple.com', /whitespace/],
    ['example.com\n', /whitespace/],
    ['exa\u0000mple.com', /control/],
    ['exa\u200bmple.com', /invisible/],
    ['example.com:443', /must not contain a port/],
    ['[::1]:443', /must not contain a port/],
    ['[::1', /unclosed/],
    ['user@example.com', /userinfo/],
    ['https://example.com', /without scheme or path/],
    ['example.com/x', /without scheme or path/],
    ['example.com?x', /character a host name cannot have/],
    ['a%2eb.com', /character a host name cannot have/],
    ['a\\b.com', /character a host name cannot have/],
    ['example..com', /empty label/],
    ['.example.com', /empty label/],
    ['example.com..', /empty label/],
    ['-a.example.com', /may not start or end with "-"/],
    ['a-.example.com', /may not start or end with "-"/],
    ['a!b.example.com', /may contain only letters/],
    [`${'a'.repeat(64)}.com`, /longer than 63/],
    [`${'a.'.repeat(127)}com`, /longer than 253/],
    ['xn--zz.com', /not a valid host name/],
    ['127.1', /four decimal numbers/],
    ['0x7f.0.0.1', /four decimal numbers/],
    ['010.0.0.1', /four decimal numbers/],
    ['256.1.1.1', /four decimal numbers/],
    ['1.2.3', /four decimal numbers/],
    ['foo.123', /last label is a number/],
    ['2130706433', /four decimal numbers/],
    ['*.192.0.2.1', /cannot be combined with an IP/],
    ['fe80::1%eth0', /zone id/],
    ['[fe80::1%25eth0]', /zone id/],
    ['1:2:3:4:5:6:7:8:9', /not a valid IPv6/],
    ['[example.com]', /not a valid IPv6/],
    [42, /must be a string/],
  ];
  for (const [input, message] of bad) {
    const r = parseHostPattern(input);
    t.equal(r.ok, false, show(input));
    if (!r.ok) t.match(r.problem, message, show(input));
  }
});

t.test('SSH hosts: one host, IPv6 bare, no wildcard', async (t) => {
  t.same(parseSshHost('Build.Example.com.'), {
    ok: true,
    value: { host: 'build.example.com', wildcard: false, ip: null },
  });
  t.same(parseSshHost('[2001:db8::1]'), { ok: true, value: { host: '2001:db8::1', wildcard: false, ip: 6 } });
  t.same(parseSshHost('2001:DB8::1'), { ok: true, value: { host: '2001:db8::1', wildcard: false, ip: 6 } });
  t.same(parseSshHost('192.0.2.7'), { ok: true, value: { host: '192.0.2.7', wildcard: false, ip: 4 } });
  const star = parseSshHost('*.example.com');
  t.equal(star.ok, false);
  if (!star.ok) t.match(star.problem, /wildcards are only for HTTP/);
  const port = parseSshHost('build.example.com:2222');
  t.equal(port.ok, false);
  if (!port.ok) t.match(port.problem, /set port = N/);
});

t.test('a normalised rule host equals the host URL parsing gives the request', async (t) => {
  const pairs: [string, string][] = [
    ['bücher.example', 'https://BÜCHER.example./x'],
    ['API.GitHub.com', 'https://api.github.com/'],
    ['2001:db8::1', 'https://[2001:0db8:0::1]:8443/'],
    ['192.0.2.1', 'http://192.0.2.1/'],
  ];
  for (const [ruleHost, url] of pairs) {
    const r = parseHostPattern(ruleHost);
    if (!r.ok) throw new Error(r.problem);
    t.ok(hostPatternMatches(r.value.host, new URL(url).hostname), `${show(ruleHost)} covers ${show(url)}`);
  }
});

t.test('hostPatternMatches', async (t) => {
  const rows: [string, string, boolean][] = [
    ['*.example.com', 'a.example.com', true],
    ['*.example.com', 'a.b.example.com', true],
    ['*.example.com', 'a.example.com.', true],
    ['*.example.com', 'example.com', false],
    ['*.example.com', 'aexample.com', false],
    ['*.example.com', '.example.com', false],
    ['*.example.com', 'example.com.evil.net', false],
    ['*.example.com', 'a.example.co', false],
    ['api.example.com', 'api.example.com', true],
    ['api.example.com', 'api.example.com.', true],
    ['api.example.com', 'x.api.example.com', false],
    ['api.example.com', 'api.example.com.evil.net', false],
    ['192.0.2.1', '192.0.2.1', true],
    ['192.0.2.1', '192.0.2.10', false],
    ['[::1]', '[::1]', true],
    ['[::1]', '[::2]', false],
  ];
  for (const [pattern, host, expected] of rows)
    t.equal(hostPatternMatches(pattern, host), expected, `${pattern} vs ${host}`);
  t.equal(normaliseUrlHost('example.com.'), 'example.com');
  t.equal(normaliseUrlHost('example.com'), 'example.com');
});
