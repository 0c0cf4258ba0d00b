// The login request an SSH client asks its agent to sign. First a table of
// requests built field by field: the two publickey methods are read exactly,
// and everything else is null, never a throw (every truncation, trailing
// bytes, another message byte, another service, no signature, password and
// other methods, an algorithm that is not the key's, malformed key blobs,
// 2^32-1 lengths). Then the real OpenSSH client logs in to Debian's real
// sshd through an agent made of the front door's modules alone: for each
// host key type (ed25519, ECDSA, RSA with rsa-sha2-512 and rsa-sha2-256)
// and client key type, the session-bind it sends is read, its host key is
// the server's (fingerprint as ssh-keygen prints it), its signature (made by
// sshd) verifies over the session identifier and fails over anything else;
// the data of the sign request parses to exactly that session, the user,
// ssh-connection, the hostbound method, the algorithm and both keys; the
// login succeeds with signAsAgent's signature. With agent forwarding the
// forwarded connection is bound with is_forwarding true.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseUserauthRequest, METHOD_HOSTBOUND, METHOD_PUBLICKEY } from '../../daemon/ssh-agent/userauth';
import { MSG, SESSION_BIND, parseExtension, parseSessionBind, parseSignRequest } from '../../daemon/ssh-agent/messages';
import { fingerprintOf, verifyHostSignature } from '../../daemon/ssh-agent/agent-keys';
import { WireReader, str, u32, u8 } from '../../daemon/ssh-agent/wire';
import { startSshd, Sshd } from '../helpers/sshd';
import { startCodecAgent, CodecAgent } from '../helpers/codec-agent';

const blobOfLine = (line: string): Buffer => Buffer.from(line.trim().split(' ')[1]!, 'base64');

interface Fields {
  sessionId: Buffer;
  msg: number;
  user: Buffer | string;
  service: string;
  method: string;
  hasSignature: number;
  algorithm: string;
  keyBlob: Buffer;
  hostKey: Buffer | null; // written when not null, whatever the method
  extra: Buffer;
}

function request(f: Fields): Buffer {
  return Buffer.concat([
    str(f.sessionId),
    u8(f.msg),
    str(f.user),
    str(f.service),
    str(f.method),
    u8(f.hasSignature),
    str(f.algorithm),
    str(f.keyBlob),
    ...(f.hostKey !== null ? [str(f.hostKey)] : []),
    f.extra,
  ]);
}

let sshd: Sshd;
t.before(async () => {
  sshd = await startSshd({
    hostKeyTypes: ['ed25519', 'ecdsa', 'rsa'],
    extraConfig: ['DisableForwarding no', 'AllowAgentForwarding yes'],
  });
});
t.teardown(() => sshd?.close());

