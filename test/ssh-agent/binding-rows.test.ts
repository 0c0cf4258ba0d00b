// Adversarial rows: binding and signing rules of the ssh-agent front door (SPEC §12)
// that the other files do not check, each with a raw protocol client:
// - two bindings on one connection, the pinned server first, then another:
//   a login for the first session is not signed (the last binding governs,
//   an older one cannot be replayed on the connection);
// - an RSA login whose announced algorithm differs from the one the
//   request's flags ask for (or SHA-1 ssh-rsa): refused, and refused before
//   a human is asked (the mismatch is known without approval);
// - the key of a credential whose ssh_agent is false: unknown_credential;
// - a card pending when the vault is locked: the sign request fails, nothing
//   is signed, then or after the unlock.
import t from 'tap';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { startAgentStack, AgentStack, Entry } from '../helpers/ssh-agent-stack';
import { RawAgentClient, MSG, SIGN_FLAGS, blobOfLine, boundSession, userauthData } from '../helpers/raw-agent-client';
import { cli, eventually } from '../helpers/postern';

let a: AgentStack;
t.before(async () => {
  a = await startAgentStack({
    sshd: { secondServer: true },
    creds: [
      { name: 'deploy', key: 'ed25519', sshAgent: true },
      { name: 'deploy-rsa', key: 'rsa', sshAgent: true },
      { name: 'exec-only', key: 'ecdsa', sshAgent: false },
    ],
  });
});
t.teardown(async () => {
  await a?.close();
});

const blob = (k: 'ed25519' | 'rsa' | 'ecdsa'): Buffer => blobOfLine(a.sshd.keys[k].publicKey);
const hostBlob = (): Buffer => blobOfLine(a.sshd.hostKey);
const hostPrivate = (): string => readFileSync(a.sshd.hostKeys[0]!.privateKeyPath, 'utf8');
const otherHostPrivate = (): string => readFileSync(a.sshd.secondServer!.hostKeys[0]!.privateKeyPath, 'utf8');
const lastSeq = (): number => a.entries().at(-1)?.seq ?? 0;

async function connect(t: Test): Promise<RawAgentClient> {
  const c = await RawAgentClient.connect(a.agentSock);
  t.teardown(() => c.close());
  return c;
}

// What the journal gained since `from`, once the refusal is written.
async function added(from: number, kind = 'ssh_agent_refused'): Promise<Entry[]> {
  await eventually(() => a.entries().some((e) => e.seq > from && e.kind === kind), 3000);
  return a.entries().filter((e) => e.seq > from);
}

// A new connection bound to a session with the pinned server, and the data
// of a login for that session with `key` naming `algorithm`.
async function boundLogin(
  t: Test,
  key: 'ed25519' | 'rsa' | 'ecdsa',
  algorithm: string,
): Promise<{ c: RawAgentClient; data: Buffer; from: number; cards: number }> {
  const c = await connect(t);
  const sid = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), sid))).type, MSG.SUCCESS);
  const data = userauthData({ sessionId: sid, user: a.sshd.user, algorithm, keyBlob: blob(key), hostKey: hostBlob() });
  return { c, data, from: lastSeq(), cards: a.cards.length };
}

// The sign request was refused as `refused` says, and nothing was signed.
async function refusedNotSigned(t: Test, from: number, refused: Record<string, unknown>): Promise<Entry[]> {
  const got = await added(from);
  t.same(
    got.filter((e) => e.kind === 'ssh_agent_sign'),
    [],
    'no signature journaled',
  );
  t.match(
    got.filter((e) => e.kind === 'ssh_agent_refused'),
    [refused],
  );
  return got;
}

