// The redaction acceptance suite (SPEC §6.4, §6.1 step 9), through the real
// daemon: an upstream that echoes what it received — the Authorization
// header ("Bearer …", or Basic decoded to "user:secret"), the injected
// query parameter, the raw URL and the body — back in every listed
// encoding (raw; base64 and base64url, padded or not, after 0, 1 and 2
// bytes; base32 padded or not, in either case, after 0 to 4 bytes; hex
// lower and upper; percent-encoded fully in either case and partly, and
// twice; form-encoded; JSON-escaped, \u-escaped throughout in either case,
// with \/; \x-escaped fully and partly; HTML numeric references, decimal
// and hex, fully and partly; UTF-16LE and UTF-16BE), in the body and in
// headers (a header name too, Set-Cookie, and Location on a 3xx); the body
// identity, gzip, deflate (zlib and raw), br or "gzip, br", whole or in
// chunks written 50 ms apart with boundaries inside the secret. Three
// credentials, one per injection form, on one stack, each secret holding
// characters encodings treat specially. No form of any secret reaches the
// agent, the daemon log or the journal; redaction off really returns the
// secret, each form on its own line where the detector sees it.
import t, { Test } from 'tap';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { startStack, Stack } from '../helpers/stack';
import { cli } from '../helpers/postern';
import { filesUnder, journalBytes, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { CODINGS, echoHandler, encodings, makeSecret, type Coding } from '../helpers/echo-upstream';
import type { AgentResponse } from '../../daemon/pipeline/response';

// The encodings added by SPEC §6.4 revision 2, and where the detector must
// find each when it comes back unredacted (a view or form of its own).
const NEW_FORMS: [RegExp, RegExp][] = [
  [/^base32/, /^base32@\d in as-is of/],
  [/^pct-twice/, /^raw in as-is\+percent-twice of/],
  [/^x-/, /^raw in as-is\+x of/],
  [/^html-/, /^raw in as-is\+html of/],
  [/^utf16le$/, /^raw in utf16le@[01] of/],
  [/^utf16be$/, /^raw in utf16be@[01] of/],
];

// ---- The agent's side.
type Reply = AgentResponse;

const CREDS = [
  { name: 'api', inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"', secret: makeSecret('APITOKEN') },
  { name: 'basic', inject: 'basic_user = "bob"', secret: makeSecret('BASICPW') },
  { name: 'q', inject: 'query = "key"', secret: makeSecret('QUERYKEY') },
  // Non-ASCII: UTF-8 on the wire, \u escapes (a surrogate pair too) in JSON.
  { name: 'uq', inject: 'query = "key"', secret: makeSecret('ÜNÏCØDÉ_€_😀') },
];
const COOKIES = {
  name: 'cookies',
  inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"',
  secret: makeSecret('COOKIETOKEN'),
  extra: 'pass_set_cookie = true\n',
};
const PLAIN = {
  name: 'plain',
  inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"',
  secret: makeSecret('PLAINTOKEN'),
  extra: 'redact_response = false\n',
};
const ALL = [...CREDS, COOKIES, PLAIN];

let s: Stack;
const replies: string[] = [];

async function call(credential: string, path: string): Promise<{ status: number; json: unknown; text: string }> {
  const r = await s.request({
    credential,
    method: 'POST',
    url: s.url('api.example.test', path),
    headers: { 'content-type': 'text/plain' },
    body: 'the agent body, nothing secret',
  });
  replies.push(r.text);
  return r;
}

function bodyOf(reply: Reply): Buffer {
  return Buffer.from(reply.body, reply.body_encoding === 'base64' ? 'base64' : 'utf8');
}

// Every check made on a redacted echo.
function redacted(
  t: Test,
  r: { status: number; json: unknown; text: string },
  name: string,
  secret: string,
  upstreamStatus = 200,
): Reply {
  t.equal(r.status, 200, `postern answered 200 ${r.text.slice(0, 200)}`);
  const reply = r.json as Reply;
  t.equal(reply.status, upstreamStatus, 'the upstream status');
  t.same(exposures(r.text, secret), [], 'no form of the secret reaches the agent');
  t.ok(reply.redactions >= 1, `redactions counted (${reply.redactions})`);
  t.ok(bodyOf(reply).includes(`[REDACTED:${name}]`), 'the body carries the mark');
  t.equal(reply.truncated, false, 'not truncated');
  const marked = Object.entries(reply.headers).filter(
    ([k, v]) => k.includes(`[REDACTED:${name}]`) || [v].flat().some((x) => x.includes(`[REDACTED:${name}]`)),
  );
  t.ok(marked.length >= 5, `headers carry the mark (${marked.length})`);
  return reply;
}

t.before(async () => {
  s = await startStack({ handler: echoHandler });
  for (const c of ALL) {
    s.addCredential(
      c.name,
      `name = "${c.name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n${'extra' in c ? c.extra : ''}[inject]\n${c.inject}\n` +
        `[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
      c.secret,
    );
  }
  await s.approver();
});
t.teardown(() => s.close());

t.test('the secrets hold the characters encodings treat specially', async (t) => {
  for (const c of ALL) t.match(c.secret, /\/.*\+.*=.* .*".*\\.*%.*&/);
});

for (const c of CREDS) {
  t.test(`${c.name}: every encoding, coding and chunking is redacted`, async (t) => {
    const variants: [Coding, boolean, string][] = [
      ...CODINGS.flatMap((coding): [Coding, boolean, string][] => [
        [coding, false, 'text'],
        [coding, true, 'text'],
      ]),
      ['identity', false, 'bin'],
      ['gzip', true, 'bin'],
    ];
    for (const [coding, split, type] of variants) {
      await t.test(`${coding}, ${split ? 'in pieces 50 ms apart' : 'whole'}, ${type}`, async (t) => {
        const before = s.up.requests.length;
        const r = await call(
          c.name,
          `/v1/echo?coding=${encodeURIComponent(coding)}&split=${split ? 1 : 0}&type=${type}`,
        );
        t.equal(s.up.requests.length, before + 1, 'the upstream saw the request');
        const seen = s.up.requests.at(-1)!;
        const auth = String(seen.headers['authorization'] ?? '');
        if (c.name === 'api') t.equal(auth, `Bearer ${c.secret}`, 'the upstream received the secret');
        if (c.name === 'basic')
          t.equal(
            Buffer.from(auth.slice(6), 'base64').toString(),
            `bob:${c.secret}`,
            'the upstream received the secret',
          );
        if (c.inject.startsWith('query'))
          t.equal(
            decodeURIComponent(/[?&]key=([^&]*)/.exec(seen.url)?.[1] ?? ''),
            c.secret,
            'the upstream received the secret',
          );
        const reply = redacted(t, r, c.name, c.secret);
        t.equal(reply.body_encoding, type === 'bin' ? 'base64' : 'utf8');
        t.equal(reply.headers['content-encoding'], undefined, 'no content-encoding comes back');
        t.equal(reply.headers['set-cookie'], undefined, 'Set-Cookie is removed');
        t.ok(`x-name-[REDACTED:${c.name}]` in reply.headers, 'the header named after the secret is renamed');
        // Each encoded source gives one line per encoding and one JSON line.
        const lines = (c.inject.startsWith('query') ? 1 : 2) * (encodings(c.secret).length + 1);
        t.ok(reply.redactions >= lines, `every echoed line redacted (${reply.redactions} >= ${lines})`);
      });
    }
  });

  t.test(`${c.name}: a 3xx with the secret in Location`, async (t) => {
    const r = await call(c.name, '/v1/redirect');
    const reply = redacted(t, r, c.name, c.secret, 302);
    t.ok(reply.redirect, 'the redirect is returned, not followed');
    t.match(
      reply.redirect?.location,
      new RegExp(`^https://callback\\.example/done\\?t=\\[REDACTED:${c.name}\\]&h=\\[REDACTED:${c.name}\\]&b=`),
    );
    t.match(reply.redirect?.location, new RegExp(`&raw=\\[REDACTED:${c.name}\\]$`));
    t.equal(reply.headers['location'], reply.redirect?.location, 'the same in headers');
    t.same(exposures(reply.redirect?.location ?? '', c.secret), []);
  });
}

t.test('pass_set_cookie: Set-Cookie comes back, redacted', async (t) => {
  const r = await call(COOKIES.name, '/v1/echo?coding=gzip&split=1');
  const reply = redacted(t, r, COOKIES.name, COOKIES.secret);
  const cookies = reply.headers['set-cookie'];
  t.ok(Array.isArray(cookies) && cookies.length === 2, `two Set-Cookie values (${JSON.stringify(cookies)})`);
  t.same(cookies, [`sid=[REDACTED:${COOKIES.name}]; Path=/; HttpOnly`, `raw=[REDACTED:${COOKIES.name}]; Secure`]);
});

t.test('redact_response = false returns the secret: the detector sees every form', async (t) => {
  for (const path of [
    '/v1/echo?coding=identity&split=0',
    '/v1/echo?coding=gzip&split=1',
    '/v1/echo?coding=br&split=0&type=bin',
  ]) {
    const r = await call(PLAIN.name, path);
    t.equal(r.status, 200);
    const reply = r.json as Reply;
    t.equal(reply.redactions, 0, `${path}: nothing redacted`);
    t.notOk(r.text.includes('[REDACTED'), 'no mark');
    const found = exposures(r.text, PLAIN.secret);
    for (const form of [
      'raw',
      'hex',
      'base64@0',
      'base64@1',
      'base64@2',
      'base64url@0',
      'base64url@1',
      'base64url@2',
      'base32@0',
      'base32@1',
      'base32@2',
      'base32@3',
      'base32@4',
    ]) {
      t.ok(
        found.some((f) => f.startsWith(`${form} in `)),
        `${path}: ${form} found`,
      );
    }
    for (const view of ['percent', 'json', 'form'])
      t.ok(
        found.some((f) => f.includes(` in ${view} of `)),
        `${path}: found in the ${view} view`,
      );
    t.ok(bodyOf(reply).includes(PLAIN.secret), 'the raw secret is in the body');
    t.equal(reply.headers['x-echo-raw'], PLAIN.secret, 'and in a header');
    // Each line of a new encoding, on its own: not the raw secret, and seen
    // by the detector where that encoding is read.
    const lines = splitLines(bodyOf(reply));
    let checked = 0;
    for (const [name, bytes] of lines) {
      const enc = name.slice(name.indexOf(' ') + 1);
      const want = NEW_FORMS.find(([e]) => e.test(enc))?.[1];
      if (!want || !name.startsWith('token ')) continue;
      checked += 1;
      const seen = exposures(bytes, PLAIN.secret);
      t.notOk(
        seen.some((f) => f.startsWith('raw in as-is of')),
        `${path}: ${enc}: the line does not hold the secret raw`,
      );
      t.ok(
        seen.some((f) => want.test(f)),
        `${path}: ${enc}: the detector sees it (${want}) ${JSON.stringify(seen.slice(0, 3))}`,
      );
    }
    t.equal(
      checked,
      encodings(PLAIN.secret).filter(([e]) => NEW_FORMS.some(([n]) => n.test(e))).length,
      `${path}: every new encoding checked`,
    );
  }
});

// The echo body's lines by their "source encoding" name.
function splitLines(body: Buffer): [string, Buffer][] {
  const out: [string, Buffer][] = [];
  for (let from = 0; from < body.length;) {
    const nl = body.indexOf(0x0a, from);
    const line = body.subarray(from, nl < 0 ? body.length : nl);
    const colon = line.indexOf(': ');
    if (colon > 0) out.push([line.subarray(0, colon).toString('latin1'), line.subarray(colon + 2)]);
    from = nl < 0 ? body.length : nl + 1;
  }
  return out;
}

t.test('no form of any secret in the daemon log or the journal; the journal verifies', async (t) => {
  await s.d.stop();
  const audit = journalBytes(s.h.home);
  t.ok(audit.length > 0, 'the journal has entries');
  const decrypted = await journalText(s.h);
  t.ok(s.d.logs().length > 0, 'the daemon logged something');
  const files = filesUnder(s.h.home, (p) => p === join(s.h.home, 'vault'));
  for (const c of ALL) {
    t.same(exposures(s.d.logs(), c.secret), [], `${c.name}: daemon log`);
    t.same(exposures(audit, c.secret), [], `${c.name}: journal files`);
    t.same(exposures(decrypted, c.secret), [], `${c.name}: decrypted journal entries`);
    for (const f of files) t.same(exposures(readFileSync(f), c.secret), [], `${c.name}: ${f.slice(s.h.home.length)}`);
  }
  for (const c of [...CREDS, COOKIES])
    t.same(exposures(replies.join('\n'), c.secret), [], `${c.name}: no reply at all`);
  const v = cli(s.h, ['audit', 'verify']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});
