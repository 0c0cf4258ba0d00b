// What the ssh-agent front door refuses (SPEC §12), each answered
// SSH_AGENT_FAILURE, journaled as ssh_agent_refused with its code, and with
// no signature made: with the real OpenSSH client, a login to a server with
// another host key, as another user, through a forwarded agent (ssh -A, a
// second hop asking the first agent), and one the approver denies; with a
// raw protocol client, a sign request on a connection that never bound
// itself, a session-bind whose signature does not verify, data that is not
// a login for the bound session and user, a key no credential offers, a
// malformed request, adding, removing, locking and unlocking keys,
// smartcards, unknown extensions and message types, and anything while the
// vault is locked. OpenSSH's own ssh-agent, holding the same key, is the
// control: the same client commands succeed with it, so each refusal is
// postern's. Last, no form of the private key appears outside the vault.
import t from 'tap';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  startAgentStack,
  startStockAgent,
  AgentStack,
  StockAgent,
  knownHostsFile,
  runSsh,
  runChild,
  secondHopCommand,
  keySecrets,
  Entry,
  Run,
} from '../helpers/ssh-agent-stack';
import {
  RawAgentClient,
  MSG,
  blobOfLine,
  boundSession,
  frame,
  str,
  u32,
  userauthData,
  verifies,
} from '../helpers/raw-agent-client';
import { cli, eventually } from '../helpers/postern';

let a: AgentStack;
let stock: StockAgent;
let otherKnownHosts: string;

t.before(async () => {
  a = await startAgentStack({
    sshd: { secondUser: true, secondServer: true, extraConfig: ['DisableForwarding no', 'AllowAgentForwarding yes'] },
  });
  stock = await startStockAgent([a.sshd.keys.ed25519.path]);
  otherKnownHosts = knownHostsFile(a.scratch, a.sshd.secondServer!.port, a.sshd.secondServer!.hostKey);
});
t.teardown(async () => {
  await stock?.close();
  await a?.close();
});

const key = () => a.sshd.keys.ed25519;
const keyBlob = (): Buffer => blobOfLine(key().publicKey);
const hostBlob = (): Buffer => blobOfLine(a.sshd.hostKey);
const hostPrivate = (): string => readFileSync(a.sshd.hostKeys[0]!.privateKeyPath, 'utf8');
const otherHostPrivate = (): string => readFileSync(a.sshd.secondServer!.hostKeys[0]!.privateKeyPath, 'utf8');
const accepted = (): number => (a.sshd.logs().match(/^Accepted publickey for /gm) ?? []).length;
const acceptedOther = (): number => (a.sshd.secondServer!.logs().match(/^Accepted publickey for /gm) ?? []).length;

// Where the journal and sshd's log are now; `since` gives what a step added
// (one read of the journal each).
type Mark = { seq: number; accepted: number; logged: number };

// The daemon log's lines that give a refusal's reason.
function loggedRefusals(): Record<string, unknown>[] {
  return a.s.d
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l['event'] === 'ssh_agent_refused');
}

// The journal, once the daemon log (which crosses a pipe) has caught up
// with it: one log line per ssh_agent_refused entry.
async function settledEntries(): Promise<Entry[]> {
  const all = a.entries();
  const refused = all.filter((e) => e.kind === 'ssh_agent_refused').length;
  await eventually(() => loggedRefusals().length >= refused, 3000);
  return all;
}

function markOf(all: Entry[]): Mark {
  return { seq: all.length > 0 ? all[all.length - 1]!.seq : 0, accepted: accepted(), logged: loggedRefusals().length };
}

async function mark(): Promise<Mark> {
  return markOf(await settledEntries());
}

// What was added since `m`; `next` marks the end of it, for a step that
// follows at once.
async function since(m: Mark): Promise<{
  sign: Entry[];
  refused: Entry[];
  accepted: number;
  logged: Record<string, unknown>[];
  next: Mark;
}> {
  const all = await settledEntries();
  const added = all.filter((e) => e.seq > m.seq);
  return {
    sign: added.filter((e) => e.kind === 'ssh_agent_sign'),
    refused: added.filter((e) => e.kind === 'ssh_agent_refused'),
    accepted: accepted() - m.accepted,
    logged: loggedRefusals().slice(m.logged),
    next: markOf(all),
  };
}

