// The redaction suite of test/http/canary-echo.test.ts through the proxy
// front door (SPEC §11 with §6.4), where the response is streamed to the
// client as it arrives instead of returned whole: the same upstream echoes
// what it received that carries the secret (Authorization Bearer, Basic
// decoded, the injected query parameter, raw and non-ASCII) back in every
// encoding, in the body and in headers (a header name, Set-Cookie, Location
// on a 3xx), under every Content-Encoding, whole or in pieces 50 ms apart
// with boundaries inside the secret's forms, as text and as bytes. The
// client speaks raw HTTP/1.1 through `postern run`'s HTTPS_PROXY with the
// placeholder in the credential's slot, so what is searched is every byte
// it received after TLS: the head as sent and the body with the chunk
// framing undone (a form cut by a chunk boundary would otherwise hide from
// the search). No form of any secret reaches the client, the daemon log or
// the journal; redaction off really returns the secret, so the search can
// fail.
import t, { Test } from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { cli } from '../helpers/postern';
import { journalBytes, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { CODINGS, echoHandler, makeSecret, type Coding } from '../helpers/echo-upstream';
import { parseRaw, sendRaw, type Answer, type Parsed, type Wire } from '../helpers/proxy-raw-client';

const HOST = 'api.example.test';
const AGENT_BODY = 'the agent body, nothing secret';

interface Cred {
  name: string;
  env: string;
  inject: string;
  secret: string;
  extra?: string;
  // Where the client puts its placeholder (see proxy-raw-client's fill).
  slot: { header?: string; query?: string };
}

const CREDS: Cred[] = [
  {
    name: 'api',
    env: 'API_TOKEN',
    inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"',
    secret: makeSecret('APITOKEN'),
    slot: { header: 'Authorization: Bearer @@PH:API_TOKEN@@' },
  },
  {
    name: 'basic',
    env: 'BASIC_TOKEN',
    inject: 'basic_user = "bob"',
    secret: makeSecret('BASICPW'),
    slot: { header: 'Authorization: Basic @@B64:bob:BASIC_TOKEN@@' },
  },
  {
    name: 'q',
    env: 'Q_TOKEN',
    inject: 'query = "key"',
    secret: makeSecret('QUERYKEY'),
    slot: { query: 'key=@@PH:Q_TOKEN@@' },
  },
  // Non-ASCII: UTF-8 on the wire, \u escapes (a surrogate pair too) in JSON.
  {
    name: 'uq',
    env: 'UQ_TOKEN',
    inject: 'query = "key"',
    secret: makeSecret('ÜNÏCØDÉ_€_😀'),
    slot: { query: 'key=@@PH:UQ_TOKEN@@' },
  },
];
const PLAIN: Cred = {
  name: 'plain',
  env: 'PLAIN_TOKEN',
  inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"',
  secret: makeSecret('PLAINTOKEN'),
  extra: 'redact_response = false\n',
  slot: { header: 'Authorization: Bearer @@PH:PLAIN_TOKEN@@' },
};
const ALL = [...CREDS, PLAIN];

// Every delivery of the echo: each coding whole and in pieces, as text;
// two as bytes.
const VARIANTS: [Coding, boolean, string][] = [
  ...CODINGS.flatMap((coding): [Coding, boolean, string][] => [
    [coding, false, 'text'],
    [coding, true, 'text'],
  ]),
  ['identity', false, 'bin'],
  ['gzip', true, 'bin'],
];

interface Call {
  cred: Cred;
  path: string;
  what: string;
}

function wire(id: number, c: Call, port: number): Wire {
  const target = c.cred.slot.query ? `${c.path}${c.path.includes('?') ? '&' : '?'}${c.cred.slot.query}` : c.path;
  const lines = [
    `POST ${target} HTTP/1.1`,
    `Host: ${HOST}:${port}`,
    ...(c.cred.slot.header ? [c.cred.slot.header] : []),
    'Content-Type: text/plain',
    `Content-Length: ${Buffer.byteLength(AGENT_BODY)}`,
  ];
  return {
    id,
    connect: `${HOST}:${port}`,
    head: lines.join('\r\n') + '\r\n\r\n',
    body: Buffer.from(AGENT_BODY).toString('base64'),
  };
}

// Everything the client received that a form of the secret could hide in.
function received(r: Parsed): Buffer {
  return Buffer.concat([Buffer.from(r.head, 'latin1'), Buffer.from('\r\n\r\n'), r.bodyBytes]);
}

let s: Stack;
const calls: Call[] = [];
const answers = new Map<number, Answer>();
let runOutput: Buffer = Buffer.alloc(0);

t.before(async () => {
  s = await startStack({ handler: echoHandler });
  for (const c of ALL) {
    s.addCredential(
      c.name,
      `name = "${c.name}"\nkind = "http"\nenv = ["${c.env}"]\nallow_addresses = ["127.0.0.1/32"]\n${c.extra ?? ''}[inject]\n${c.inject}\n` +
        `[[allow]]\nhost = "${HOST}"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
      c.secret,
    );
  }
  await s.approver();
  for (const cred of ALL) {
    for (const [coding, split, type] of VARIANTS)
      calls.push({
        cred,
        path: `/v1/echo?coding=${encodeURIComponent(coding)}&split=${split ? 1 : 0}&type=${type}`,
        what: `${coding}, ${split ? 'in pieces 50 ms apart' : 'whole'}, ${type}`,
      });
    calls.push({ cred, path: '/v1/redirect', what: 'a 3xx with the secret in Location' });
  }
  const run = await sendRaw(
    s.h,
    calls.map((c, id) => wire(id, c, s.up.port)),
  );
  if (run.code !== 0) throw new Error(`postern run exited ${run.code}: ${run.stderr}`);
  for (const [id, a] of run.answers) answers.set(Number(id), a);
  runOutput = Buffer.concat([run.stdout, Buffer.from(run.stderr)]);
});
t.teardown(() => s.close());

function answerOf(t: Test, id: number): Parsed | null {
  const a = answers.get(id);
  if (!a || a.error || !a.raw) {
    t.fail(`no complete answer (${a?.error ?? 'none'})`);
    return null;
  }
  return parseRaw(Buffer.from(a.raw, 'base64'));
}

t.test('every call was answered', async (t) => {
  t.equal(answers.size, calls.length);
});

for (const cred of CREDS) {
  t.test(`${cred.name}: every encoding, coding and chunking is redacted as it streams`, async (t) => {
    for (const [id, c] of calls.entries()) {
      if (c.cred !== cred) continue;
      await t.test(c.what, async (t) => {
        const r = answerOf(t, id);
        if (!r) return;
        const redirect = c.path === '/v1/redirect';
        t.equal(r.status, redirect ? 302 : 200, r.head + r.body);
        t.notOk(r.headers['x-postern-error'], 'no refusal');
        t.same(exposures(received(r), cred.secret), [], 'no form of the secret reaches the client');
        const mark = `[REDACTED:${cred.name}]`;
        t.ok(r.bodyBytes.includes(mark), 'the body carries the mark');
        const marked = r.head.split('\r\n').filter((l) => l.includes(mark));
        t.ok(marked.length >= 5, `header lines carry the mark (${marked.length})`);
        t.equal(r.headers['content-encoding'], undefined, 'no content-encoding comes back (the coding was undone)');
        t.equal(r.headers['set-cookie'], undefined, 'Set-Cookie is removed');
        // A name is a token on the wire: the mark written as one.
        t.ok(
          r.head.includes(`\r\nx-name-redacted-${cred.name}: 1\r\n`) ||
            r.head.endsWith(`\r\nx-name-redacted-${cred.name}: 1`),
          'the header named after the secret is renamed, its mark a token',
        );
        if (redirect) {
          t.match(
            r.headers['location'],
            new RegExp(
              `^https://callback\\.example/done\\?t=\\[REDACTED:${cred.name}\\]&h=\\[REDACTED:${cred.name}\\]&b=`,
            ),
            'Location redacted, not followed',
          );
        }
      });
    }
  });
}