t.test('a table of requests: the two publickey methods, and null for everything else', async (t) => {
  const ed = blobOfLine(sshd.keys.ed25519.publicKey);
  const rsa = blobOfLine(sshd.keys.rsa.publicKey);
  const host = blobOfLine(sshd.hostKeys[0]!.publicKey);
  const sessionId = Buffer.alloc(32, 0xab);
  const base: Fields = {
    sessionId,
    msg: 50,
    user: 'git',
    service: 'ssh-connection',
    method: METHOD_HOSTBOUND,
    hasSignature: 1,
    algorithm: 'ssh-ed25519',
    keyBlob: ed,
    hostKey: host,
    extra: Buffer.alloc(0),
  };
  const hostbound = request(base);
  t.same(parseUserauthRequest(hostbound), {
    sessionId,
    user: 'git',
    service: 'ssh-connection',
    method: METHOD_HOSTBOUND,
    algorithm: 'ssh-ed25519',
    keyBlob: ed,
    hostKey: host,
  });
  t.same(parseUserauthRequest(request({ ...base, method: METHOD_PUBLICKEY, hostKey: null })), {
    sessionId,
    user: 'git',
    service: 'ssh-connection',
    method: 'publickey',
    algorithm: 'ssh-ed25519',
    keyBlob: ed,
    hostKey: null,
  });
  for (const algorithm of ['rsa-sha2-256', 'rsa-sha2-512', 'ssh-rsa']) {
    t.equal(parseUserauthRequest(request({ ...base, algorithm, keyBlob: rsa }))?.algorithm, algorithm, algorithm);
  }
  t.equal(parseUserauthRequest(request({ ...base, user: 'zoë' }))?.user, 'zoë', 'a UTF-8 user name');

  const rows: [string, Buffer][] = [
    ['empty', Buffer.alloc(0)],
    ['random bytes', Buffer.from('not a login request at all, just some bytes')],
    ['one byte after the host key', request({ ...base, extra: Buffer.from([0]) })],
    ['a whole string after the host key', request({ ...base, extra: str('more') })],
    ['publickey with a host key after it', request({ ...base, method: METHOD_PUBLICKEY })],
    ['hostbound without the host key', request({ ...base, hostKey: null })],
    ['message byte 51 (failure)', request({ ...base, msg: 51 })],
    ['message byte 0', request({ ...base, msg: 0 })],
    ['service ssh-userauth', request({ ...base, service: 'ssh-userauth' })],
    ['service ssh-connection with a NUL after it', request({ ...base, service: 'ssh-connection\0' })],
    ['service in upper case', request({ ...base, service: 'SSH-CONNECTION' })],
    ['has-signature false', request({ ...base, hasSignature: 0 })],
    ['has-signature 2', request({ ...base, hasSignature: 2 })],
    ['method password', request({ ...base, method: 'password', hostKey: null })],
    ['method keyboard-interactive', request({ ...base, method: 'keyboard-interactive', hostKey: null })],
    ['method hostbased', request({ ...base, method: 'hostbased' })],
    ['method publickey-hostbound-v01', request({ ...base, method: 'publickey-hostbound-v01@openssh.com' })],
    ['empty session identifier', request({ ...base, sessionId: Buffer.alloc(0) })],
    ['an ed25519 key announced as rsa-sha2-256', request({ ...base, algorithm: 'rsa-sha2-256' })],
    ['an RSA key announced as ssh-ed25519', request({ ...base, keyBlob: rsa })],
    ['an ed25519 key announced as a certificate', request({ ...base, algorithm: 'ssh-ed25519-cert-v01@openssh.com' })],
    ['a key blob that is not a key', request({ ...base, keyBlob: Buffer.from('garbage') })],
    ['an empty key blob', request({ ...base, keyBlob: Buffer.alloc(0) })],
    ['a host key that is not a key', request({ ...base, hostKey: Buffer.from('garbage') })],
    ['a key blob with a byte more', request({ ...base, keyBlob: Buffer.concat([ed, Buffer.from([0])]) })],
    ['a user name that is not UTF-8', request({ ...base, user: Buffer.from([0x67, 0xff]) })],
    ['a user name with a NUL', request({ ...base, user: 'git\0root' })],
    ['session identifier length 2^32-1', Buffer.concat([u32(0xffffffff), hostbound.subarray(4)])],
    ['user length 2^32-1', Buffer.concat([hostbound.subarray(0, 37), u32(0xffffffff), hostbound.subarray(41)])],
  ];
  for (const [what, data] of rows) {
    let got: unknown;
    try {
      got = parseUserauthRequest(data);
    } catch (e) {
      got = `threw ${(e as Error).message}`;
    }
    t.equal(got, null, what);
  }
  for (let n = 0; n < hostbound.length; n += 1) {
    if (parseUserauthRequest(hostbound.subarray(0, n)) !== null) t.fail(`cut at ${n}`);
  }
  t.pass('every truncation of the request is null');
});

// ---- the real client and server ----

interface Login {
  code: number;
  stdout: string;
  stderr: string;
}

