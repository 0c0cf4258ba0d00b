// The ssh-agent front door (SPEC §12) with the real OpenSSH client and
// Debian's sshd: the socket lists the public keys of the SSH credentials
// with ssh_agent = true (comment: the credential's name) and no other;
// `ssh -o IdentityAgent=<postern's socket>` logs in with an ed25519 and an
// RSA key after an approval whose card names the credential, the pinned
// host key, the user and the ssh process; the login is journaled as
// ssh_agent_sign; a session rooted at a shell covers the logins of the ssh
// processes under it; and no form of either private key appears in any
// output, the daemon log, the journal, sshd's log or a file of the home.
// approve = "each-use" asks for every login; an ECDSA key signs too.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startAgentStack, AgentStack, keySecrets, runChild, sshOptions, Entry, Run } from '../helpers/ssh-agent-stack';
import type { Card } from '../helpers/stack';
import { RawAgentClient, blobOfLine } from '../helpers/raw-agent-client';
import type { CardProcess } from '../../shared/admin-protocol';

let a: AgentStack;

t.before(async () => {
  a = await startAgentStack({
    creds: [
      { name: 'deploy', key: 'ed25519', sshAgent: true },
      { name: 'build', key: 'rsa', sshAgent: true },
      { name: 'careful', key: 'ecdsa', sshAgent: true, approve: 'each-use' },
      { name: 'exec-only', key: 'rsaPem', sshAgent: false },
    ],
  });
});
t.teardown(() => a?.close());

const sign = (): Entry[] => a.entries('ssh_agent_sign');
const pubFile = (name: 'ed25519' | 'rsa' | 'ecdsa'): string => {
  const p = join(a.scratch, `${name}.pub`);
  writeFileSync(p, a.sshd.keys[name].publicKey + '\n');
  return p;
};

t.test('the socket lists the keys of ssh_agent credentials only, each with its name as comment', async (t) => {
  const c = await RawAgentClient.connect(a.agentSock);
  t.teardown(() => c.close());
  const ids = await c.identities();
  const shown = ids.map((i) => ({ blob: i.blob.toString('base64'), comment: i.comment }));
  t.same(
    shown.sort((x, y) => x.comment.localeCompare(y.comment)),
    [
      { blob: blobOfLine(a.sshd.keys.rsa.publicKey).toString('base64'), comment: 'build' },
      { blob: blobOfLine(a.sshd.keys.ecdsa.publicKey).toString('base64'), comment: 'careful' },
      { blob: blobOfLine(a.sshd.keys.ed25519.publicKey).toString('base64'), comment: 'deploy' },
    ],
    'deploy, build and careful, not exec-only (ssh_agent = false)',
  );
  const listed = execFileSync('/usr/bin/ssh-add', ['-L'], {
    env: { PATH: '/usr/bin:/bin', SSH_AUTH_SOCK: a.agentSock },
  })
    .toString()
    .trim()
    .split('\n')
    .sort();
  const line = (k: 'ed25519' | 'rsa' | 'ecdsa', name: string): string =>
    `${a.sshd.keys[k].publicKey.split(' ').slice(0, 2).join(' ')} ${name}`;
  t.same(
    listed,
    [line('rsa', 'build'), line('ecdsa', 'careful'), line('ed25519', 'deploy')].sort(),
    'ssh-add -L shows the same',
  );
  t.notOk(listed.join('\n').includes(a.sshd.keys.rsaPem.publicKey.split(' ')[1]!), "no trace of exec-only's key");
});

t.test("the ssh-agent socket has the agent socket's owner and mode", async (t) => {
  const agent = statSync(a.s.sock);
  const front = statSync(a.agentSock);
  t.ok(front.isSocket());
  t.same([front.mode, front.uid, front.gid], [agent.mode, agent.uid, agent.gid]);
});

t.test('cred add says that ssh_agent = true is a widening, for that credential only', async (t) => {
  const deploy = a.added.get('deploy')!;
  t.match(deploy.stdout + deploy.stderr, /ssh_agent = true: .*`commands`/s);
  const plain = a.added.get('exec-only')!;
  t.notMatch(plain.stdout + plain.stderr, /ssh_agent/);
});

