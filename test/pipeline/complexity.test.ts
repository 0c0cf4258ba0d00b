// Matchers that agent-controlled text reaches, on the inputs that made them
// super-linear, each far beyond what a request may carry so that the old
// matcher would take minutes (or throw) and the fixed one milliseconds: the
// bounds (seconds) only tell the two apart, on any machine.
import t from 'tap';
import { PLACEHOLDER } from '../../daemon/pipeline/proxied';
import { parseClientAuthorization } from '../../daemon/pipeline/computed/aws-sigv4';
import { checkBodyBase64, checkReason } from '../../daemon/pipeline/validate-fields';

function timed<T>(f: () => T): { value: T; ms: number } {
  const start = process.hrtime.bigint();
  const value = f();
  return { value, ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

t.test('the placeholder search over 1 MiB of "postern-" repeated (quadratic: minutes)', async (t) => {
  const text = 'postern-'.repeat(128 * 1024);
  const r = timed(() => {
    PLACEHOLDER.lastIndex = 0;
    return PLACEHOLDER.exec(text);
  });
  t.equal(r.value, null, 'nothing found');
  t.ok(r.ms < 5000, `${r.ms.toFixed(1)} ms`);
  const real = `x postern-github-0123456789abcdef y`;
  PLACEHOLDER.lastIndex = 0;
  t.equal(PLACEHOLDER.exec(real)?.[0], 'postern-github-0123456789abcdef', 'a placeholder is still found');
  const longest = `postern-${'a'.repeat(64)}-0123456789abcdef`;
  PLACEHOLDER.lastIndex = 0;
  t.equal(PLACEHOLDER.exec(longest)?.[0], longest, 'with the longest name a credential may have');
});

t.test('the AWS Authorization parse over a million spaces (quadratic: minutes)', async (t) => {
  const value = `AWS4-HMAC-SHA256 Credential=AKIA/20250101/eu-west-1/s3/aws4_request,${' '.repeat(1_000_000)}x`;
  const r = timed(() => parseClientAuthorization(value));
  t.equal(r.value, null, 'not a valid Authorization');
  t.ok(r.ms < 5000, `${r.ms.toFixed(1)} ms`);
  const good = `  AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20250101/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'a'.repeat(64)} \t`;
  t.match(
    parseClientAuthorization(good),
    { accessKeyId: 'AKIAEXAMPLE', region: 'eu-west-1', service: 's3' },
    'a valid one still parses',
  );
});

t.test('body_base64 of 12 M characters (the regexp stack overflowed at 4.5 M)', async (t) => {
  const r = timed(() => checkBodyBase64('A'.repeat(12_000_000)));
  t.equal(r.value.ok, true, 'checked, no RangeError');
  for (const [v, ok] of [
    ['', true],
    ['YQ==', true],
    ['YWI=', true],
    ['YWJj', true],
    ['YQ=', false],
    ['Y===', false],
    ['====', false],
    ['YQ==YQ==', false],
    ['YW=j', false],
    ['YWJj\n', false],
  ] as const)
    t.equal(checkBodyBase64(v).ok, ok, `${JSON.stringify(v)}: ${ok ? 'accepted' : 'refused'}`);
});

t.test('reason: a 6 M character reason is refused without spreading it', async (t) => {
  const r = timed(() => checkReason('€'.repeat(6_000_000)));
  t.equal(r.value.ok, false, 'refused');
  t.comment(`${r.ms.toFixed(1)} ms`);
  t.equal(checkReason('😀'.repeat(200)).ok, true, '200 code points in 400 UTF-16 units: accepted');
  t.equal(checkReason('😀'.repeat(201)).ok, false, '201: refused');
  t.equal(checkReason('a'.repeat(200)).ok, true, '200 ASCII: accepted');
  t.equal(checkReason('a'.repeat(201)).ok, false, '201 ASCII: refused');
});