function ssh(agent: CodecAgent, dir: string, pubPath: string, options: string[], command: string): Promise<Login> {
  const knownHosts = join(dir, 'known_hosts');
  writeFileSync(knownHosts, sshd.hostKeys.map((k) => `[127.0.0.1]:${sshd.port} ${k.publicKey}\n`).join(''));
  const args = [
    '-F',
    '/dev/null',
    '-p',
    String(sshd.port),
    '-o',
    `IdentityAgent=${agent.socket}`,
    '-o',
    'IdentitiesOnly=yes',
    '-i',
    pubPath,
    '-o',
    `UserKnownHostsFile=${knownHosts}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    'BatchMode=yes',
    '-o',
    'PreferredAuthentications=publickey',
    ...options.flatMap((o) => ['-o', o]),
    `${sshd.user}@127.0.0.1`,
    command,
  ];
  return new Promise((resolve) => {
    execFile('ssh', args, { timeout: 20000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

function signatureAlgorithm(blob: Buffer): string {
  return new WireReader(blob).text();
}

t.test('OpenSSH logs in to sshd through the agent: the bind and the request it signs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'postern-userauth-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const clients = (['ed25519', 'ecdsa', 'rsa'] as const).map((name) => {
    const k = sshd.keys[name];
    const pubPath = join(dir, `${name}.pub`);
    writeFileSync(pubPath, `${k.publicKey}\n`);
    return { name, pubPath, blob: blobOfLine(k.publicKey), text: Buffer.from(k.privateKey) };
  });
  const hostBlob = (type: string): Buffer => blobOfLine(sshd.hostKeys.find((k) => k.type === type)!.publicKey);

  const rows = [
    { host: 'ed25519', hostAlg: 'ssh-ed25519', client: 'ed25519', algorithm: 'ssh-ed25519', flags: 0, opts: [] },
    {
      host: 'ecdsa',
      hostAlg: 'ecdsa-sha2-nistp256',
      client: 'ecdsa',
      algorithm: 'ecdsa-sha2-nistp256',
      flags: 0,
      opts: [],
    },
    { host: 'rsa', hostAlg: 'rsa-sha2-512', client: 'rsa', algorithm: 'rsa-sha2-512', flags: 4, opts: [] },
    {
      host: 'rsa',
      hostAlg: 'rsa-sha2-256',
      client: 'rsa',
      algorithm: 'rsa-sha2-256',
      flags: 2,
      opts: ['PubkeyAcceptedAlgorithms=rsa-sha2-256'],
    },
    { host: 'ed25519', hostAlg: 'ssh-ed25519', client: 'rsa', algorithm: 'rsa-sha2-512', flags: 4, opts: [] },
  ];
  for (const row of rows) {
    const label = `host ${row.hostAlg}, client ${row.client} (${row.algorithm})`;
    const client = clients.find((c) => c.name === row.client)!;
    const agent = await startCodecAgent(clients.map((c) => ({ text: c.text, comment: c.name })));
    const login = await ssh(agent, dir, client.pubPath, [`HostKeyAlgorithms=${row.hostAlg}`, ...row.opts], 'echo in');
    await agent.close();
    t.same({ code: login.code, stdout: login.stdout }, { code: 0, stdout: 'in\n' }, `${label}: logged in`);

    // The one agent connection: session-bind, then the sign request.
    t.equal(agent.connections.length, 1, `${label}: one agent connection`);
    const bodies = agent.connections[0] ?? [];
    const bindAt = bodies.findIndex((b) => b[0] === MSG.EXTENSION && parseExtension(b).name === SESSION_BIND);
    const signAt = bodies.findIndex((b) => b[0] === MSG.SIGN_REQUEST);
    t.ok(bindAt >= 0 && signAt > bindAt, `${label}: bound before the sign request`);
    const bind = parseSessionBind(parseExtension(bodies[bindAt]!).contents);
    const host = hostBlob(row.host);
    t.ok(bind.hostKey.equals(host), `${label}: the bound host key is the server's`);
    t.equal(fingerprintOf(bind.hostKey), sshd.hostKeys.find((k) => k.type === row.host)!.fingerprint);
    t.equal(bind.forwarding, false, `${label}: not forwarding`);
    t.equal(signatureAlgorithm(bind.signature), row.hostAlg, `${label}: sshd signed with ${row.hostAlg}`);
    t.equal(verifyHostSignature(bind.hostKey, bind.sessionId, bind.signature), true, `${label}: sshd's signature`);
    const otherSid = Buffer.from(bind.sessionId);
    otherSid[0]! ^= 1;
    t.equal(verifyHostSignature(bind.hostKey, otherSid, bind.signature), false, `${label}: another session id`);
    const otherHost = hostBlob(row.host === 'ed25519' ? 'rsa' : 'ed25519');
    t.equal(verifyHostSignature(otherHost, bind.sessionId, bind.signature), false, `${label}: another host key`);

    const sign = parseSignRequest(bodies[signAt]!);
    t.ok(sign.keyBlob.equals(client.blob), `${label}: the client key`);
    t.equal(sign.flags, row.flags, `${label}: flags`);
    t.same(
      parseUserauthRequest(sign.data),
      {
        sessionId: bind.sessionId,
        user: sshd.user,
        service: 'ssh-connection',
        method: METHOD_HOSTBOUND,
        algorithm: row.algorithm,
        keyBlob: client.blob,
        hostKey: host,
      },
      `${label}: the data to sign is the login request for the bound session`,
    );
    t.equal(parseUserauthRequest(Buffer.concat([sign.data, Buffer.from([0])])), null, `${label}: + 1 byte`);
    for (let n = 0; n < sign.data.length; n += 1) {
      if (parseUserauthRequest(sign.data.subarray(0, n)) !== null) t.fail(`${label}: cut at ${n}`);
    }
  }
  t.match(sshd.logs(), /Accepted publickey for /, 'sshd logged the logins');
});

