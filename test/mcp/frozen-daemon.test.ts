// Progress must say the daemon is at work, not only that the bridge is
// alive. A client that resets its timeout on progress (the MCP SDK's
// resetTimeoutOnProgress) waited for ever on a frozen daemon (SIGSTOP, a
// hung event loop): the bridge kept sending progress every 2 s. The daemon
// now sends a heartbeat (102 Processing, postern-working) every 5 s while
// a call runs, and the bridge sends progress only while it hears one, so:
// - a daemon stopped while a card waits: progress stops within three
//   missed heartbeats and the client's own 5 s timeout ends the call;
// - a human who takes 20 s (beyond those three heartbeats) is still waited
//   for: the heartbeats keep progress going.
import t from 'tap';
import type { Test } from 'tap';
import { startStack, Card } from '../helpers/stack';
import { connectSdkBridge } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';
import { makeCanary } from '../helpers/canary';

async function setup(t: Test) {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
    makeCanary('MCPFROZEN'),
  );
  const cards: Card[] = [];
  const admin = await s.approver((card) => {
    cards.push(card);
    return null;
  });
  const b = await connectSdkBridge(t, s.h.env);
  const progress: number[] = [];
  const started = Date.now();
  const call = (path: string) =>
    b.client
      .callTool(
        {
          name: 'http_request',
          arguments: { credential: 'api', method: 'POST', url: s.url('api.example.test', path), body: 'x' },
        },
        undefined,
        { timeout: 5000, resetTimeoutOnProgress: true, onprogress: () => progress.push(Date.now()) },
      )
      .then(
        (r) => ({ r }),
        (e: Error) => ({ e }),
      );
  return { s, cards, admin, progress, started, call };
}

t.test('a daemon that stops answering: progress stops, the client gives up', async (t) => {
  const x = await setup(t);
  const pending = x.call('/v1/frozen');
  t.ok(await eventually(() => x.cards.length === 1, 10_000), 'the card is pending');
  const pid = x.s.d.proc.pid!;
  process.kill(pid, 'SIGSTOP');
  const stoppedAt = Date.now();
  t.teardown(() => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone already
    }
  });
  const guard = new Promise<{ guard: true }>((r) => setTimeout(() => r({ guard: true }), 60_000).unref());
  const outcome = await Promise.race([pending, guard]);
  const endedAt = Date.now();
  t.notOk('guard' in outcome, 'the call ended before the 60 s guard');
  t.ok(
    'e' in outcome,
    `the client gave up: ${'e' in outcome ? outcome.e.message : JSON.stringify(outcome).slice(0, 200)}`,
  );
  const after = x.progress.filter((at) => at > stoppedAt);
  const last = after.length ? after[after.length - 1]! - stoppedAt : 0;
  t.comment(
    `progress after the stop: ${after.length}, the last ${last} ms after it; the call ended ${endedAt - stoppedAt} ms after it`,
  );
  t.ok(last <= 15_000 + 2_500, 'progress stopped within three missed heartbeats');
  process.kill(pid, 'SIGCONT');
  t.ok(
    await eventually(
      async () =>
        (await x.s.request({ credential: 'api', method: 'GET', url: x.s.url('api.example.test', '/') })).status > 0,
      10_000,
    ),
    'the daemon answers again once resumed',
  );
  t.equal(x.s.up.requests.filter((q) => q.url === '/v1/frozen').length, 0, 'the given-up request never ran');
});

t.test('a human who takes 20 s is still waited for', async (t) => {
  const x = await setup(t);
  const pending = x.call('/v1/slow-human');
  t.ok(await eventually(() => x.cards.length === 1, 10_000), 'the card is pending');
  await new Promise((r) => setTimeout(r, 20_000 - (Date.now() - x.started)));
  const decided = await x.admin.request('approval.decide', { id: x.cards[0]!.id, decision: 'once' });
  t.equal((decided['result'] as Record<string, unknown> | undefined)?.['taken'], true, 'approved after 20 s');
  const outcome = await pending;
  t.notOk('e' in outcome, `the client kept waiting (${'e' in outcome ? outcome.e.message : ''})`);
  t.equal(x.s.up.requests.filter((q) => q.url === '/v1/slow-human').length, 1, 'the request ran once');
});
