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
import { runRows } from '../helpers/request-rows';
import { hostilePathRows, LEGIT } from '../helpers/hostile-rows';

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

  const table = hostilePathRows(P, secret);
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