t.test('redact_response = false returns the secret through the proxy: the search can fail', async (t) => {
  let checked = 0;
  for (const [id, c] of calls.entries()) {
    if (c.cred !== PLAIN) continue;
    const r = answerOf(t, id);
    if (!r) continue;
    checked += 1;
    const found = exposures(received(r), PLAIN.secret);
    t.notOk(r.head.includes('[REDACTED') || r.bodyBytes.includes('[REDACTED'), `${c.what}: no mark`);
    // The 3xx echoes in its headers and a short body only: the raw form.
    const forms =
      c.path === '/v1/redirect' ? ['raw'] : ['raw', 'hex', 'base64@0', 'base64@1', 'base64@2', 'base32@0', 'base32@4'];
    for (const form of forms)
      t.ok(
        found.some((f) => f.startsWith(`${form} in `)),
        `${c.what}: ${form} found`,
      );
    t.ok(r.head.includes(`\r\nx-echo-raw: ${Buffer.from(PLAIN.secret).toString('latin1')}`), `${c.what}: in a header`);
  }
  t.equal(checked, VARIANTS.length + 1, 'every delivery checked');
});

t.test('no form of any secret in what postern run printed, the daemon log or the journal; it verifies', async (t) => {
  await s.d.stop();
  const audit = journalBytes(s.h.home);
  const decrypted = await journalText(s.h);
  t.ok(audit.length > 0, 'the journal has entries');
  t.ok(s.d.logs().length > 0, 'the daemon logged something');
  for (const c of ALL) {
    t.same(exposures(s.d.logs(), c.secret), [], `${c.name}: daemon log`);
    t.same(exposures(audit, c.secret), [], `${c.name}: journal files`);
    t.same(exposures(decrypted, c.secret), [], `${c.name}: decrypted journal entries`);
  }
  // The raw answers of the redacting credentials as they came, chunk
  // framing and all, and the run's own output.
  for (const c of CREDS) {
    const own = [...answers.entries()]
      .filter(([id]) => calls[id]?.cred === c)
      .map(([, a]) => Buffer.from(a.raw ?? '', 'base64'));
    t.same(exposures(Buffer.concat(own), c.secret), [], `${c.name}: no raw answer`);
    t.same(exposures(runOutput, c.secret), [], `${c.name}: not in what postern run printed`);
  }
  const v = cli(s.h, ['audit', 'verify']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});
