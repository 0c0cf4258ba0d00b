// http_request carries idempotency_key to the daemon (SPEC §10, §6.5): the
// same call twice with the same key, under a session, through the official
// SDK client: the second is the recorded outcome (`replayed: true`), the
// upstream is called once; the same key with another body is the daemon's
// idempotency_conflict, as a tool error.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { connectSdkBridge } from '../helpers/mcp-bridge';
import { findCanary, makeCanary } from '../helpers/canary';

t.test('the same idempotency_key twice is replayed, not sent again', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('MCPIDEM');
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  await s.approver((card) => ({ decision: 'session', root_key: card.ancestors[0]?.key ?? card.process.key }));
  const b = await connectSdkBridge(t, s.h.env);
  const call = (body: string): Promise<{ isError?: boolean; structuredContent?: unknown }> =>
    b.client.callTool({
      name: 'http_request',
      arguments: {
        credential: 'api',
        method: 'POST',
        url: s.url('api.example.test', '/v1/issues'),
        body,
        idempotency_key: 'file-the-bug-1',
      },
    }) as Promise<{ isError?: boolean; structuredContent?: unknown }>;
  const first = await call('{"title":"x"}');
  t.notOk(first.isError, 'the first call runs');
  t.notOk((first.structuredContent as Record<string, unknown>)['replayed'], 'not a replay');
  const second = await call('{"title":"x"}');
  t.notOk(second.isError);
  t.equal(
    (second.structuredContent as Record<string, unknown>)['replayed'],
    true,
    'the second is the recorded outcome',
  );
  t.equal(s.up.requests.length, 1, 'the upstream was called once');
  const other = await call('{"title":"y"}');
  t.equal(other.isError, true);
  t.equal((other.structuredContent as { error: { code: string } }).error.code, 'idempotency_conflict');
  t.equal(s.up.requests.length, 1, 'still once');
  t.same(findCanary(b.stdout(), secret), []);
  t.same(findCanary(b.stderr(), secret), []);
});