t.test('ssh logs in through the front door after an approval, journaled as ssh_agent_sign', async (t) => {
  const before = sign().length;
  const cardsBefore = a.cards.length;
  a.decision = 'session';
  const r = await a.ssh({ command: 'id -un', identity: pubFile('ed25519') });
  t.equal(r.code, 0, `ssh exits 0 (${r.stderr.trim()})`);
  t.equal(r.stdout.trim(), a.sshd.user, 'the command ran as the credential user');
  t.match(
    a.sshd.logs(),
    new RegExp(
      `Accepted publickey for ${a.sshd.user} from 127\\.0\\.0\\.1 port \\d+ ssh2: ED25519 ${a.sshd.keys.ed25519.fingerprint.replace(/[+/]/g, '\\$&')}`,
    ),
    'sshd accepted the ed25519 key',
  );

  const cards = a.cards.slice(cardsBefore);
  t.equal(cards.length, 1, 'one card');
  const card = cards[0]!;
  t.equal(card.credential, 'deploy');
  t.equal(card.process.pid, r.pid, 'the requester is the ssh process');
  t.equal((card.process as unknown as CardProcess).exe, '/usr/bin/ssh');
  t.match(card.action, { host: '127.0.0.1', host_key: a.sshd.hostKeyFingerprint, user: a.sshd.user });

  const added = sign().slice(before);
  t.equal(added.length, 1, 'one ssh_agent_sign entry');
  t.match(added[0], {
    pid: r.pid,
    exe: '/usr/bin/ssh',
    credential: 'deploy',
    host: '127.0.0.1',
    host_key: a.sshd.hostKeyFingerprint,
    user: a.sshd.user,
    session: /^[0-9a-f]{64}$/,
    algorithm: 'ssh-ed25519',
  });
});

t.test('an RSA key signs with SHA-2 for the same login', async (t) => {
  const before = sign().length;
  const r = await a.ssh({ identity: pubFile('rsa') });
  t.equal(r.code, 0, `ssh exits 0 (${r.stderr.trim()})`);
  t.match(a.sshd.logs(), new RegExp(`Accepted publickey for ${a.sshd.user} .* RSA `), 'sshd accepted the RSA key');
  const added = sign().slice(before);
  t.equal(added.length, 1);
  t.match(added[0], { credential: 'build', algorithm: /^rsa-sha2-(256|512)$/ });
});

// Two ssh logins, one after the other, from one shell; the approver roots a
// session at that shell when it may, else allows once.
async function twoLogins(key: 'ed25519' | 'ecdsa'): Promise<{ run: Run; cards: Card[]; signed: Entry[] }> {
  const before = sign().length;
  const cardsBefore = a.cards.length;
  let shell = -1;
  a.decision = (card) => {
    const root = [card.process, ...card.ancestors].find((p) => p.pid === shell);
    if (!root) return { decision: 'deny' };
    return card.approve === 'session' ? { decision: 'session', root_key: root.key } : { decision: 'once' };
  };
  const ssh = ['/usr/bin/ssh', ...sshOptions(a.agentSock, a.knownHosts, pubFile(key)), '-p', String(a.sshd.port)];
  const one = [...ssh, `${a.sshd.user}@127.0.0.1`, 'true'].map((x) => `'${x}'`).join(' ');
  try {
    const run = await runChild(
      '/bin/sh',
      ['-c', `${one} && ${one} && echo both`],
      { PATH: '/usr/bin:/bin' },
      {
        onSpawn: (pid) => (shell = pid),
      },
    );
    a.keep('two logins', run.stdout + run.stderr);
    return { run, cards: a.cards.slice(cardsBefore), signed: sign().slice(before) };
  } finally {
    a.decision = 'session';
  }
}

t.test('a session rooted at a shell covers both ssh logins under it: one card', async (t) => {
  const { run, cards, signed } = await twoLogins('ed25519');
  t.equal(run.code, 0, run.stderr.trim());
  t.equal(run.stdout.trim(), 'both');
  t.equal(cards.length, 1, 'the second login needed no card');
  t.equal(signed.length, 2, 'two ssh_agent_sign entries');
  t.not(signed[0]!['pid'], signed[1]!['pid'], 'from two ssh processes');
  t.not(signed[0]!['session'], signed[1]!['session'], 'for two SSH sessions');
});

t.test('approve = "each-use": every login has its card (and an ECDSA key signs)', async (t) => {
  const { run, cards, signed } = await twoLogins('ecdsa');
  t.equal(run.code, 0, run.stderr.trim());
  t.equal(cards.length, 2, 'two cards');
  t.same(
    cards.map((c) => [c.credential, c.approve]),
    [
      ['careful', 'each-use'],
      ['careful', 'each-use'],
    ],
  );
  t.equal(signed.length, 2);
  t.match(signed, [
    { credential: 'careful', algorithm: 'ecdsa-sha2-nistp256' },
    { credential: 'careful', algorithm: 'ecdsa-sha2-nistp256' },
  ]);
});

t.test('no form of either private key appears outside the vault', async (t) => {
  const secrets = (['ed25519', 'rsa', 'ecdsa'] as const).flatMap((k) => keySecrets(a.sshd.keys[k].privateKey));
  t.same(await a.exposed(secrets), []);
});
