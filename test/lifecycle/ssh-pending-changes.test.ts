// POST /v1/ssh against Debian's sshd while the credential changes under a
// pending card, changed or removed while a command runs, and a lock while
// a command runs.
import t from 'tap';
import { agentRequest, cli } from '../helpers/postern';
import { startSshd } from '../helpers/sshd';
import { addSshCredential, sshDefinition, SshCredSpec } from '../helpers/ssh-credential';
import { auditList } from '../helpers/stack';
import { code, credRm, credUpdate, ErrBody, manualApprover, startStack } from '../helpers/lifecycle';

type E = Record<string, unknown>;

t.test('ssh: credential removed or narrowed under a pending card; lock mid-command', async (t) => {
  const sshd = await startSshd();
  t.teardown(() => sshd.close());
  const s = await startStack({ sshConfig: '' });
  t.teardown(() => s.close());
  const m = await manualApprover(s);
  const spec = (name: string, commands: string[]): SshCredSpec => ({
    name,
    port: sshd.port,
    user: sshd.user,
    hostKey: sshd.hostKeyFingerprint,
    commands,
    approve: 'each-use',
  });
  const add = (c: SshCredSpec): void => {
    const r = addSshCredential(s.h, c, sshd.keys.ed25519.path);
    if (r.code !== 0) throw new Error(r.stderr);
  };
  const ssh = (credential: string, command: string) => agentRequest(s.sock, 'POST', '/v1/ssh', { credential, command });

  await t.test('cred rm while the card is pending, then allowed: 404 unknown_credential, no login', async (t) => {
    add(spec('sgone', ['echo *']));
    const conns = sshd.connections();
    const from = m.cards.length;
    const p = ssh('sgone', 'echo hello');
    const card = await m.nextCard(from);
    t.ok(card, 'a card');
    const rm = await credRm(s, 'sgone');
    t.equal(rm.code, 0, rm.stderr);
    await m.decide(card!, 'once');
    const r = await p;
    t.equal(r.status, 404, r.text.slice(0, 300));
    t.equal(code(r), 'unknown_credential');
    t.equal(sshd.connections(), conns, 'sshd saw no connection');
  });

  await t.test('cred update narrows the commands while the card is pending: busy, nothing run', async (t) => {
    add(spec('snarrow', ['echo *', 'touch *']));
    const from = m.cards.length;
    const conns = sshd.connections();
    const p = ssh('snarrow', 'touch /tmp/pl-should-not-exist');
    const card = await m.nextCard(from);
    t.ok(card, 'a card');
    const u = await credUpdate(s, 'snarrow', sshDefinition(spec('snarrow', ['echo *'])));
    t.equal(u.code, 0, u.stderr);
    await m.decide(card!, 'once');
    const r = await p;
    t.equal(r.status, 429, r.text.slice(0, 300));
    t.equal(code(r), 'busy');
    t.match(r.text, /was changed while this request waited .*send it again/);
    t.equal(code(await ssh('snarrow', 'touch /tmp/pl-should-not-exist')), 'denied_policy', 'sent again: refused');
    t.equal(sshd.connections(), conns, 'sshd saw no connection');
  });

  await t.test('cred update and cred rm while a command runs: it completes (past its intent)', async (t) => {
    for (const [name, change] of [
      [
        'srotate',
        () => credUpdate(s, 'srotate', sshDefinition({ ...spec('srotate', ['sleep *']), approve: 'session' })),
      ],
      ['sremove', () => credRm(s, 'sremove')],
    ] as const) {
      add({ ...spec(name, ['sleep *']), approve: 'session' });
      const from = m.cards.length;
      const p = ssh(name, 'sleep 2');
      await m.decide((await m.nextCard(from))!, 'once');
      await new Promise((r) => setTimeout(r, 800));
      const u = await change();
      t.equal(u.code, 0, u.stderr);
      const r = await p;
      t.equal(r.status, 200, `${name}: answered as a success: ${r.text.slice(0, 300)}`);
      t.equal((r.json as { exit_code?: number }).exit_code, 0, `${name}: the command ran to its end`);
    }
  });

  await t.test('lock while a command runs: answered with a code, the journal pairs every intent', async (t) => {
    add({ ...spec('slock', ['sleep *']), approve: 'session' });
    const from = m.cards.length;
    const p = ssh('slock', 'sleep 4');
    const card = await m.nextCard(from);
    await m.decide(card!, 'once');
    await new Promise((r) => setTimeout(r, 1500));
    t.equal(cli(s.h, ['lock']).code, 0, 'lock');
    const r = await Promise.race([p, new Promise<null>((res) => setTimeout(() => res(null), 15_000))]);
    t.not(r, null, 'answered');
    t.comment(`reply: ${r?.status} ${r?.text.slice(0, 300)}`);
    t.equal(r?.status, 423, 'the lock is the reason given');
    t.equal(code(r!), 'vault_locked');
    t.equal((r!.json as ErrBody).error?.maybe_executed, true, 'the command was running: it may have executed');
    t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
  });

  await t.test('every ssh_intent has its ssh_outcome; the journal verifies after stop', async (t) => {
    const list = auditList<E>(s);
    const kind = (e: E): string => String(e['kind'] ?? (e['event'] as E | undefined)?.['kind'] ?? e['type']);
    const intents = list.filter((e) => kind(e) === 'ssh_intent').map((e) => e['seq']);
    const outcomes = new Set(
      list.filter((e) => kind(e) === 'ssh_outcome').map((e) => e['intent_seq'] ?? (e['event'] as E)?.['intent_seq']),
    );
    t.comment(`kinds: ${list.map((e) => `${String(e['seq'])}:${kind(e)}`).join(' ')}`);
    t.same(
      intents.filter((i) => !outcomes.has(i)),
      [],
      'no intent is left without an outcome',
    );
    t.equal(await s.d.stop(), 0);
    const v = cli(s.h, ['audit', 'verify']);
    t.equal(v.code, 0, v.stdout + v.stderr);
  });
});
