// OpenSSH's own tools that ask an agent to sign something other than
// a login, against postern's ssh-agent socket: `ssh-add -T` (random data),
// `ssh-keygen -Y sign` (an SSHSIG file signature, namespace "file" and
// "git"), `git commit -S` with gpg.format = ssh. The approver allows
// everything once, so only the rule of SPEC §12 stops them: each must fail,
// be journaled as ssh_agent_refused from that process, and no ssh_agent_sign.
import t from 'tap';
import type { Test } from 'tap';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { startAgentStack, AgentStack, runChild, keySecrets } from '../helpers/ssh-agent-stack';
import { eventually } from '../helpers/postern';

let a: AgentStack;
t.before(async () => {
  a = await startAgentStack();
  a.decision = 'once';
});
t.teardown(async () => {
  await a?.close();
});

const env = () => ({ PATH: '/usr/bin:/bin', HOME: '/nonexistent', LANG: 'C', SSH_AUTH_SOCK: a.agentSock });
const lastSeq = (): number => a.entries().at(-1)?.seq ?? 0;

async function refusedFrom(t: Test, from: number, pid: number, cards: number): Promise<void> {
  await eventually(() => a.entries().some((e) => e.seq > from && e.kind === 'ssh_agent_refused'), 3000);
  const added = a.entries().filter((e) => e.seq > from);
  t.same(
    added.filter((e) => e.kind === 'ssh_agent_sign'),
    [],
    'no ssh_agent_sign',
  );
  const refused = added.filter((e) => e.kind === 'ssh_agent_refused' && e['request'] === 'sign');
  t.ok(
    refused.length >= 1,
    `journaled as ssh_agent_refused (${JSON.stringify(added.map((e) => [e.kind, e['code'], e['pid']]))})`,
  );
  t.ok(
    refused.every((e) => e['pid'] === pid || /\/usr\/bin\/ssh-keygen$/.test(String(e['exe']))),
    `each refusal names the signing process (${JSON.stringify(refused.map((e) => [e['pid'], e['exe']]))})`,
  );
  t.equal(a.cards.length, cards, 'no card was shown for it');
}

t.test('ssh-add -l lists the credential', async (t) => {
  const r = await runChild('/usr/bin/ssh-add', ['-l'], env());
  a.keep('ssh-add -l', r.stdout + r.stderr);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /deploy \(ED25519\)/);
});

t.test('ssh-add -T: a signature of random data is refused and journaled', async (t) => {
  const pub = join(a.scratch, 'deploy.pub');
  writeFileSync(pub, a.sshd.keys.ed25519.publicKey);
  const from = lastSeq();
  const cards = a.cards.length;
  const r = await runChild('/usr/bin/ssh-add', ['-T', pub], env());
  a.keep('ssh-add -T', r.stdout + r.stderr);
  t.not(r.code, 0, `ssh-add -T fails (${r.stderr.trim()})`);
  await refusedFrom(t, from, r.pid, cards);
});

for (const ns of ['file', 'git']) {
  t.test(`ssh-keygen -Y sign -n ${ns}: refused and journaled`, async (t) => {
    const pub = join(a.scratch, 'deploy.pub');
    writeFileSync(pub, a.sshd.keys.ed25519.publicKey);
    const msg = join(a.scratch, `msg-${ns}`);
    writeFileSync(msg, 'tree 0000\nauthor x\n\nsigned?\n');
    const from = lastSeq();
    const cards = a.cards.length;
    const r = await runChild('/usr/bin/ssh-keygen', ['-Y', 'sign', '-f', pub, '-n', ns, msg], env());
    a.keep(`ssh-keygen -Y sign ${ns}`, r.stdout + r.stderr);
    t.not(r.code, 0, `ssh-keygen fails (${r.stderr.trim()})`);
    let sigExists = true;
    try {
      execFileSync('test', ['-e', `${msg}.sig`]);
    } catch {
      sigExists = false;
    }
    t.notOk(sigExists, 'no .sig file was written');
    await refusedFrom(t, from, r.pid, cards);
  });
}

t.test('git commit -S with gpg.format=ssh: refused and journaled, no signed commit', async (t) => {
  const work = join(a.scratch, 'sigrepo');
  mkdirSync(work);
  const pub = join(a.scratch, 'deploy.pub');
  writeFileSync(pub, a.sshd.keys.ed25519.publicKey);
  const genv = {
    ...env(),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@example.test',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@example.test',
  };
  execFileSync('git', ['init', '-q', '-b', 'main', work], { env: genv });
  const from = lastSeq();
  const cards = a.cards.length;
  const r = await runChild(
    'git',
    ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${pub}`, 'commit', '-S', '--allow-empty', '-q', '-m', 'signed'],
    genv,
    { cwd: work },
  );
  a.keep('git commit -S', r.stdout + r.stderr);
  t.not(r.code, 0, `git commit -S fails (${r.stderr.trim()})`);
  await refusedFrom(t, from, r.pid, cards);
});

t.test('no form of the private key appears outside the vault', async (t) => {
  t.same(await a.exposed(keySecrets(a.sshd.keys.ed25519.privateKey)), []);
});
