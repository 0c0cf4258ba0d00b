// Hostile paths through the real daemon (SPEC §4 `paths`): with the rule
// `/public/*`, every path some origin reads as another path than the rule
// saw is refused with 400 bad_request before anything is sent: dot
// segments with servlet ";" parameters, encoded and double-encoded
// separators, percent-encoded bytes that are not valid UTF-8, and segments
// NFKC normalisation turns into "." or ".." or that it gives a "/" or "\"
// (the characters found by scanning every code point). Look-alikes reach
// the upstream as written, with the secret injected.
//
// Each row asserts the exact status and code; a refusal is journaled and
// the upstream sees no request and no connection (runRows). No refusal, no
// daemon log line and no decrypted journal entry holds any form of the
// secret (findCanary in runRows, and the independent detector here).
import t from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { Row, runRows } from '../helpers/request-rows';

const enc = (c: string): string => encodeURIComponent(c);

// Non-ASCII characters whose NFKC form is "." or "..", or holds "/" or "\".
function nfkcCharacters(): { dots: string[]; separators: string[] } {
  const dots: string[] = [];
  const separators: string[] = [];
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    const n = c.normalize('NFKC');
    if (n === '.' || n === '..') dots.push(c);
    if (/[/\\]/.test(n)) separators.push(c);
  }
  return { dots, separators };
}

const LEGIT = [
  '/public/items',
  '/public/a.b',
  '/public/...',
  '/public/..a',
  '/public/a..;x',
  '/public/a;b=c',
  '/public/a;b=c/d',
  '/public/x;..',
  '/public/;jsessionid=1',
  '/public/%C3%A9',
  '/public/%2Bplus',
  '/public/%2520',
  '/public/%2541',
  '/public/%E2%80%A6',
  '/public/a%EF%BC%8Eb',
  '/public/%F0%9F%98%80',
  '/public/%3B',
];