// A refused login: ssh failed, sshd accepted nothing, no ssh_agent_sign, and
// one ssh_agent_refused entry of `code` from this ssh process.
async function refusedLogin(t: Test, r: Run, m: Mark, code: string, more: Record<string, unknown>): Promise<void> {
  t.equal(r.code, 255, 'ssh fails');
  t.match(r.stderr, /Permission denied \(publickey\)/);
  const s = await since(m);
  t.equal(s.accepted, 0, 'sshd accepted no key');
  t.same(s.sign, [], 'no signature was made');
  const mine = s.refused.filter((e) => e['pid'] === r.pid);
  t.equal(mine.length, 1, `one ssh_agent_refused entry from the ssh process (${JSON.stringify(s.refused)})`);
  t.match(mine[0], { code, request: 'sign', exe: '/usr/bin/ssh', ...more });
  t.match(
    s.logged.filter((l) => l['peer_pid'] === r.pid),
    [{ code, request: 'sign', msg: /^ssh-agent request refused: ./ }],
    'the daemon log gives the reason',
  );
}

// A sign request refused on a raw connection: FAILURE, one entry. From `m`
// when given; returns the mark after it.
async function refusedSign(
  t: Test,
  c: RawAgentClient,
  blob: Buffer,
  data: Buffer,
  code: string,
  more: Record<string, unknown> = {},
  from?: Mark,
): Promise<Mark> {
  const m = from ?? (await mark());
  t.equal(await c.sign(blob, data), null, 'SSH_AGENT_FAILURE, no signature');
  const s = await since(m);
  t.same(s.sign, [], 'no ssh_agent_sign');
  t.equal(s.refused.length, 1, 'one ssh_agent_refused');
  t.match(s.refused[0], { code, request: 'sign', pid: process.pid, ...more });
  t.match(
    s.logged,
    [{ code, request: 'sign', msg: /^ssh-agent request refused: ./ }],
    'the daemon log gives the reason',
  );
  return s.next;
}

const login = (sessionId: Buffer, user = a.sshd.user, blob = keyBlob()): Buffer =>
  userauthData({ sessionId, user, algorithm: 'ssh-ed25519', keyBlob: blob, hostKey: hostBlob() });

// --- the real OpenSSH client --------------------------------------------------

t.test('a server with another host key: host_key_mismatch (OpenSSH ssh-agent logs in)', async (t) => {
  const other = a.sshd.secondServer!;
  const control = await runSsh({ agent: stock.sock, port: other.port, user: a.sshd.user, knownHosts: otherKnownHosts });
  t.equal(control.code, 0, `the control logs in (${control.stderr.trim()})`);
  const acceptedBefore = acceptedOther();
  const m = await mark();
  const r = await a.ssh({ port: other.port, knownHosts: otherKnownHosts });
  t.equal(acceptedOther(), acceptedBefore, 'the other server accepted no key');
  // The entry names the server the client bound itself to.
  await refusedLogin(t, r, m, 'host_key_mismatch', { credential: 'deploy', host_key: other.hostKeyFingerprint });
});

t.test('a login as another user: denied_policy (OpenSSH ssh-agent logs in)', async (t) => {
  const other = a.sshd.secondUser!.user;
  const control = await runSsh({ agent: stock.sock, port: a.sshd.port, user: other, knownHosts: a.knownHosts });
  t.equal(control.code, 0, `the control logs in as ${other} (${control.stderr.trim()})`);
  const m = await mark();
  const r = await a.ssh({ user: other });
  await refusedLogin(t, r, m, 'denied_policy', {
    credential: 'deploy',
    host_key: a.sshd.hostKeyFingerprint,
    user: other,
  });
});

t.test('a forwarded agent: the second hop is refused (OpenSSH ssh-agent signs it)', async (t) => {
  const hop = secondHopCommand(a.sshd.port, a.sshd.user);
  const control = await runSsh({
    agent: stock.sock,
    port: a.sshd.port,
    user: a.sshd.user,
    knownHosts: a.knownHosts,
    forwardAgent: true,
    command: hop,
  });
  t.equal(control.code, 0, `the control's second hop logs in (${control.stderr.trim()})`);
  t.match(control.stdout, /second-hop-ok/);

  a.decision = 'session';
  const m = await mark();
  const r = await a.ssh({ forwardAgent: true, command: hop });
  t.notMatch(r.stdout, /second-hop-ok/, 'the second hop did not log in');
  t.equal(r.code, 255, 'the second hop ssh failed');
  t.match(r.stderr, /Permission denied \(publickey\)/);
  const s = await since(m);
  t.equal(s.accepted, 1, 'sshd accepted only the first hop');
  t.equal(s.sign.length, 1, 'one signature: the first hop, from here');
  t.match(s.sign[0], { pid: r.pid, credential: 'deploy' });
  const refused = s.refused.filter((e) => e['pid'] === r.pid);
  t.equal(refused.length, 1, `one refusal of the forwarded request (${JSON.stringify(s.refused)})`);
  t.match(refused[0], { code: 'denied_policy', request: 'sign', credential: 'deploy', forwarded: true });
});

t.test('a deny at the approver: denied_by_user', async (t) => {
  a.decision = 'deny';
  t.teardown(() => void (a.decision = 'session'));
  const m = await mark();
  const r = await a.ssh({});
  await refusedLogin(t, r, m, 'denied_by_user', {
    credential: 'deploy',
    host_key: a.sshd.hostKeyFingerprint,
    user: a.sshd.user,
  });
});

