// `git push` over SSH through the ssh-agent front door (SPEC §12, §11):
// `postern run` puts postern's ssh-agent socket in SSH_AUTH_SOCK, over the
// caller's own, so git's ssh signs its login with a credential whose key
// stays in the vault; the bare repository on Debian's sshd then holds the
// commit. The card shows the ssh process under git, the login is
// journaled as ssh_agent_sign, the same push without `postern run` has no
// agent and fails, and no form of the private key appears in any output,
// the daemon log, the journal, sshd's log or a file of the home.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import {
  startAgentStack,
  AgentStack,
  gitRepos,
  headOf,
  keySecrets,
  runChild,
  sshOptions,
} from '../helpers/ssh-agent-stack';
import { cliBytes } from '../helpers/cli-bytes';
import type { CardProcess } from '../../shared/admin-protocol';

let a: AgentStack;
let repos: { remotePath: string; work: string };

t.before(async () => {
  a = await startAgentStack();
  repos = gitRepos(a.sshd, a.scratch);
});
t.teardown(() => a?.close());

// git with no configuration of the machine's or the user's, its ssh limited
// to the agent in SSH_AUTH_SOCK and to the sshd's pinned host key; the
// caller's own SSH_AUTH_SOCK names no agent.
function gitEnv(): Record<string, string> {
  return {
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_SSH_COMMAND: ['/usr/bin/ssh', ...sshOptions(null, a.knownHosts)].join(' '),
    SSH_AUTH_SOCK: '/nonexistent/agent.sock',
  };
}

const remoteUrl = (): string => `ssh://${a.sshd.user}@127.0.0.1:${a.sshd.port}${repos.remotePath}`;
const localHead = (): string => execFileSync('git', ['-C', repos.work, 'rev-parse', 'HEAD']).toString().trim();

t.test('postern run sets SSH_AUTH_SOCK to the ssh-agent socket', async (t) => {
  const r = await cliBytes({ ...a.s.h.env, ...gitEnv() }, ['run', '--', '/bin/sh', '-c', 'printf %s "$SSH_AUTH_SOCK"']);
  a.keep('run printf', Buffer.concat([r.stdout, Buffer.from(r.stderr)]));
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout.toString(), a.agentSock);
});

t.test('without postern run the push has no agent and fails', async (t) => {
  const r = await runChild('git', ['-C', repos.work, 'push', remoteUrl(), 'main'], { ...a.s.h.env, ...gitEnv() });
  a.keep('git push without run', r.stdout + r.stderr);
  t.not(r.code, 0, 'git push fails');
  t.match(r.stderr, /Permission denied \(publickey\)/);
  t.equal(headOf(repos.remotePath), '', 'the remote has no main');
});

t.test('git push under postern run reaches the bare repository', async (t) => {
  a.decision = 'session';
  const cards = a.cards.length;
  const before = a.entries('ssh_agent_sign').length;
  const r = await cliBytes({ ...a.s.h.env, ...gitEnv() }, [
    'run',
    '--',
    'git',
    '-C',
    repos.work,
    'push',
    remoteUrl(),
    'main',
  ]);
  a.keep('git push under run', Buffer.concat([r.stdout, Buffer.from(r.stderr)]));
  t.equal(r.code, 0, `git push exits 0 (${r.stderr.trim()})`);
  t.match(r.stderr, /\* \[new branch\]\s+main -> main/);
  t.equal(headOf(repos.remotePath), localHead(), "the remote's main is the pushed commit");

  const seen = a.cards.slice(cards);
  t.equal(seen.length, 1, 'one card');
  const card = seen[0]!;
  t.equal(card.credential, 'deploy');
  t.equal((card.process as unknown as CardProcess).exe, '/usr/bin/ssh', 'the requester is ssh');
  const chain = (card.ancestors as unknown as CardProcess[]).map((p) => p.exe);
  t.ok(chain.includes('/usr/bin/git'), `git is among its ancestors (${chain.join(' < ')})`);
  t.match(card.action, { host: '127.0.0.1', host_key: a.sshd.hostKeyFingerprint, user: a.sshd.user });

  const added = a.entries('ssh_agent_sign').slice(before);
  t.equal(added.length, 1, 'one ssh_agent_sign');
  t.match(added[0], {
    exe: '/usr/bin/ssh',
    credential: 'deploy',
    host_key: a.sshd.hostKeyFingerprint,
    user: a.sshd.user,
    algorithm: 'ssh-ed25519',
  });
});

t.test('no form of the private key appears outside the vault', async (t) => {
  t.same(await a.exposed(keySecrets(a.sshd.keys.ed25519.privateKey)), []);
});