t.test('a second binding governs: a login for the first, pinned session is not signed', async (t) => {
  a.decision = 'once';
  const c = await connect(t);
  const pinned = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), pinned))).type, MSG.SUCCESS, 'bound to the pinned server');
  t.equal(
    (await c.sessionBind(boundSession(otherHostPrivate(), randomBytes(32)))).type,
    MSG.SUCCESS,
    'then to another server',
  );
  const from = lastSeq();
  const cards = a.cards.length;
  const data = userauthData({
    sessionId: pinned,
    user: a.sshd.user,
    algorithm: 'ssh-ed25519',
    keyBlob: blob('ed25519'),
    hostKey: hostBlob(),
  });
  t.equal(await c.sign(blob('ed25519'), data), null, 'SSH_AGENT_FAILURE');
  await refusedNotSigned(t, from, {
    code: 'host_key_mismatch',
    request: 'sign',
    host_key: a.sshd.secondServer!.hostKeyFingerprint,
  });
  t.equal(a.cards.length, cards, 'no card');
});

t.test('an RSA login whose algorithm the flags do not ask for: refused before any card', async (t) => {
  const rows: { what: string; algorithm: string; flags: number }[] = [
    { what: 'login rsa-sha2-512, flags ask rsa-sha2-256', algorithm: 'rsa-sha2-512', flags: SIGN_FLAGS.RSA_SHA2_256 },
    { what: 'login rsa-sha2-256, flags ask rsa-sha2-512', algorithm: 'rsa-sha2-256', flags: SIGN_FLAGS.RSA_SHA2_512 },
    { what: 'login ssh-rsa (SHA-1), no flags', algorithm: 'ssh-rsa', flags: 0 },
    { what: 'login ssh-rsa (SHA-1), flags ask rsa-sha2-256', algorithm: 'ssh-rsa', flags: SIGN_FLAGS.RSA_SHA2_256 },
  ];
  for (const row of rows) {
    await t.test(row.what, async (t) => {
      // Allow once: whatever reaches a human is approved, so only the rule stops it.
      a.decision = 'once';
      const { c, data, from, cards } = await boundLogin(t, 'rsa', row.algorithm);
      t.equal(await c.sign(blob('rsa'), data, row.flags), null, 'SSH_AGENT_FAILURE');
      await refusedNotSigned(t, from, { code: 'denied_policy', request: 'sign', credential: 'deploy-rsa' });
      t.same(
        a.cards.slice(cards).map((k) => k.action),
        [],
        'no human is asked to approve a login that cannot be signed',
      );
    });
  }
});

t.test('the key of a credential with ssh_agent = false: unknown_credential, not signed', async (t) => {
  a.decision = 'once';
  const c = await connect(t);
  const sid = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), sid))).type, MSG.SUCCESS);
  t.notOk(
    (await c.identities()).some((i) => i.blob.equals(blob('ecdsa'))),
    'the key is not listed',
  );
  const from = lastSeq();
  const data = userauthData({
    sessionId: sid,
    user: a.sshd.user,
    algorithm: 'ecdsa-sha2-nistp256',
    keyBlob: blob('ecdsa'),
    hostKey: hostBlob(),
  });
  t.equal(await c.sign(blob('ecdsa'), data), null, 'SSH_AGENT_FAILURE');
  await refusedNotSigned(t, from, { code: 'unknown_credential', request: 'sign' });
});

t.test('a card pending when the vault is locked: nothing is signed, then or after the unlock', async (t) => {
  a.decision = 'none';
  const { c, data, from, cards } = await boundLogin(t, 'ed25519', 'ssh-ed25519');
  const pending = c.sign(blob('ed25519'), data);
  t.ok(await eventually(() => a.cards.length > cards, 10_000), 'a card is pending');
  const locked = cli(a.s.h, ['lock']);
  t.equal(locked.code, 0, locked.stderr);
  let unlocked = false;
  t.teardown(() => {
    if (!unlocked) cli(a.s.h, ['unlock', '--passphrase-file', a.s.h.passFile]);
  });
  t.equal(await pending, null, 'SSH_AGENT_FAILURE');
  const u = cli(a.s.h, ['unlock', '--passphrase-file', a.s.h.passFile]);
  t.equal(u.code, 0, u.stderr);
  unlocked = true;
  const got = await refusedNotSigned(t, from, { request: 'sign', credential: 'deploy' });
  t.comment(
    `refusal: ${JSON.stringify(got.filter((e) => e.kind === 'ssh_agent_refused').map((e) => [e['code'], e['withdrawn']]))}`,
  );
  t.notOk(c.isClosed, 'the connection is still open');
  a.decision = 'once';
});
