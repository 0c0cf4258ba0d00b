// Minimal cases of what the redaction fuzz suites (redact-fuzz-forms,
// -stream, -join) found; each failed before its change and asserts the
// documented behaviour.
import t from 'tap';
import { redact } from '../../daemon/pipeline/redact';
import { lat, mustBuild, streamed } from '../helpers/redact-fuzz';

const MARK = '[REDACTED:api]';

// docs/responses.md: "each byte of a form may appear as" any escape, "Every
// occurrence found is replaced". A needle whose LAST byte is one that starts
// escapes (%, \, &), written escaped, is replaced only up to that escape's
// first character: the rest of the escape ("#38;", "u005C", "25") stays
// beside the mark and tells the secret's last byte.
t.test('a needle ending in %, \\ or & written escaped is replaced whole', async (t) => {
  const cases: [string, string][] = [
    ['tok&', 'tok&#38;'],
    ['tok&', 'tok&amp;'],
    ['tok&', 'tok&#x26;'],
    ['tok&', 'tok%26'],
    ['tok\\', 'tok\\\\'],
    ['tok\\', 'tok\\u005c'],
    ['tok\\', 'tok\\x5c'],
    ['tok%', 'tok%25'],
    ['tok%', 'tok%2525'],
  ];
  for (const [secret, body] of cases) {
    const r = mustBuild([lat(secret)], 'api');
    const got = redact(r, lat(`<${body}>`));
    t.equal(got.data.toString('latin1'), `<${MARK}>`, `secret ${JSON.stringify(secret)} as ${JSON.stringify(body)}`);
    r.wipe();
  }
});

// streamRedactor's contract (stream.ts): "the same replacements as redact()
// over the whole body, and the same cut"; redaction counts are reported as
// `redactions`. When replacements make the output reach the cut in one
// piece, later pieces are dropped before they are scanned (push() returns
// early on emitted >= cut), so occurrences redact() counts are not counted.
t.test('stream count equals redact count when the output reaches the cut', async (t) => {
  const r = mustBuild([lat('abcd')], 'api');
  const body = lat('abcdabcdabcd');
  const whole = redact(r, body, 10);
  const s = streamed(
    r,
    [...body].map((b) => Buffer.from([b])),
    10,
    false,
  );
  t.equal(s.data.toString(), whole.data.toString(), 'same output');
  t.equal(s.count, whole.count, `count: redact ${whole.count}, stream ${s.count}`);
  r.wipe();
});

// forms.ts utf16Forms: "A byte that is not valid UTF-8 stands for U+FFFD, as
// a decoder would make it." Decoders (WHATWG/Node, Python) make ONE U+FFFD
// per maximal ill-formed subpart: E2 82 (a cut 3-byte sequence) is one
// U+FFFD, the redactor's form has two, so the UTF-16 echo of such a
// (binary) secret is not found. Outside the strict promise ("the needle's
// text (UTF-8)"): a binary secret has no text; reported as low severity.
t.test('UTF-16 of a secret holding a cut UTF-8 sequence, as decoders make it', async (t) => {
  const secret = Buffer.from([0x61, 0x62, 0x63, 0xe2, 0x82, 0x64, 0x65, 0x66]);
  const r = mustBuild([secret], 'api');
  const le = Buffer.from(secret.toString('utf8'), 'utf16le');
  t.equal(new TextDecoder().decode(secret), 'abc\ufffddef', 'one U+FFFD for E2 82');
  t.equal(redact(r, le).count, 1, 'UTF-16LE echo found');
  r.wipe();
});

// A secret rich in "%" or "\" over text rich in them: each such byte can
// be read two ways ("%" raw or the "%25" escape; "\" raw or "\\"), and
// tried to the end each way the matcher took time doubling with each one
// (60 of them: for ever). Kept per element and position, it finishes. No
// timing is asserted: before the change this row never ended (tap's
// timeout), after it takes milliseconds.
t.test('a secret rich in % or \\ over text rich in them: the scan ends', async (t) => {
  for (const [secret, body] of [
    ['x' + 'a%'.repeat(60) + 'z', 'x' + 'a%25'.repeat(60) + 'q'],
    ['x' + '\\'.repeat(60) + 'z', 'x' + '\\'.repeat(120) + 'q'],
  ] as const) {
    const r = mustBuild([lat(secret)], 'api');
    t.equal(redact(r, lat(body)).count, 0, `${secret.slice(0, 6)}…: no occurrence (the last byte differs)`);
    t.equal(redact(r, lat(body.slice(0, -1) + 'z')).count, 1, `${secret.slice(0, 6)}…: found when it is there`);
    r.wipe();
  }
});
