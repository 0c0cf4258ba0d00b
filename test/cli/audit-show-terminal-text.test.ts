// `postern audit show` prints the journal for a person at a terminal
// (SPEC §5, §9). Entries hold what the agent chose: its `reason`, the path
// and query it asked for, its command line. The same rule as on a card
// (SPEC §7) holds for these lines: no C1 control (U+0080–U+009F; U+009B is
// CSI), no bidi control (U+202E, U+2066–2069) and no zero-width character
// reaches the terminal raw. JSON escapes only C0, so these rows check the
// listing's bytes. Real daemon, a real request with a hostile reason.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { cli } from '../helpers/postern';

const RAW = /[\u0080-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/u;

t.test("the agent's words in `postern audit show` reach the terminal escaped", async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'audit-text-secret-0123456789',
  );
  await s.approver(() => ({ decision: 'once' }));
  // CSI 2J (clear screen) as a C1 control, then a right-to-left override
  // and a zero-width space.
  const reason = 'routine check\u009b2J\u202eexe.gpj\u200b done';
  const r = await s.request({
    credential: 'api',
    method: 'GET',
    url: s.url('api.example.test', '/v1/x'),
    reason,
  });
  t.equal(r.status, 200, r.text);
  const shown = cli(s.h, ['audit', 'show', '--passphrase-file', s.h.passFile]);
  t.equal(shown.code, 0, shown.stderr);
  const line = shown.stdout.split('\n').find((l) => l.includes('routine check'));
  t.ok(line, 'the reason is listed');
  t.notOk(RAW.test(line ?? ''), `no raw C1, bidi or zero-width character: ${JSON.stringify(line)}`);
});
