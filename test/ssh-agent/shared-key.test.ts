// One SSH key stored in two credentials with ssh_agent = true, each pinned
// to another server (or user): a login signs with the credential whose pin
// and user the login matches, whichever comes first by name. Before, the
// first by name was taken and the login to the other's server refused
// (host_key_mismatch), though a credential allowed it. Real OpenSSH and
// Debian's sshd; the approver's card and the journal name the credential
// that matched.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startAgentStack } from '../helpers/ssh-agent-stack';

// A pin that matches no server here (a SHA-256 fingerprint of 32 zero bytes).
const ELSEWHERE = `SHA256:${Buffer.alloc(32).toString('base64').replace(/=+$/, '')}`;

t.test('a key in two credentials signs for the one whose pin the login matches', async (t) => {
  const a = await startAgentStack({
    creds: [
      { name: 'a-elsewhere', key: 'ed25519', sshAgent: true, hostKey: ELSEWHERE },
      { name: 'b-other-user', key: 'ed25519', sshAgent: true, user: 'nobody-here' },
      { name: 'c-here', key: 'ed25519', sshAgent: true },
    ],
  });
  t.teardown(() => a.close());
  a.decision = 'once';
  const pub = join(a.scratch, 'ed25519.pub');
  writeFileSync(pub, a.sshd.keys.ed25519.publicKey + '\n');
  const cards = a.cards.length;
  const r = await a.ssh({ command: 'id -un', identity: pub });
  t.equal(r.code, 0, `ssh exits 0 (${r.stderr.trim()})`);
  t.equal(r.stdout.trim(), a.sshd.user, 'logged in as the credential user');
  t.same(
    a.cards.slice(cards).map((c) => c.credential),
    ['c-here'],
    'one card, for the credential pinned to this server and user',
  );
  t.match(a.entries('ssh_agent_sign'), [{ credential: 'c-here', host_key: a.sshd.hostKeyFingerprint }]);
});
