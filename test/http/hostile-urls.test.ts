// Hostile URLs through the real daemon (SPEC §4, §6.1–§6.3): IP literal
// spellings with and without a rule naming 127.0.0.1, literals of blocked
// addresses, userinfo, zone ids, Unicode and trailing dots, wildcard
// confusion, schemes, ports, encoded paths and methods. One TABLE of rows;
// each asserts the exact status and code, or success with what the upstream
// received. For every refusal: the upstream saw no request and no
// connection, and the refusal is journaled (a new audit_seq).
//
// Only 127.0.0.1 is ever connected to: the approver approves nothing else,
// so a daemon that let another address through would fail the row at
// approval instead of connecting.
import t from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { runRows } from '../helpers/request-rows';
import { hostileUrlRows } from '../helpers/hostile-rows';

t.test('hostile URLs through the real daemon', async (t) => {
  const s: Stack = await startStack({
    names: ['api.example.test', '*.wild.test', 'x.y.wild.test', '127.0.0.1'],
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'a.wild.test': { A: ['127.0.0.1'] },
      'x.y.wild.test': { A: ['127.0.0.1'] },
    },
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "X-Api-Key"\ntemplate = "Key {secret}"\n` +
      `[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n` +
      `[[allow]]\nhost = "*.wild.test"\nports = [${P}]\n`,
    secret,
  );
  // Rules naming literals; allow_addresses opens 127.0.0.1 and link-local
  // (which still leaves the metadata address blocked).
  s.addCredential(
    'lit',
    `name = "lit"\nkind = "http"\nallow_addresses = ["127.0.0.1/32", "169.254.0.0/16"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      ['127.0.0.1', '10.0.0.1', '169.254.169.254', '[::ffff:10.0.0.1]', '[::1]']
        .map((h) => `[[allow]]\nhost = "${h}"\nports = [${P}]\n`)
        .join(''),
    secret,
  );
  await s.approver((card) =>
    card.action['address'] === '127.0.0.1' ? { decision: 'session', root_key: card.process.key } : { decision: 'deny' },
  );

  await runRows(t, s, hostileUrlRows(P), secret);
});
