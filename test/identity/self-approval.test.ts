// SPEC §1/§7: an agent cannot approve itself. It can connect to admin.sock
// (same uid), but without the passphrase it can neither attach as an
// approver, nor decide a card, nor take any widening action; the vault file
// stays byte for byte the same.
//
// `postern approver` is not wired into the CLI yet, so the approver side is
// exercised through the admin operations it will use (approver.attach,
// approval.decide, approvals.list).
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PASSPHRASE } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';
import { startStack, Card } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

type Reply = Record<string, unknown>;
const WRONG = Buffer.from('not the passphrase, sorry');
const NEW_PASSPHRASE = Buffer.from('a brand new passphrase 42');

function refusal(r: Reply): { code?: string; message?: string } {
  return r['ok'] === false ? (r['error'] as { code: string; message: string }) : {};
}

t.test('without the passphrase: no approving, no widening, the vault unchanged', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential('api', `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`, 'self-approval-secret-0123');
  const vaultPath = join(s.h.home, 'vault');
  const vaultBefore = readFileSync(vaultPath);
  const adminPath = join(s.h.home, 'admin.sock');

  // Each wrong passphrase makes the next answer wait twice as long (the
  // guard); a right proof resets it, so the test does one between attempts.
  const resetGuard = async (): Promise<void> => {
    const a = await TestAdmin.connect(adminPath);
    const r = await a.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]);
    a.close();
    if (r['ok'] !== true) throw new Error(`reset: ${JSON.stringify(r)}`);
  };

  // The human's approver: records cards, decides only when the test says so.
  const cards: Card[] = [];
  const human = await s.approver((card) => {
    cards.push(card);
    return null;
  });
  // The agent's own admin connection.
  const rogue = await TestAdmin.connect(adminPath);
  t.teardown(() => rogue.close());

  t.test('an agent cannot attach as an approver or decide a card', async (t) => {
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
    await resetGuard();

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
    t.same(list.pending.map((c) => c.id), [card.id], 'the card is still pending');

    // The human denies: the agent's request was never approved.
    const d = await human.request('approval.decide', { id: card.id, decision: 'deny' });
    t.equal((d['result'] as { taken: boolean }).taken, true);
    const reply = await pending;
    t.equal(reply.status, 403, reply.text);
    t.equal((reply.json as { error: { code: string } }).error.code, 'denied_by_user');
    t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
    t.same(((await human.request('sessions.list'))['result'] as { sessions: unknown[] }).sessions, [], 'no session exists');
    await agent.exit();
  });

  t.test('every widening operation needs the passphrase', async (t) => {
    const shown = (await rogue.request('cred.show', { name: 'api' }))['result'] as { definition: Record<string, unknown> };
    const original = shown.definition;
    t.equal(original['name'], 'api', 'the definition is readable without the passphrase (no secret in it)');
    const widened = { ...original, allow_addresses: ['0.0.0.0/0'] };
    const added = { ...original, name: 'api2' };
    const secret = Buffer.from('attacker-chosen-secret-0123');
    // op, args, attachments after the passphrase
    const ops: [string, Record<string, unknown>, Buffer[]][] = [
      ['cred.add', { definition: added }, [secret]],
      ['cred.update', { name: 'api', definition: widened }, []],
      ['cred.rm', { name: 'api' }, []],
      ['passwd', {}, [NEW_PASSPHRASE]],
      ['approver.attach', {}, []],
    ];
    for (const [op, args, rest] of ops) {
      const fresh = await TestAdmin.connect(adminPath);
      let r = await fresh.request(op, args, []);
      t.equal(refusal(r).code, 'bad_request', `${op} without a passphrase`);
      t.match(refusal(r).message, /passphrase/, `${op}: the refusal names the passphrase`);
      r = await fresh.request(op, args, [Buffer.alloc(0), ...rest]);
      t.equal(refusal(r).code, 'bad_request', `${op} with an empty passphrase`);
      r = await fresh.request(op, args, [WRONG, ...rest]);
      t.equal(refusal(r).code, 'wrong_passphrase', `${op} with a wrong passphrase`);
      if (op === 'approver.attach') {
        const after = await fresh.request('approval.decide', { id: 'x', decision: 'once' });
        t.equal(refusal(after).code, 'denied_by_user', 'a failed attach leaves the connection unattached');
      }
      fresh.close();
      await resetGuard();
    }
    const list = ((await rogue.request('cred.list'))['result'] as { credentials: { name: string }[] }).credentials.map((c) => c.name);
    t.same(list, ['api'], 'nothing added or removed');
    const now = ((await rogue.request('cred.show', { name: 'api' }))['result'] as { definition: unknown }).definition;
    t.same(now, original, 'the definition is unchanged');
    t.ok(readFileSync(vaultPath).equals(vaultBefore), 'the vault file is byte for byte the same');
  });

  t.test('a changed config cannot be approved without the passphrase', async (t) => {
    const configPath = join(s.h.home, 'config.toml');
    writeFileSync(configPath, readFileSync(configPath, 'utf8').replace('[daemon]\n', '[daemon]\nagent_uids = [65534]\n'));
    const diff = (await rogue.request('config.diff'))['result'] as { approved: boolean; current_hash: string };
    t.equal(diff.approved, false, 'the change is seen');
    let r = await rogue.request('config.approve', { hash: diff.current_hash });
    t.equal(refusal(r).code, 'bad_request', 'config.approve without a passphrase');
    r = await rogue.request('config.approve', { hash: diff.current_hash }, [Buffer.alloc(0)]);
    t.equal(refusal(r).code, 'bad_request', 'config.approve with an empty passphrase');
    r = await rogue.request('config.approve', { hash: diff.current_hash }, [WRONG]);
    t.equal(refusal(r).code, 'wrong_passphrase', 'config.approve with a wrong passphrase');
    const again = (await rogue.request('config.diff'))['result'] as { approved: boolean };
    t.equal(again.approved, false, 'the config is still unapproved');
    t.ok(readFileSync(vaultPath).equals(vaultBefore), 'the vault file is byte for byte the same');
  });
});