// --- a raw client -------------------------------------------------------------

async function connect(t: Test): Promise<RawAgentClient> {
  const c = await RawAgentClient.connect(a.agentSock);
  t.teardown(() => c.close());
  return c;
}

t.test('a sign request on a connection that never bound itself: denied_policy (OpenSSH ssh-agent signs)', async (t) => {
  const data = login(randomBytes(32));
  const s = await RawAgentClient.connect(stock.sock);
  const sig = await s.sign(keyBlob(), data);
  s.close();
  t.ok(sig && verifies(key().publicKey, data, sig), 'the control signs it');
  const c = await connect(t);
  await refusedSign(t, c, keyBlob(), data, 'denied_policy', { credential: 'deploy' });
  // The plain publickey method, which names no host key: the same.
  const plain = userauthData({
    sessionId: randomBytes(32),
    user: a.sshd.user,
    method: 'publickey',
    algorithm: 'ssh-ed25519',
    keyBlob: keyBlob(),
  });
  await refusedSign(t, c, keyBlob(), plain, 'denied_policy', { credential: 'deploy' });
});

t.test('a session-bind whose signature does not verify: bad_request, and the connection stays unbound', async (t) => {
  const c = await connect(t);
  const good = boundSession(hostPrivate(), randomBytes(32));
  const forged = [
    {
      what: 'a signature over another session id',
      bind: { ...good, signature: boundSession(hostPrivate(), randomBytes(32)).signature },
    },
    {
      what: 'a signature by another key',
      bind: { ...good, signature: boundSession(otherHostPrivate(), good.sessionId).signature },
    },
    {
      what: 'a signature of random bytes',
      bind: { ...good, signature: Buffer.concat([str('ssh-ed25519'), str(randomBytes(64))]) },
    },
  ];
  let m = await mark();
  for (const f of forged) {
    const reply = await c.sessionBind(f.bind);
    t.equal(reply.type, MSG.FAILURE, `${f.what}: SSH_AGENT_FAILURE`);
    const s = await since(m);
    m = s.next;
    t.equal(s.refused.length, 1, `${f.what}: one entry`);
    t.match(s.refused[0], { code: 'bad_request', request: 'session-bind', pid: process.pid });
  }
  await refusedSign(t, c, keyBlob(), login(good.sessionId), 'denied_policy', { credential: 'deploy' }, m);
});

t.test('a bound connection: the login for its session and user is signed, nothing else', async (t) => {
  a.decision = 'session';
  const c = await connect(t);
  const sid = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), sid))).type, MSG.SUCCESS, 'the binding is accepted');
  const m = await mark();
  const data = login(sid);
  const sig = await c.sign(keyBlob(), data);
  t.ok(sig !== null && verifies(key().publicKey, data, sig), 'a valid ed25519 signature of the login');
  const s = await since(m);
  t.equal(s.sign.length, 1);
  t.match(s.sign[0], {
    pid: process.pid,
    credential: 'deploy',
    host_key: a.sshd.hostKeyFingerprint,
    user: a.sshd.user,
  });

  const cases: { what: string; data: Buffer; blob?: Buffer; code: string }[] = [
    { what: 'another session', data: login(randomBytes(32)), code: 'denied_policy' },
    { what: 'another user', data: login(sid, a.sshd.secondUser!.user), code: 'denied_policy' },
    { what: 'bytes that are no login', data: randomBytes(200), code: 'denied_policy' },
    { what: 'a login with trailing bytes', data: Buffer.concat([login(sid), Buffer.from([0])]), code: 'denied_policy' },
    {
      what: 'a login naming another host key',
      data: userauthData({
        sessionId: sid,
        user: a.sshd.user,
        algorithm: 'ssh-ed25519',
        keyBlob: keyBlob(),
        hostKey: blobOfLine(a.sshd.secondServer!.hostKey),
      }),
      code: 'denied_policy',
    },
    {
      what: 'a login for another service',
      data: userauthData({
        sessionId: sid,
        user: a.sshd.user,
        service: 'ssh-userauth',
        algorithm: 'ssh-ed25519',
        keyBlob: keyBlob(),
        hostKey: hostBlob(),
      }),
      code: 'denied_policy',
    },
    {
      what: 'a key no ssh_agent credential has',
      blob: blobOfLine(a.sshd.keys.stranger.publicKey),
      data: login(sid, a.sshd.user, blobOfLine(a.sshd.keys.stranger.publicKey)),
      code: 'unknown_credential',
    },
  ];
  let next = s.next;
  for (const k of cases) {
    t.test(k.what, async (t) => {
      next = await refusedSign(t, c, k.blob ?? keyBlob(), k.data, k.code, {}, next);
    });
  }
});

