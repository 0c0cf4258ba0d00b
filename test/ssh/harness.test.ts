// The sshd harness against Debian's real OpenSSH server, driven with ssh2 (the
// client library postern's SSH executor uses): every client key type and
// format, password login, exit codes and signals over exec, the host key
// fingerprint as ssh2 sees it, connection counting, remote processes ending
// on a signal request (and not on a mere disconnect), parallel servers, and
// cleanup of the throwaway user.
import t from 'tap';
import { Client, ClientChannel, ConnectConfig } from 'ssh2';
import { createHash } from 'node:crypto';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSshd, Sshd, ClientKeyName } from '../helpers/sshd';

interface Conn {
  client: Client;
  localPort: number;
  seenFingerprint: string;
}

interface ExecResult {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: string | null;
}

const attempts = new Map<Sshd, number>(); // TCP connections this test opened, per server

function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
    }),
  ]);
}

async function until(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function fingerprintOf(blob: Buffer): string {
  return 'SHA256:' + createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
}

// Log in; the host key is accepted only if its fingerprint equals `pin`.
function connect(s: Sshd, auth: Partial<ConnectConfig>, pin = s.hostKeyFingerprint): Promise<Conn> {
  return within(
    15_000,
    'ssh login',
    new Promise<Conn>((resolve, reject) => {
      const client = new Client();
      let seenFingerprint = '';
      client.on('ready', () => {
        const sock = (client as unknown as { _sock: net.Socket })._sock;
        resolve({ client, localPort: sock.localPort ?? -1, seenFingerprint });
      });
      client.on('error', (e) => {
        client.end();
        reject(e);
      });
      // Key parsing happens inside connect(), before any TCP connection.
      client.connect({
        host: s.host,
        port: s.port,
        username: s.user,
        readyTimeout: 10_000,
        hostVerifier: (key: Buffer) => {
          seenFingerprint = fingerprintOf(key);
          return seenFingerprint === pin;
        },
        ...auth,
      });
      attempts.set(s, (attempts.get(s) ?? 0) + 1);
    }),
  );
}

function exec(
  c: Conn,
  command: string,
  o: { env?: Record<string, string>; started?: (ch: ClientChannel) => void } = {},
): Promise<ExecResult> {
  return within(
    15_000,
    `exec ${command}`,
    new Promise<ExecResult>((resolve, reject) => {
      c.client.exec(command, o.env ? { env: o.env } : {}, (err, ch) => {
        if (err) return reject(err);
        const r: ExecResult = { stdout: '', stderr: '', code: null, signal: null };
        ch.on('data', (d: Buffer) => (r.stdout += d.toString()));
        ch.stderr.on('data', (d: Buffer) => (r.stderr += d.toString()));
        ch.on('exit', (...a: unknown[]) => {
          r.code = typeof a[0] === 'number' ? a[0] : null;
          r.signal = typeof a[1] === 'string' ? a[1] : null;
        });
        ch.on('close', () => resolve(r));
        o.started?.(ch);
      });
    }),
  );
}

async function loginFails(s: Sshd, auth: Partial<ConnectConfig>, pin?: string): Promise<Error & { level?: string }> {
  try {
    const c = await connect(s, auth, pin);
    c.client.end();
  } catch (e) {
    return e as Error & { level?: string };
  }
  throw new Error('login succeeded');
}

function userExists(user: string): boolean {
  try {
    execFileSync('getent', ['passwd', user], { stdio: 'ignore' });
    return true;
  } catch (e) {
    if ((e as { status?: number }).status === 2) return false;
    throw e;
  }
}

// pids of live processes owned by uid whose command line is exactly `cmd`.
function pidsOf(uid: number, cmd: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const status = readFileSync(`/proc/${e}/status`, 'utf8');
      if (/^State:\s+Z/m.test(status)) continue;
      if (Number(/^Uid:\s+\d+\s+(\d+)/m.exec(status)?.[1]) !== uid) continue;
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ') === cmd)
        out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('connect', () => {
      sock.destroy();
      resolve(false);
    });
    sock.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

t.test('sshd harness', async (t) => {
  const [s, s2] = await Promise.all([startSshd({ passwordUser: true }), startSshd()]);
  t.teardown(() => s.close());
  t.teardown(() => s2.close());

  t.test('two servers side by side', async (t) => {
    t.not(s.port, s2.port);
    t.not(s.user, s2.user);
    t.not(s.dir, s2.dir);
    t.ok(userExists(s.user) && userExists(s2.user));
    for (const x of [s, s2]) {
      t.match(x.hostKeyFingerprint, /^SHA256:[A-Za-z0-9+/]{43}$/);
      t.match(x.otherHostKeyFingerprint, /^SHA256:[A-Za-z0-9+/]{43}$/);
      t.not(x.hostKeyFingerprint, x.otherHostKeyFingerprint);
      // ssh-keygen's fingerprint is the SHA-256 of the public key blob.
      const [type, b64] = x.hostKey.split(' ');
      t.equal(type, 'ssh-ed25519');
      t.equal(fingerprintOf(Buffer.from(b64!, 'base64')), x.hostKeyFingerprint);
    }
    t.not(s.hostKeyFingerprint, s2.hostKeyFingerprint);
    t.same(s.password, { user: s.user, password: s.password?.password });
    t.match(s.password?.password, /^\S{16,}$/);
    t.equal(s2.password, undefined);
  });

  const HEADERS: Record<ClientKeyName, RegExp> = {
    ed25519: /^-----BEGIN OPENSSH PRIVATE KEY-----\n/,
    rsa: /^-----BEGIN OPENSSH PRIVATE KEY-----\n/,
    ecdsa: /^-----BEGIN OPENSSH PRIVATE KEY-----\n/,
    rsaPem: /^-----BEGIN RSA PRIVATE KEY-----\n/,
    ecdsaPem: /^-----BEGIN EC PRIVATE KEY-----\n/,
    encrypted: /^-----BEGIN OPENSSH PRIVATE KEY-----\n/,
    rsaPkcs8: /^-----BEGIN PRIVATE KEY-----\n/,
    stranger: /^-----BEGIN OPENSSH PRIVATE KEY-----\n/,
  };

  t.test('ssh2 logs in with every OpenSSH-format and PEM key', async (t) => {
    for (const name of ['ed25519', 'rsa', 'ecdsa', 'rsaPem', 'ecdsaPem', 'encrypted'] as const) {
      const k = s.keys[name];
      t.match(k.privateKey, HEADERS[name], `${name} is in ${k.format} format`);
      t.match(k.publicKey, { ed25519: /^ssh-ed25519 /, rsa: /^ssh-rsa /, ecdsa: /^ecdsa-sha2-nistp256 / }[k.type]);
      t.equal(readFileSync(k.path, 'utf8'), k.privateKey);
      const c = await connect(s, { privateKey: k.privateKey, ...(k.passphrase ? { passphrase: k.passphrase } : {}) });
      t.equal(c.seenFingerprint, s.hostKeyFingerprint, `${name}: ssh2 sees the host key ssh-keygen fingerprinted`);
      t.same(await exec(c, 'echo hi'), { stdout: 'hi\n', stderr: '', code: 0, signal: null }, `${name}: echo hi`);
      c.client.end();
      t.match(
        s.logs(),
        `Accepted publickey for ${s.user} from 127.0.0.1 port ${c.localPort} ssh2: ${k.type === 'ed25519' ? 'ED25519' : k.type === 'rsa' ? 'RSA' : 'ECDSA'} ${k.fingerprint}`,
        `${name}: sshd logs the key`,
      );
    }
    t.equal(s.keys.encrypted.type, 'ed25519');
    t.match(s.keys.encrypted.passphrase, /^\S{8,}$/);
  });

  t.test('keys ssh2 cannot use', async (t) => {
    const before = attempts.get(s);
    let e = await loginFails(s, { privateKey: s.keys.encrypted.privateKey });
    t.equal(e.message, 'Cannot parse privateKey: Encrypted private OpenSSH key detected, but no passphrase given');
    e = await loginFails(s, { privateKey: s.keys.encrypted.privateKey, passphrase: 'wrong passphrase' });
    t.equal(e.message, 'Cannot parse privateKey: OpenSSH key integrity check failed -- bad passphrase?');
    e = await loginFails(s, { privateKey: s.keys.rsaPkcs8.privateKey });
    t.equal(e.message, 'Cannot parse privateKey: Unsupported key format');
    t.match(s.keys.rsaPkcs8.privateKey, HEADERS.rsaPkcs8);
    // Refused while parsing: no connection was opened.
    t.equal(attempts.get(s), before);

    // The PKCS#8 key is authorised all the same: OpenSSH's client logs in
    // with it, with the host key pinned in known_hosts.
    const tmp = mkdtempSync(join(tmpdir(), 'pt-ssh-kh-'));
    t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
    const kh = join(tmp, 'known_hosts');
    writeFileSync(kh, `[127.0.0.1]:${s.port} ${s.hostKey}\n`);
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        'ssh',
        [
          '-F',
          '/dev/null',
          '-o',
          'BatchMode=yes',
          '-o',
          'IdentitiesOnly=yes',
          '-o',
          'StrictHostKeyChecking=yes',
          '-o',
          `UserKnownHostsFile=${kh}`,
          '-i',
          s.keys.rsaPkcs8.path,
          '-p',
          String(s.port),
          `${s.user}@127.0.0.1`,
          'echo hi',
        ],
        (err, stdout, stderr) => {
          resolve({ code: err ? Number(err.code) : 0, stdout, stderr });
        },
      );
    });
    attempts.set(s, (attempts.get(s) ?? 0) + 1);
    t.equal(out.code, 0, out.stderr);
    t.equal(out.stdout, 'hi\n');
    t.match(s.logs(), `Accepted publickey for ${s.user} from 127.0.0.1 port `);
    t.match(s.logs(), `RSA ${s.keys.rsaPkcs8.fingerprint}`);
  });

  t.test('password login, refused logins', async (t) => {
    const pw = s.password!;
    const c = await connect(s, { username: pw.user, password: pw.password });
    t.same(await exec(c, 'echo hi'), { stdout: 'hi\n', stderr: '', code: 0, signal: null });
    c.client.end();
    t.match(s.logs(), `Accepted password for ${pw.user} from 127.0.0.1 port ${c.localPort} ssh2`);

    let e = await loginFails(s, { password: pw.password + 'x' });
    t.equal(e.level, 'client-authentication');
    t.equal(e.message, 'All configured authentication methods failed');
    e = await loginFails(s, { privateKey: s.keys.stranger.privateKey });
    t.equal(e.level, 'client-authentication');
    t.match(s.logs(), `Failed password for ${s.user} from 127.0.0.1`);

    // The server started without a password user refuses passwords at all
    // (the user has none), but takes keys.
    e = await loginFails(s2, { password: pw.password });
    t.equal(e.level, 'client-authentication');
    const c2 = await connect(s2, { privateKey: s2.keys.ed25519.privateKey });
    t.equal(c2.seenFingerprint, s2.hostKeyFingerprint);
    t.same(await exec(c2, 'id -un'), { stdout: `${s2.user}\n`, stderr: '', code: 0, signal: null });
    c2.client.end();
    t.notMatch(s2.logs(), 'Accepted password');
  });

  t.test('host key pinned to another fingerprint: refused before authentication', async (t) => {
    const e = await loginFails(s, { privateKey: s.keys.ed25519.privateKey }, s.otherHostKeyFingerprint);
    t.equal(e.message, 'Host denied (verification failed)');
    t.equal(e.level, 'handshake');
  });

  t.test('exit codes and signals over exec; no environment passed', async (t) => {
    const c = await connect(s, { privateKey: s.keys.ecdsa.privateKey });
    t.teardown(() => c.client.end());
    t.same(await exec(c, 'exit 3'), { stdout: '', stderr: '', code: 3, signal: null });
    t.same(await exec(c, 'kill -TERM $$'), { stdout: '', stderr: '', code: null, signal: 'SIGTERM' });
    t.same(await exec(c, 'echo out; echo err >&2; exit 7'), {
      stdout: 'out\n',
      stderr: 'err\n',
      code: 7,
      signal: null,
    });
    t.same(await exec(c, 'echo "${POSTERN_T_ENV-unset}"', { env: { POSTERN_T_ENV: 'x' } }), {
      stdout: 'unset\n',
      stderr: '',
      code: 0,
      signal: null,
    });
    t.same(await exec(c, 'pwd'), { stdout: `${s.dir}/home\n`, stderr: '', code: 0, signal: null });
  });

  t.test('remote processes: a signal ends them, a disconnect does not', async (t) => {
    const c = await connect(s, { privateKey: s.keys.ed25519.privateKey });
    const r = await exec(c, 'sleep 30', {
      started: (ch) => {
        until('sleep 30 visible', () => s.processesOf(s.user).includes('sleep 30'))
          .then(() => ch.signal('KILL'))
          .catch((e: Error) => {
            t.fail(e.message);
            ch.close();
          });
      },
    });
    // sshd signals the process group: the shell and its `sleep` both end.
    t.same(r, { stdout: '', stderr: '', code: null, signal: 'SIGKILL' });
    await until('sleep 30 gone', () => !s.processesOf(s.user).some((p) => p.includes('sleep 30')));
    t.notOk(s.processesOf(s.user).some((p) => /sleep/.test(p)));
    c.client.end();

    const c2 = await connect(s, { privateKey: s.keys.ed25519.privateKey });
    await new Promise<void>((resolve, reject) => {
      c2.client.exec('sleep 29', (err) => (err ? reject(err) : resolve()));
    });
    await until('sleep 29 visible', () => s.processesOf(s.user).includes('sleep 29'));
    t.ok(s.processesOf(s.user).includes(`sshd: ${s.user}@notty`), 'the session process is listed too');
    c2.client.end();
    // The session process goes with the connection; the command stays.
    await until('session ended', () => !s.processesOf(s.user).some((p) => p.endsWith('@notty')));
    t.ok(s.processesOf(s.user).includes('sleep 29'), 'a command outlives a disconnect without a signal');
    const left = pidsOf(s.uid, 'sleep 29');
    t.equal(left.length, 1);
    t.same(s.processesOf('no-such-user-postern'), []);

    t.test('close() ends it, removes the user and the directory', async (t) => {
      const s2user = s2.user;
      await s2.close();
      t.notOk(userExists(s2user));
      t.notOk(existsSync(s2.dir));
      t.ok(await refused(s2.port));
      t.notOk(alive(s2.pid));

      t.equal(s.connections(), attempts.get(s), 'one "Connection from" per TCP connection opened');
      t.equal(s2.connections(), attempts.get(s2));
      const logBefore = s.logs();
      await s.close();
      await s.close(); // a second close is harmless
      t.notOk(userExists(s.user));
      t.notOk(existsSync(s.dir));
      t.notOk(alive(left[0]!), 'the leftover command was killed');
      t.ok(await refused(s.port));
      t.same(s.processesOf(s.user), []);
      t.ok(s.logs().startsWith(logBefore), 'logs() still answers after close');
    });
  });
});
