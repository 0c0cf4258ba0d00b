// SPEC §1/§7: an agent cannot approve itself. It can connect to admin.sock
// (same uid), but without the passphrase it can neither attach as an
// approver, nor see or decide a card.
//
// Here the agent speaks the admin protocol itself (approver.attach,
// approval.decide, approvals.list), as a hostile agent would; the CLI's
// `postern approver --auto approve` without the passphrase is refused in
// test/approver/attach.test.ts.
import t from 'tap';
import { join } from 'node:path';
import { TestAdmin } from '../helpers/admin';
import { startStack, Card } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

type Reply = Record<string, unknown>;
const WRONG = Buffer.from('not the passphrase, sorry');

function refusal(r: Reply): { code?: string; message?: string } {
  return r['ok'] === false ? (r['error'] as { code: string; message: string }) : {};
}

t.test('an agent cannot attach as an approver or decide a card', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'self-approval-secret-0123',
  );
  const adminPath = join(s.h.home, 'admin.sock');

  // The human's approver: records cards, decides only when the test says so.
  const cards: Card[] = [];
  const human = await s.approver((card) => {
    cards.push(card);
    return null;
  });
  // The agent's own admin connection.
  const rogue = await TestAdmin.connect(adminPath);
  t.teardown(() => rogue.close());

  let r = await rogue.request('approval.decide', { id: 'x', decision: 'once' });
  t.equal(refusal(r).code, 'denied_by_user', 'decide on an unattached connection');
  r = await rogue.request('approvals.list');
  t.equal(refusal(r).code, 'denied_by_user', 'list on an unattached connection');
  r = await rogue.request('approver.attach', {});
  t.equal(refusal(r).code, 'bad_request', 'attach without a passphrase');
  t.match(refusal(r).message, /passphrase/);
  r = await rogue.request('approver.attach', {}, [Buffer.alloc(0)]);
  t.equal(refusal(r).code, 'bad_request', 'attach with an empty passphrase');
  r = await rogue.request('approver.attach', {}, [WRONG]);
  t.equal(refusal(r).code, 'wrong_passphrase', 'attach with a wrong passphrase');

  // A real agent asks; the card reaches the human's approver only.
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const agent = await Agent.start(script);
  t.teardown(() => agent.kill());
  const pending = agent.request(s.sock, { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });
  const deadline = Date.now() + 10_000;
  while (cards.length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
  t.equal(cards.length, 1, 'the card reached the attached approver');
  const card = cards[0]!;
  t.equal(card.process.pid, agent.pid);
  t.same(rogue.pushes, [], 'the unattached connection is shown no card');

  for (const decision of [{ decision: 'session', root_key: card.process.key }, { decision: 'once' }]) {
    r = await rogue.request('approval.decide', { id: card.id, ...decision });
    t.equal(refusal(r).code, 'denied_by_user', `the agent cannot decide "${decision.decision}" on its own card`);
  }
  const list = (await human.request('approvals.list'))['result'] as { pending: { id: string }[] };
  t.same(
    list.pending.map((c) => c.id),
    [card.id],
    'the card is still pending',
  );

  // The human denies: the agent's request was never approved.
  const d = await human.request('approval.decide', { id: card.id, decision: 'deny' });
  t.equal((d['result'] as { taken: boolean }).taken, true);
  const reply = await pending;
  t.equal(reply.status, 403, reply.text);
  t.equal((reply.json as { error: { code: string } }).error.code, 'denied_by_user');
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.same(
    ((await human.request('sessions.list'))['result'] as { sessions: unknown[] }).sessions,
    [],
    'no session exists',
  );
  await agent.exit();
});
