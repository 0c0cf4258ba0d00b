// The outcome entry's body_sha256 is the hash of the body the agent got
// (decoded, redacted, cut), never of what the upstream sent: an upstream
// that echoes the secret must not leave sha256(…secret…) in the journal,
// where anyone holding the passphrase could confirm a guess with it.
import t from 'tap';
import { createHash } from 'node:crypto';
import { startStack, auditEntries } from '../helpers/stack';
import { findCanary, makeCanary } from '../helpers/canary';

const hex = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

t.test('body_sha256 hashes the redacted body', async (t) => {
  // The upstream answers with the Authorization header it received.
  const s = await startStack({
    handler: (req, _body, res) => void res.end(`token=${String(req.headers['authorization'])}`),
  });
  t.teardown(() => s.close());
  const secret = makeCanary('HASHED');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\npaths = ["/v1/*"]\n`,
    secret,
  );
  await s.approver();
  const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/echo') });
  t.equal(r.status, 200, r.text);
  const reply = r.json as { body: string; body_encoding: string; redactions: number; audit_seq: number };
  t.equal(reply.body, 'token=[REDACTED:api]', 'the agent got the redacted body (the injected value replaced whole)');
  t.equal(reply.redactions, 1);

  const outcome = auditEntries(s).get(reply.audit_seq)!;
  t.equal(outcome['kind'], 'http_outcome');
  const recorded = String(outcome['body_sha256']).replace(/^sha256:/, '');
  t.equal(recorded, hex(reply.body), 'the hash of what the agent got');
  t.not(recorded, hex(`token=Bearer ${secret}`), 'not the hash of what the upstream sent');
  t.equal(outcome['bytes'], `token=Bearer ${secret}`.length, 'bytes counts what was read from the upstream');
  t.same(findCanary(JSON.stringify([...auditEntries(s).values()]), secret), [], 'no form of the secret in any entry');
});
