// What progress says once a human has decided (SPEC §10): while a call waits
// for approval, progress says a human is being asked; once the card is
// approved and the request is on its way to a slow upstream, progress must
// no longer say so (the agent, or the human watching the client, would
// otherwise wait for an approval already given). Official SDK client, real
// daemon, approver and HTTPS upstream that holds its answer.
import t from 'tap';
import type { ServerResponse } from 'node:http';
import { startStack } from '../helpers/stack';
import { connectSdkBridge } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';

t.test('progress after the approval does not say a human is being asked', async (t) => {
  const held: ServerResponse[] = [];
  const s = await startStack({ handler: (_req, _body, res) => void held.push(res) });
  t.teardown(async () => {
    for (const res of held) res.destroy();
    await s.close();
  });
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'not-the-point-of-this-test',
  );
  let decidedAt = 0;
  await s.approver(() => {
    decidedAt = Date.now();
    return { decision: 'once' };
  });
  const b = await connectSdkBridge(t, s.h.env);
  const progress: { at: number; message: string }[] = [];
  const call = b.client.callTool(
    {
      name: 'http_request',
      arguments: { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/slow') },
    },
    undefined,
    {
      timeout: 30_000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => progress.push({ at: Date.now(), message: String(p.message) }),
    },
  );
  t.ok(await eventually(() => held.length === 1, 10_000), 'approved, the request reached the upstream');
  const reachedAt = Date.now();
  t.ok(decidedAt > 0 && decidedAt <= reachedAt, 'the card was decided before');
  t.ok(
    await eventually(() => progress.some((p) => p.at > reachedAt + 500), 10_000),
    'progress while the upstream holds',
  );
  const after = progress.filter((p) => p.at > reachedAt + 500);
  t.same(
    after.filter((p) => /human is being asked/.test(p.message)).map((p) => p.message),
    [],
    'no progress after the approval says a human is being asked',
  );
  t.ok(
    after.some((p) => /a human approved this request \([0-9a-f]+\)/.test(p.message)),
    `progress after the approval says it was approved: ${after.map((p) => p.message).join(' | ')}`,
  );
  held[0]!.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
  held[0]!.end('ok');
  const r = await call;
  t.notOk(r.isError, 'the call then succeeds');
});
