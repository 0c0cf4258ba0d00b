// DNS rebinding through the real daemon (SPEC §6.2): a name that answers
// 127.0.0.1 (allowed by the credential) to its first A query and 10.0.0.1
// (blocked) to every later one, with TTL 0. If postern looked the name up
// again between the check and the connect, the first request would cost a
// second A query and meet 10.0.0.1. It must not: one request makes exactly
// one A query and at most one AAAA query, is served from 127.0.0.1, and the
// next request (a new resolution) is refused naming 10.0.0.1.
import t from 'tap';
import { startStack, Card } from '../helpers/stack';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

const NAME = 'rebind.example.test';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown; address?: string; reason?: string };
}

t.test('one resolution per request; the connection goes to the checked address', async (t) => {
  const s = await startStack({
    names: [NAME],
    records: {
      [NAME]: (type, count) => (type === 'A' ? { A: [count === 1 ? '127.0.0.1' : '10.0.0.1'], ttl: 0 } : { ttl: 0 }),
    },
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${NAME}"\nports = [${P}]\n`,
    secret,
  );
  const cards: Card[] = [];
  // Only 127.0.0.1 is ever approved: nothing else may be connected to.
  await s.approver((card) => {
    cards.push(card);
    return card.action['address'] === '127.0.0.1'
      ? { decision: 'session', root_key: card.process.key }
      : { decision: 'deny' };
  });
  const queries = (type: string): number => s.dns.queries.filter((q) => q.name === NAME && q.type === type).length;

  const first = await s.request({ credential: 'api', method: 'GET', url: s.url(NAME, '/first') });
  t.equal(first.status, 200, first.text);
  const ok = first.json as { status: number; target: { host: string; address: string } };
  t.equal(ok.status, 200);
  t.same(ok.target, { host: NAME, address: '127.0.0.1', port: P }, 'served from the checked address');
  t.equal(queries('A'), 1, 'exactly one A query for the first request');
  t.ok(queries('AAAA') <= 1, 'at most one AAAA query for the first request');
  t.equal(s.up.requests.length, 1, 'the upstream (on 127.0.0.1) saw the request');
  t.equal(s.up.requests[0]!.url, '/first');
  t.equal(s.up.requests[0]!.headers['host'], `${NAME}:${P}`, 'Host keeps the name');
  t.equal(s.up.connections(), 1);
  t.equal(cards.length, 1);
  t.equal(cards[0]!.action['address'], '127.0.0.1', 'the card showed the checked address');

  // The name now answers 10.0.0.1: a new request resolves anew and is
  // refused before approval (the session does not matter) and before any
  // connection.
  const second = await s.request({ credential: 'api', method: 'GET', url: s.url(NAME, '/second') });
  t.equal(second.status, 403, second.text);
  const err = (second.json as ErrorBody).error;
  t.equal(err.code, 'denied_address');
  t.equal(err.address, '10.0.0.1');
  t.equal(err.reason, 'private');
  t.match(err.message, /rebind\.example\.test resolves to 10\.0\.0\.1/);
  t.type(err.audit_seq, 'number', 'the refusal is journaled');
  t.equal(queries('A'), 2, 'one more A query for the second request');
  t.ok(queries('AAAA') <= 2, 'at most one more AAAA query');
  t.equal(s.up.requests.length, 1, 'the upstream saw nothing more');
  t.equal(s.up.connections(), 1, 'no new connection');
  t.equal(cards.length, 1, 'no card for the refused request');

  await s.d.stop();
  t.same(findCanary(first.text + second.text, secret), []);
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
});