t.test('agent forwarding: the forwarded connection is bound with is_forwarding true', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'postern-userauth-fwd-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const k = sshd.keys.ed25519;
  const pubPath = join(dir, 'ed25519.pub');
  writeFileSync(pubPath, `${k.publicKey}\n`);
  const agent = await startCodecAgent([{ text: Buffer.from(k.privateKey), comment: 'forwarded' }]);
  const login = await ssh(agent, dir, pubPath, ['ForwardAgent=yes', 'HostKeyAlgorithms=ssh-ed25519'], 'ssh-add -L');
  await agent.close();
  t.same(
    { code: login.code, stdout: login.stdout },
    { code: 0, stdout: `${k.publicKey.split(' ').slice(0, 2).join(' ')} forwarded\n` },
    'ssh-add -L on the server lists the key through the forwarded agent',
  );
  // ssh also opens one connection only to check that the agent is there.
  const used = agent.connections.filter((c) => c.length > 0);
  t.equal(used.length, 2, 'the login connection and the forwarded one');
  const binds = used.map((bodies) => {
    const b = bodies.find((x) => x[0] === MSG.EXTENSION && parseExtension(x).name === SESSION_BIND);
    return b ? parseSessionBind(parseExtension(b).contents) : null;
  });
  t.equal(binds[0]?.forwarding, false, 'the login connection: not forwarding');
  t.equal(binds[1]?.forwarding, true, 'the forwarded connection: is_forwarding true');
  t.ok(binds[1]?.sessionId.equals(binds[0]!.sessionId), 'bound to the same session');
  t.equal(verifyHostSignature(binds[1]!.hostKey, binds[1]!.sessionId, binds[1]!.signature), true);
  t.equal(used[1]?.[0]?.[0], MSG.EXTENSION, 'the forwarded connection binds before anything else');
  t.equal(used[1]?.[1]?.[0], MSG.REQUEST_IDENTITIES, 'then lists');
});
