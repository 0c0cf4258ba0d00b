// Cancellation under load and after the point of no return (SPEC §10,
// §6.1), with the official SDK client against a real daemon, approver and
// HTTPS upstream:
// - fourteen calls wait for approval at once and every other one is
//   cancelled: exactly the cancelled ones are withdrawn (approver told, a
//   later decision not taken, the journal says the requester withdrew
//   them, nothing sent); the others, then approved, run exactly once;
// - a cancel for an id never sent, and one for a call already answered,
//   change nothing and the bridge keeps answering;
// - a call cancelled after its request reached the upstream completes
//   once and is journaled as usual (intent, outcome), not as withdrawn.
import t from 'tap';
import type { ServerResponse } from 'node:http';
import { startStack, auditList, Card } from '../helpers/stack';
import { connectSdkBridge } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';

function credential(port: number): string {
  return `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`;
}

t.test('fourteen waiting calls, every other one cancelled', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('MCPMANY');
  s.addCredential('api', credential(s.up.port), secret);
  const cards: Card[] = [];
  const admin = await s.approver((card) => {
    cards.push(card);
    return null;
  });
  const b = await connectSdkBridge(t, s.h.env);
  const N = 14;
  const path = (i: number): string => `/v1/c${i}`;
  const aborts: AbortController[] = [];
  const calls: Promise<string>[] = [];
  for (let i = 0; i < N; i++) {
    const ac = new AbortController();
    aborts.push(ac);
    calls.push(
      b.client
        .callTool(
          {
            name: 'http_request',
            arguments: { credential: 'api', method: 'POST', url: s.url('api.example.test', path(i)), body: 'x' },
          },
          undefined,
          { signal: ac.signal, timeout: 60_000 },
        )
        .then(
          (r) => (r.isError ? `tool error ${JSON.stringify(r.structuredContent)}` : 'ok'),
          () => 'cancelled',
        ),
    );
  }
  t.ok(await eventually(() => cards.length === N, 15_000), 'every call has a pending card');
  const cancelled = new Set<string>();
  for (let i = 0; i < N; i += 2) {
    aborts[i]!.abort('the user stopped it');
    cancelled.add(path(i));
  }
  const withdrawnIds = (): Set<unknown> =>
    new Set(admin.pushes.filter((p) => p['push'] === 'withdrawn').map((p) => p['id']));
  t.ok(
    await eventually(() => withdrawnIds().size === cancelled.size, 10_000),
    'the approver is told of each withdrawal',
  );
  for (const card of cards) {
    const p = String(card.action['path']);
    t.equal(withdrawnIds().has(card.id), cancelled.has(p), `${p}: withdrawn only if cancelled`);
    const d = await admin.request('approval.decide', { id: card.id, decision: 'once' });
    t.equal(
      (d['result'] as Record<string, unknown> | undefined)?.['taken'],
      !cancelled.has(p),
      `${p}: decision taken only if not cancelled`,
    );
  }
  const results = await Promise.all(calls);
  for (let i = 0; i < N; i++)
    t.equal(results[i], cancelled.has(path(i)) ? 'cancelled' : 'ok', `${path(i)}: ${results[i]}`);
  const sent = s.up.requests.map((q) => q.url).sort();
  t.same(
    sent,
    [...Array(N).keys()]
      .filter((i) => i % 2 === 1)
      .map(path)
      .sort(),
    'exactly the calls not cancelled ran, once each',
  );
  const journal = auditList(s);
  t.same(
    journal
      .filter((e) => e['withdrawn'] === 'by the requester')
      .map((e) => e['path'])
      .sort(),
    [...cancelled].sort(),
    'the journal says the requester withdrew exactly the cancelled calls',
  );

  // Cancels for an id never sent and for a call already answered.
  await b.client.notification({ method: 'notifications/cancelled', params: { requestId: 987654, reason: 'unknown' } });
  await b.client.notification({ method: 'notifications/cancelled', params: { requestId: 1, reason: 'finished' } });
  const list = await b.client.callTool({ name: 'list_credentials', arguments: {} });
  t.notOk(list.isError, 'the bridge keeps answering');
  t.same(findCanary(b.stdout(), secret), [], 'nothing the bridge wrote holds a form of the secret');
  t.same(findCanary(b.stderr(), secret), []);
});

t.test('a call cancelled after its request was sent completes once and is journaled as usual', async (t) => {
  const held: ServerResponse[] = [];
  const s = await startStack({ handler: (_req, _body, res) => void held.push(res) });
  t.teardown(async () => {
    for (const res of held) res.destroy();
    await s.close();
  });
  const secret = makeCanary('MCPSENT');
  s.addCredential('api', credential(s.up.port), secret);
  await s.approver(() => ({ decision: 'once' }));
  const b = await connectSdkBridge(t, s.h.env);
  const ac = new AbortController();
  const call = b.client
    .callTool(
      {
        name: 'http_request',
        arguments: { credential: 'api', method: 'POST', url: s.url('api.example.test', '/v1/sent'), body: 'x' },
      },
      undefined,
      { signal: ac.signal },
    )
    .then(
      () => 'answered',
      () => 'cancelled',
    );
  t.ok(await eventually(() => held.length === 1, 10_000), 'the request reached the upstream');
  ac.abort('the user stopped it');
  t.equal(await call, 'cancelled', 'the client sees its cancellation');
  await new Promise((r) => setTimeout(r, 300));
  held[0]!.writeHead(201, { 'content-type': 'text/plain', 'content-length': 2 });
  held[0]!.end('ok');
  t.ok(
    await eventually(() => auditList(s).some((e) => e['kind'] === 'http_outcome'), 10_000),
    'the outcome is journaled',
  );
  const journal = auditList(s);
  const intent = journal.find((e) => e['kind'] === 'http_intent');
  const outcome = journal.find((e) => e['kind'] === 'http_outcome');
  t.ok(intent, 'an intent');
  t.equal(outcome?.['status'], 201, 'the outcome, with the upstream status');
  t.equal(outcome?.['intent_seq'], intent?.['seq'], 'for that intent');
  t.notOk(
    journal.some((e) => e['withdrawn'] !== undefined),
    'nothing is journaled as withdrawn',
  );
  t.equal(s.up.requests.length, 1, 'sent once, never retried');
  const list = await b.client.callTool({ name: 'list_credentials', arguments: {} });
  t.notOk(list.isError, 'the bridge keeps answering');
  t.same(findCanary(b.stdout(), secret), []);
  t.same(findCanary(b.stderr(), secret), []);
});
