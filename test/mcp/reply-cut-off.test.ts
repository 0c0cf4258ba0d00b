// A daemon that dies while it writes a reply (SPEC §10, §1: the bridge
// never hangs, and never tells the client it is still working when nobody
// is): with the official SDK client, a call whose progress resets the
// client's timeout, a real daemon and HTTPS upstream. The bridge is paused
// (SIGSTOP) while the daemon writes a 4 MiB reply, so the daemon's write
// blocks on the full socket; the daemon is then killed and the bridge
// resumed: it reads the start of the reply and then the end of the
// connection. The call must end at once as a tool error (daemon_unreachable,
// maybe_executed: the request ran), progress must stop, and the bridge must
// answer the next call.
import t from 'tap';
import type { ServerResponse } from 'node:http';
import { startStack, auditList } from '../helpers/stack';
import { connectSdkBridge, processAlive } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';

function credential(port: number): string {
  return `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;
}

t.test('the daemon dies in the middle of its reply: the call ends, progress stops', async (t) => {
  const held: ServerResponse[] = [];
  const s = await startStack({ handler: (_req, _body, res) => void held.push(res) });
  t.teardown(async () => {
    for (const res of held) res.destroy();
    await s.close();
  });
  const secret = makeCanary('MCPCUTOFF');
  s.addCredential('api', credential(s.up.port), secret);
  await s.approver(() => ({ decision: 'once' }));
  const b = await connectSdkBridge(t, s.h.env);
  t.teardown(() => {
    if (processAlive(b.pid)) process.kill(b.pid, 'SIGCONT');
  });

  // A client that resets its timeout on progress, as docs/mcp.md advises
  // (30 s, so that the pause of the bridge does not time it out first).
  const progressAt: number[] = [];
  let settledAt = 0;
  let settled: { isError?: boolean; structuredContent?: unknown } | Error | null = null;
  void b.client
    .callTool(
      {
        name: 'http_request',
        arguments: { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/big') },
      },
      undefined,
      { timeout: 30_000, resetTimeoutOnProgress: true, onprogress: () => progressAt.push(Date.now()) },
    )
    .then(
      (r) => (settled = r as { isError?: boolean; structuredContent?: unknown }),
      (e: Error) => (settled = e),
    )
    .finally(() => (settledAt = Date.now()));
  t.ok(await eventually(() => held.length === 1, 10_000), 'the request reached the upstream');

  process.kill(b.pid, 'SIGSTOP');
  const body = 'a'.repeat(4 * 1024 * 1024);
  held[0]!.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
  held[0]!.end(body);
  t.ok(
    await eventually(() => auditList(s).some((e) => e['kind'] === 'http_outcome'), 10_000),
    'the daemon journaled the outcome and is writing its reply',
  );
  await new Promise((r) => setTimeout(r, 500));
  s.d.proc.kill('SIGKILL');
  await s.d.exited;
  process.kill(b.pid, 'SIGCONT');
  const resumed = Date.now();

  t.ok(
    await eventually(() => settled !== null, 10_000),
    'the call ends within 10 s of the bridge reading the cut reply',
  );
  const r = settled as { isError?: boolean; structuredContent?: unknown } | Error | null;
  t.notOk(r instanceof Error, `a tool result, not a client-side failure: ${r instanceof Error ? r.message : ''}`);
  const err = (
    (r && !(r instanceof Error) ? r.structuredContent : undefined) as { error?: Record<string, unknown> } | undefined
  )?.error;
  t.equal(r && !(r instanceof Error) ? r.isError : undefined, true, 'a tool error');
  t.equal(err?.['code'], 'daemon_unreachable', 'code daemon_unreachable');
  t.equal(err?.['maybe_executed'], true, 'the request ran: the agent is told it may have been executed');
  const lateProgress = progressAt.filter((at) => at > resumed + 3000 && (settledAt === 0 || at > settledAt));
  t.same(lateProgress.length, 0, 'no progress keeps the client waiting on a call that cannot end');

  // The bridge lives and answers the next call.
  t.ok(processAlive(b.pid), 'the bridge is still running');
  const next = await b.client.callTool({ name: 'list_credentials', arguments: {} }, undefined, { timeout: 5000 });
  t.equal((next.structuredContent as { error?: { code?: string } }).error?.code, 'daemon_unreachable');
  t.same(findCanary(b.stdout(), secret), [], 'nothing the bridge wrote holds a form of the secret');
  t.same(findCanary(b.stderr(), secret), []);
});
