// The ssh-agent front door as users deploy it: the daemon as a non-root
// system user, OpenSSH's `ssh` and `ssh-add -l` run AS A SEPARATE AGENT
// USER against a real sshd, decisions by an approver of the daemon user.
// Rows: keys listed; an approved login (control); `cred rm` and `postern
// lock` while a sign request waits for approval: SSH_AGENT_FAILURE (ssh is
// refused by the agent, no login), journaled with the code, no signature,
// a late decision not taken; the key's secret parts in nothing ssh prints,
// the journal or the daemon log.
import t from 'tap';
import { startSshd } from '../helpers/sshd';
import { sshDefinition } from '../helpers/ssh-credential';
import { keySecrets } from '../helpers/ssh-agent-stack';
import { setprivAs, type Run } from '../helpers/identity-users';
import { deploy, entries, type Card, type Deploy } from '../helpers/deploy-users';

function forms(parts: Buffer[]): string[] {
  const out: string[] = [];
  for (const b of parts) {
    if (b.length > 200) {
      out.push(b.toString('latin1'));
      continue;
    }
    out.push(b.toString('hex'), b.toString('base64').slice(0, -4), b.toString('base64url').slice(0, -4));
  }
  return out;
}

t.test('ssh and ssh-add as the agent user, the daemon as its own user', { timeout: 180_000 }, async (t) => {
  const sshd = await startSshd();
  t.teardown(() => sshd.close());
  const d: Deploy = await deploy(t, { handler: (_q, _b, res) => void res.end('x') });
  const def =
    sshDefinition({
      name: 'box',
      port: sshd.port,
      user: sshd.user,
      hostKey: sshd.hostKeyFingerprint,
      commands: ['echo *'],
    }) + 'ssh_agent = true\n';
  const add = (): Run => d.addCred('box', def, sshd.keys.ed25519.privateKey);
  let r = add();
  t.equal(r.code, 0, r.stderr);
  const secretForms = forms(keySecrets(sshd.keys.ed25519.privateKey));
  const printed: string[] = [];

  const sshAdd = async (): Promise<Run> => {
    const x = await setprivAs(d.agentUser, ['ssh-add', '-l'], {
      cwd: d.agentHome,
      env: { HOME: d.agentHome, SSH_AUTH_SOCK: d.sshAgentSock },
    });
    printed.push(x.stdout, x.stderr);
    return x;
  };
  const ssh = (cmd: string): Promise<Run> =>
    setprivAs(
      d.agentUser,
      [
        'ssh',
        '-o',
        `IdentityAgent=${d.sshAgentSock}`,
        '-o',
        'UserKnownHostsFile=/dev/null',
        '-o',
        'StrictHostKeyChecking=no',
        '-o',
        'BatchMode=yes',
        '-o',
        'ConnectTimeout=20',
        '-p',
        String(sshd.port),
        `${sshd.user}@127.0.0.1`,
        cmd,
      ],
      { cwd: d.agentHome, env: { HOME: d.agentHome } },
    ).then((x) => {
      printed.push(x.stdout, x.stderr);
      return x;
    });
  const cardAfter = async (from: number): Promise<Card | null> => d.approver.nextCard(from, 20_000);
  const refusedSigns = (code: string): Record<string, unknown>[] =>
    entries(d.journal()).filter((e) => e['kind'] === 'ssh_agent_refused' && e['code'] === code);
  const signs = (): number => entries(d.journal()).filter((e) => e['kind'] === 'ssh_agent_sign').length;

  await t.test('ssh-add -l lists the vault key, named by its credential', async (t) => {
    const x = await sshAdd();
    t.equal(x.code, 0, x.stderr);
    t.match(
      x.stdout,
      new RegExp(`^256 ${sshd.keys.ed25519.fingerprint.replace(/[+/]/g, (c) => `\\${c}`)} box \\(ED25519\\)\\n$`),
      x.stdout,
    );
  });

  await t.test('an approved login works (control)', async (t) => {
    const from = d.approver.cards.length;
    const p = ssh('echo approved-login');
    const card = await cardAfter(from);
    t.equal(card?.credential, 'box');
    t.equal(card?.process.uid, d.agentUid, "the card is the agent user's ssh");
    await d.approver.decide(card!, 'once');
    const x = await p;
    t.equal(x.code, 0, x.stderr);
    t.equal(x.stdout, 'approved-login\n');
  });

  await t.test(
    'cred rm while a sign request waits: refused (unknown_credential), no signature, no login',
    async (t) => {
      const signed = signs();
      const before = refusedSigns('unknown_credential').length;
      const from = d.approver.cards.length;
      const p = ssh('echo should-not-run-rm');
      const card = await cardAfter(from);
      t.ok(card, 'a card is pending');
      const rm = d.postern('cred', 'rm', 'box', '--passphrase-file', d.passFile);
      t.equal(rm.code, 0, rm.stderr);
      const late = await d.approver.decide(card!, 'once');
      t.equal(
        (late['result'] as { taken?: boolean } | undefined)?.taken,
        false,
        `late decision not taken: ${JSON.stringify(late)}`,
      );
      const x = await p;
      t.equal(x.code, 255, `ssh failed: ${x.stderr}`);
      t.notMatch(x.stdout, /should-not-run/, 'the command did not run');
      t.match(x.stderr, /agent refused operation|Permission denied/, x.stderr);
      t.equal(signs(), signed, 'no ssh_agent_sign journaled');
      const refused = refusedSigns('unknown_credential');
      t.equal(
        refused.length,
        before + 1,
        `journaled ssh_agent_refused unknown_credential: ${JSON.stringify(refused.at(-1))}`,
      );
      t.equal(refused.at(-1)?.['request'], 'sign');
      t.notOk(
        sshd.processesOf(sshd.user).some((c) => c.includes('should-not-run')),
        'nothing ran on the server',
      );
    },
  );

  await t.test('postern lock while a sign request waits: refused (vault_locked), no signature, no login', async (t) => {
    r = add();
    t.equal(r.code, 0, r.stderr);
    const signed = signs();
    const before = refusedSigns('vault_locked').length;
    const from = d.approver.cards.length;
    const p = ssh('echo should-not-run-lock');
    const card = await cardAfter(from);
    t.ok(card, 'a card is pending');
    const lk = d.postern('lock');
    t.equal(lk.code, 0, lk.stderr);
    const x = await p;
    t.equal(x.code, 255, `ssh failed: ${x.stderr}`);
    t.notMatch(x.stdout, /should-not-run/);
    const listed = await sshAdd();
    t.equal(listed.code, 1, 'no keys listed while locked');
    t.match(listed.stdout + listed.stderr, /no identities/i);
    const un = d.postern('unlock', '--passphrase-file', d.passFile);
    t.equal(un.code, 0, un.stderr);
    const late = await d.approver.decide(card!, 'once');
    t.not(
      (late['result'] as { taken?: boolean } | undefined)?.taken,
      true,
      `late decision not taken: ${JSON.stringify(late)}`,
    );
    t.equal(signs(), signed, 'no ssh_agent_sign journaled');
    const refused = refusedSigns('vault_locked');
    t.equal(
      refused.length,
      before + 1,
      `journaled ssh_agent_refused vault_locked: ${JSON.stringify(entries(d.journal()).slice(-4))}`,
    );
    t.equal((await sshAdd()).code, 0, 'keys listed again after unlock');
  });

  await t.test("the key's secret parts are in nothing ssh printed, the journal or the daemon log", async (t) => {
    const hay = { printed: printed.join('\n'), journal: d.journal(), log: d.daemonLog() };
    for (const [where, text] of Object.entries(hay))
      t.same(
        secretForms.filter((f) => text.includes(f)),
        [],
        where,
      );
  });
});
