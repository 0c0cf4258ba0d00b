// The rule for an ssh-agent signature (SPEC §12, daemon/ssh-agent/
// sign-check.ts), on its own: every way a request can differ from "a
// publickey login for the bound session, to the pinned host key, as the
// credential's user, with the key asked for" is refused with its code, and
// the rule looks at the connection's last binding and at every binding for
// forwarding. The end-to-end behaviour with OpenSSH is in openssh.test.ts.
import t from 'tap';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { checkSignRequest } from '../../daemon/ssh-agent/sign-check';
import { ConnectionBindings, MAX_BINDINGS } from '../../daemon/ssh-agent/bindings';
import { fingerprintOf } from '../../daemon/ssh-agent/agent-keys';
import { str, u8 } from '../../daemon/ssh-agent/wire';
import { Refusal } from '../../shared/errors';
import type { SshCredentialDef } from '../../shared/credential';

function ed25519Blob(): Buffer {
  const { publicKey } = generateKeyPairSync('ed25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url');
  return Buffer.concat([str('ssh-ed25519'), str(raw)]);
}

const hostKey = ed25519Blob();
const otherHostKey = ed25519Blob();
const clientKey = ed25519Blob();
const otherClientKey = ed25519Blob();
const sessionId = randomBytes(32);

const def: SshCredentialDef = {
  name: 'box',
  description: '',
  kind: 'ssh',
  host: 'build.example.com',
  port: 22,
  user: 'deploy',
  auth: 'key',
  host_key: fingerprintOf(hostKey),
  commands: ['true'],
  stdin: false,
  approve: 'session',
  allow_addresses: [],
  ssh_agent: true,
};

interface Login {
  session?: Buffer;
  type?: number;
  user?: string | Buffer;
  service?: string;
  method?: string;
  hasSignature?: number;
  algorithm?: string;
  key?: Buffer;
  host?: Buffer | null;
  trailing?: Buffer;
}

// What OpenSSH's client asks its agent to sign for a publickey login.
function login(o: Login = {}): Buffer {
  const method = o.method ?? 'publickey-hostbound-v00@openssh.com';
  const host = o.host === undefined ? (method.startsWith('publickey-hostbound') ? hostKey : null) : o.host;
  return Buffer.concat([
    str(o.session ?? sessionId),
    u8(o.type ?? 50),
    str(o.user ?? 'deploy'),
    str(o.service ?? 'ssh-connection'),
    str(method),
    u8(o.hasSignature ?? 1),
    str(o.algorithm ?? 'ssh-ed25519'),
    str(o.key ?? clientKey),
    ...(host ? [str(host)] : []),
    o.trailing ?? Buffer.alloc(0),
  ]);
}

function bound(...binds: { hostKey?: Buffer; sessionId?: Buffer; forwarding?: boolean }[]): ConnectionBindings {
  const b = new ConnectionBindings();
  for (const x of binds)
    b.add({ hostKey: x.hostKey ?? hostKey, sessionId: x.sessionId ?? sessionId, forwarding: x.forwarding ?? false });
  return b;
}

function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (e instanceof Refusal) return e.code;
    throw e;
  }
  return 'signed';
}

t.test('a publickey login for the bound session is allowed, hostbound or not', async (t) => {
  for (const method of ['publickey', 'publickey-hostbound-v00@openssh.com']) {
    const ok = checkSignRequest(def, bound({}), login({ method }), clientKey);
    t.equal(ok.hostKey, def.host_key, `${method}: bound to the pinned key`);
    t.equal(ok.login.user, 'deploy');
    t.equal(ok.login.method, method);
  }
});