t.test('a valid binding to a server with another host key: host_key_mismatch', async (t) => {
  const c = await connect(t);
  const sid = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(otherHostPrivate(), sid))).type, MSG.SUCCESS, 'the binding verifies');
  const data = userauthData({
    sessionId: sid,
    user: a.sshd.user,
    algorithm: 'ssh-ed25519',
    keyBlob: keyBlob(),
    hostKey: blobOfLine(a.sshd.secondServer!.hostKey),
  });
  await refusedSign(t, c, keyBlob(), data, 'host_key_mismatch', { credential: 'deploy' });
});

t.test('a connection once bound as forwarded never gets a signature', async (t) => {
  const c = await connect(t);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), randomBytes(32), true))).type, MSG.SUCCESS);
  const sid = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), sid))).type, MSG.SUCCESS, 'a later, unforwarded binding');
  await refusedSign(t, c, keyBlob(), login(sid), 'denied_policy', { credential: 'deploy', forwarded: true });
});

t.test('a malformed sign request: bad_request', async (t) => {
  const c = await connect(t);
  const m = await mark();
  // A key blob string that claims more bytes than the message holds.
  const reply = await c.sendRaw(frame(MSG.SIGN_REQUEST, u32(500), keyBlob()));
  t.equal(reply.type, MSG.FAILURE);
  const s = await since(m);
  t.equal(s.refused.length, 1);
  t.match(s.refused[0], { code: 'bad_request', request: 'sign' });
});

t.test('adding, removing and locking keys are refused: denied_policy', async (t) => {
  const c = await connect(t);
  const requests: { request: string; code?: string; send: () => Promise<{ type: number }> }[] = [
    { request: 'add_identity', send: () => c.addEd25519(randomBytes(32), randomBytes(32), 'mine') },
    { request: 'remove_identity', send: () => c.removeIdentity(keyBlob()) },
    { request: 'remove_all', send: () => c.removeAll() },
    { request: 'lock', send: () => c.lock('a passphrase') },
    { request: 'unlock', send: () => c.unlock('a passphrase') },
    { request: 'add_smartcard_key', send: () => c.addSmartcardKey('/usr/lib/opensc-pkcs11.so', '1234') },
    { request: 'extension query', send: () => c.extension('query') },
    // A message type the protocol does not define is malformed.
    { request: 'unknown 99', code: 'bad_request', send: () => c.request(99) },
  ];
  let m = await mark();
  for (const q of requests) {
    t.equal((await q.send()).type, MSG.FAILURE, `${q.request}: SSH_AGENT_FAILURE`);
    const s = await since(m);
    m = s.next;
    t.equal(s.refused.length, 1, `${q.request}: one entry`);
    t.match(s.refused[0], { code: q.code ?? 'denied_policy', request: q.request, pid: process.pid }, q.request);
  }
  const env = { PATH: '/usr/bin:/bin', SSH_AUTH_SOCK: a.agentSock };
  for (const [args, request] of [
    [[a.sshd.keys.stranger.path], 'add_identity'],
    [['-D'], 'remove_all'],
  ] as const) {
    const r = await runChild('/usr/bin/ssh-add', [...args], env);
    a.keep(`ssh-add ${args.join(' ')}`, r.stdout + r.stderr);
    t.not(r.code, 0, `ssh-add ${args.join(' ')} fails`);
    const s = await since(m);
    m = s.next;
    t.match(s.refused, [{ code: 'denied_policy', request, exe: '/usr/bin/ssh-add' }]);
  }
  const ids = await c.identities();
  t.same(
    ids.map((i) => i.comment),
    ['deploy'],
    'the keys offered are unchanged',
  );
});

t.test('while the vault is locked: no keys listed, a sign request refused as vault_locked', async (t) => {
  const c = await connect(t);
  const sid = randomBytes(32);
  t.equal((await c.sessionBind(boundSession(hostPrivate(), sid))).type, MSG.SUCCESS);
  const locked = cli(a.s.h, ['lock']);
  t.equal(locked.code, 0, locked.stderr);
  t.teardown(() => {
    const u = cli(a.s.h, ['unlock', '--passphrase-file', a.s.h.passFile]);
    if (u.code !== 0) throw new Error(`unlock: ${u.stderr}`);
  });
  t.same(await c.identities(), [], 'an empty list');
  const m = await mark();
  t.equal(await c.sign(keyBlob(), login(sid)), null, 'SSH_AGENT_FAILURE');
  const s = await since(m);
  t.same(s.sign, []);
  t.match(s.refused, [{ code: 'vault_locked', request: 'sign' }]);
});

t.test('no form of the private key appears outside the vault', async (t) => {
  t.same(await a.exposed(keySecrets(key().privateKey)), []);
});