function rows(P: number, secret: string): Row[] {
  const req = (path: string): Record<string, unknown> => ({
    credential: 'pub',
    method: 'GET',
    url: `https://api.example.test:${P}${path}`,
  });
  const bad = (path: string, message: RegExp): Row => ({
    what: path,
    req: req(path),
    status: 400,
    code: 'bad_request',
    message,
  });
  const ok = (path: string): Row => ({
    what: `${path} (a look-alike) reaches the upstream as written`,
    req: req(path),
    status: 200,
    seen: (t, seen) => {
      t.equal(seen.url, path, 'the path is sent as written');
      t.equal(seen.headers['authorization'], `Bearer ${secret}`, 'with the secret injected');
    },
  });
  const servlet = /is a "\." or "\.\." segment with a ";" parameter, which servlet servers/;
  const twice = /is percent-encoded twice into an encoded "\/", "\.", "\\" or NUL/;
  const utf8 = /not valid UTF-8/;
  const nfkcDot = /becomes a "\." or "\.\." segment under Unicode NFKC normalisation/;
  const nfkcSeparator = /NFKC normalisation.*turns into "\/" or "\\"/;
  const { dots, separators } = nfkcCharacters();
  return [
    // What broke (issue 11, item 3).
    bad('/public/..;/admin/users', servlet),
    bad('/public/.;/..;/admin/users', servlet),
    bad('/public/..;jsessionid=1/admin/users', servlet),
    bad('/public/%252e%252e/admin/users', twice),
    bad('/public/%c0%ae%c0%ae/admin/users', utf8),
    bad('/public/%ef%bc%8e%ef%bc%8e/admin/users', nfkcDot),
    // ";" parameters on dot segments anywhere.
    ...[
      '/public/..;x=y/admin',
      '/public/.;x/admin',
      '/public/..;',
      '/public/.;',
      '/public/..;/',
      '/public/a/..;/..;/admin',
      '/public/..;;x/admin',
      '/public/..;../admin',
    ].map((p) => bad(p, servlet)),
    bad('/public/;x/admin', /empty before its ";" parameter/),
    bad('/public/..%3B/admin', /read as a "\." or "\.\." segment once percent-decoded/),
    bad('/public/..%3b/admin', /once percent-decoded/),
    bad('/public/..%20/admin', /once percent-decoded/),
    bad('/public/..%09/admin', /once percent-decoded/),
    bad('/public/..%E2%80%8B/admin', /once percent-decoded/),
    // Encoded dots mixed with plain ones.
    ...[
      '/public/.%2e/admin',
      '/public/%2e./admin',
      '/public/%2E%2E/admin',
      '/public/%2e%2e;/admin',
      '/public/a%2Fb',
      '/public/a%5cb',
    ].map((p) => bad(p, /encoded "\/", "\.", "\\" or NUL/)),
    // Double and deeper encoding, any case, also with the digits encoded.
    ...[
      '%252E%252E',
      '%252e',
      '%252f',
      '%252F',
      '%255c',
      '%255C',
      '%2500',
      '%25252e',
      '%2525252F',
      '%25%32%65',
      '%25%32%45',
      '%252%65',
      '.%252e',
    ].map((s) => bad(`/public/${s}/admin`, twice)),
    bad('/public/%25u002e%25u002e/admin', /"%u" escape/),
    bad(`/public/%${'25'.repeat(12)}2e`, /still percent-encoded after 8 rounds/),
    // Percent-encoded bytes that are not valid UTF-8.
    ...[
      '%C0%AE',
      '%C0%AF',
      '%C1%9C',
      '%E0%80%AE',
      '%F0%80%80%AE',
      '%80',
      '%C3',
      '%E2%82',
      '%ED%A0%80',
      '%F4%90%80%80',
      '%FF',
      'caf%E9',
      '%25C0%25AE',
    ].map((s) => bad(`/public/${s}/x`, utf8)),
    // NFKC: every character the scan finds, alone, doubled and beside a dot.
    ...dots.flatMap((c) => [bad(`/public/${enc(c)}/admin`, nfkcDot), bad(`/public/${enc(c)};x/admin`, nfkcDot)]),
    ...dots
      .filter((c) => c.normalize('NFKC') === '.')
      .flatMap((c) => [bad(`/public/${enc(c)}${enc(c)}/admin`, nfkcDot), bad(`/public/.${enc(c)}/admin`, nfkcDot)]),
    ...separators.map((c) => bad(`/public/a${enc(c)}b/x`, nfkcSeparator)),
    bad('/public/..%EF%BC%9Bx/admin', nfkcDot),
    bad('/public/%EF%BC%852e/admin', /becomes an encoded "\/", "\.", "\\" or NUL under Unicode NFKC/),
    bad('/public/%25EF%25BC%258E/admin', nfkcDot),
    // Look-alikes that must pass.
    ...LEGIT.map(ok),
  ];
}

t.test('hostile paths through the real daemon', async (t) => {
  const s: Stack = await startStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('PATHTOKEN');
  s.addCredential(
    'pub',
    `name = "pub"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET"]\npaths = ["/public/*"]\n`,
    secret,
  );
  await s.approver();

  // Keep every refusal the daemon sends, for the independent detector.
  const refusals: string[] = [];
  const send = s.request;
  s.request = async (body) => {
    const r = await send(body);
    if (r.status !== 200) refusals.push(r.text);
    return r;
  };

  const table = rows(P, secret);
  await runRows(t, s, table, secret);

  const hostile = table.filter((r) => r.code !== undefined).length;
  t.equal(refusals.length, hostile, `all ${hostile} hostile paths were refused`);
  t.same(
    s.up.requests.map((r) => r.url).sort(),
    [...LEGIT].sort(),
    'the upstream saw exactly the look-alikes, once each',
  );
  t.same(
    refusals.flatMap((text) => exposures(text, secret)),
    [],
    'no refusal holds any form of the secret',
  );
  t.same(exposures(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(exposures(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
});