t.test('every difference is refused with its code', async (t) => {
  const rows: [string, () => unknown, string][] = [
    ['no binding', () => checkSignRequest(def, bound(), login(), clientKey), 'denied_policy'],
    [
      'bound to another host key',
      () => checkSignRequest(def, bound({ hostKey: otherHostKey }), login(), clientKey),
      'host_key_mismatch',
    ],
    [
      'the pinned key bound first, another host last',
      () => checkSignRequest(def, bound({}, { hostKey: otherHostKey, sessionId: randomBytes(32) }), login(), clientKey),
      'host_key_mismatch',
    ],
    [
      'a forwarded binding before the login',
      () => checkSignRequest(def, bound({ forwarding: true }, {}), login(), clientKey),
      'denied_policy',
    ],
    [
      'a forwarded binding alone',
      () => checkSignRequest(def, bound({ forwarding: true }), login(), clientKey),
      'denied_policy',
    ],
    [
      'a login for the first of two bound sessions',
      () => checkSignRequest(def, bound({}, { sessionId: randomBytes(32) }), login(), clientKey),
      'denied_policy',
    ],
    [
      'another session',
      () => checkSignRequest(def, bound({}), login({ session: randomBytes(32) }), clientKey),
      'denied_policy',
    ],
    [
      'a session id one byte short',
      () => checkSignRequest(def, bound({}), login({ session: sessionId.subarray(1) }), clientKey),
      'denied_policy',
    ],
    ['another user', () => checkSignRequest(def, bound({}), login({ user: 'root' }), clientKey), 'denied_policy'],
    [
      'the user in another case',
      () => checkSignRequest(def, bound({}), login({ user: 'Deploy' }), clientKey),
      'denied_policy',
    ],
    [
      'the user with a NUL after it',
      () => checkSignRequest(def, bound({}), login({ user: 'deploy\0' }), clientKey),
      'denied_policy',
    ],
    [
      'the user with a space after it',
      () => checkSignRequest(def, bound({}), login({ user: 'deploy ' }), clientKey),
      'denied_policy',
    ],
    [
      'a user that is not UTF-8',
      () => checkSignRequest(def, bound({}), login({ user: Buffer.from([0x64, 0xff]) }), clientKey),
      'denied_policy',
    ],
    [
      'another client key in the login',
      () => checkSignRequest(def, bound({}), login({ key: otherClientKey }), clientKey),
      'denied_policy',
    ],
    [
      'hostbound naming another host key',
      () => checkSignRequest(def, bound({}), login({ host: otherHostKey }), clientKey),
      'denied_policy',
    ],
    [
      'not a user-auth message (51)',
      () => checkSignRequest(def, bound({}), login({ type: 51 }), clientKey),
      'denied_policy',
    ],
    [
      'service ssh-userauth',
      () => checkSignRequest(def, bound({}), login({ service: 'ssh-userauth' }), clientKey),
      'denied_policy',
    ],
    [
      'method password',
      () => checkSignRequest(def, bound({}), login({ method: 'password' }), clientKey),
      'denied_policy',
    ],
    [
      'method hostbased',
      () => checkSignRequest(def, bound({}), login({ method: 'hostbased' }), clientKey),
      'denied_policy',
    ],
    [
      'no signature flag',
      () => checkSignRequest(def, bound({}), login({ hasSignature: 0 }), clientKey),
      'denied_policy',
    ],
    [
      'an algorithm of another key type',
      () => checkSignRequest(def, bound({}), login({ algorithm: 'rsa-sha2-256' }), clientKey),
      'denied_policy',
    ],
    [
      'a byte after the request',
      () => checkSignRequest(def, bound({}), login({ trailing: Buffer.from([0]) }), clientKey),
      'denied_policy',
    ],
    [
      'data that is only the session id',
      () => checkSignRequest(def, bound({}), str(sessionId), clientKey),
      'denied_policy',
    ],
    ['empty data', () => checkSignRequest(def, bound({}), Buffer.alloc(0), clientKey), 'denied_policy'],
    ['random data', () => checkSignRequest(def, bound({}), randomBytes(200), clientKey), 'denied_policy'],
  ];
  for (const [name, f, code] of rows) t.equal(codeOf(f), code, name);
});

t.test('every byte of a valid login, changed, is refused or still names the same login', async (t) => {
  // A rule that holds for the table above only is not a rule: flip each
  // byte of a valid request in turn. The result is refused, or it is a
  // login whose every checked field is what the credential allows.
  const good = login();
  let refused = 0;
  for (let i = 0; i < good.length; i++) {
    const bad = Buffer.from(good);
    bad[i] = (bad[i] as number) ^ 0x01;
    const code = codeOf(() => checkSignRequest(def, bound({}), bad, clientKey));
    if (code !== 'signed') refused += 1;
    else t.fail(`byte ${i} changed and still allowed`);
  }
  t.equal(refused, good.length, 'every changed byte refused');
});

t.test('a connection holds at most MAX_BINDINGS bindings', async (t) => {
  const b = new ConnectionBindings();
  for (let i = 0; i < MAX_BINDINGS; i++) t.ok(b.add({ hostKey, sessionId: randomBytes(32), forwarding: false }));
  t.notOk(b.add({ hostKey, sessionId, forwarding: false }), 'one more is refused');
  t.notOk(b.current?.sessionId.equals(sessionId), 'and not kept');
});
