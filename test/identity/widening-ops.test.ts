// SPEC §1: every action that widens authority needs proof of the
// passphrase. An agent (same uid, so it reaches admin.sock) without it is
// refused for each, with a missing, empty or wrong passphrase, and the vault
// file stays byte for byte the same.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PASSPHRASE } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';
import { startStack } from '../helpers/stack';

type Reply = Record<string, unknown>;
const WRONG = Buffer.from('not the passphrase, sorry');
const NEW_PASSPHRASE = Buffer.from('a brand new passphrase 42');

function refusal(r: Reply): { code?: string; message?: string } {
  return r['ok'] === false ? (r['error'] as { code: string; message: string }) : {};
}

t.test('without the passphrase no widening operation goes through', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'self-approval-secret-0123',
  );
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
  // The agent's own admin connection.
  const rogue = await TestAdmin.connect(adminPath);
  t.teardown(() => rogue.close());

  await t.test('every widening operation needs the passphrase', async (t) => {
    const shown = (await rogue.request('cred.show', { name: 'api' }))['result'] as {
      definition: Record<string, unknown>;
    };
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
    const list = ((await rogue.request('cred.list'))['result'] as { credentials: { name: string }[] }).credentials.map(
      (c) => c.name,
    );
    t.same(list, ['api'], 'nothing added or removed');
    const now = ((await rogue.request('cred.show', { name: 'api' }))['result'] as { definition: unknown }).definition;
    t.same(now, original, 'the definition is unchanged');
    t.ok(readFileSync(vaultPath).equals(vaultBefore), 'the vault file is byte for byte the same');
  });

  await t.test('a changed config cannot be approved without the passphrase', async (t) => {
    const configPath = join(s.h.home, 'config.toml');
    writeFileSync(
      configPath,
      readFileSync(configPath, 'utf8').replace('[daemon]\n', '[daemon]\nagent_uids = [65534]\n'),
    );
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
