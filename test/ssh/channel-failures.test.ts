// POST /v1/ssh when the SSH channel fails, through the real daemon against
// Debian's OpenSSH sshd (SPEC §6.6, docs/ssh.md "Timeouts and failures"):
// - a server that lets the login succeed but refuses every session channel
//   (MaxSessions 0): 502 upstream_error, the command never started, so no
//   maybe_executed; the connection is not kept;
// - a server that allows one session per connection (MaxSessions 1): a
//   second command while the first runs cannot open a channel on the kept
//   connection, gets a fresh one, and the first command is not disturbed;
// - the connection dropped while the command runs (the sshd session process
//   killed): 502 upstream_error with maybe_executed true, at once rather
//   than at the timeout; the next command gets a fresh connection.
// Every failure has its journal intent and outcome, the daemon keeps
// serving, and neither the password nor the key appears in any reply, log
// or journal.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startSshd, Sshd } from '../helpers/sshd';
import { startStack, Stack, auditList } from '../helpers/stack';
import { agentRequest, eventually } from '../helpers/postern';
import { SshReply, addSshCredential } from '../helpers/ssh-credential';
import { exposures } from '../helpers/exposure';
import { journalBytes, journalText } from '../helpers/canary';

interface ErrorBody {
  error: { code: string; message: string; audit_seq?: unknown; maybe_executed?: unknown };
}

type Entry = Record<string, unknown> & { seq: number; kind?: string };

// The error object of a refusal (empty when the reply is not one, so that
// the checks on it fail rather than throw).
function errorOf(json: unknown): ErrorBody['error'] {
  return (json as Partial<ErrorBody> | null)?.error ?? ({} as ErrorBody['error']);
}

interface CredSpec {
  name: string;
  sshd: Sshd;
  auth: 'key' | 'password';
  commands: string[];
}

function addSsh(s: Stack, c: CredSpec): void {
  const secretFile =
    c.auth === 'key' ? c.sshd.keys.ed25519.path : s.h.file(`${c.name}.secret`, c.sshd.password!.password + '\n');
  const r = addSshCredential(
    s.h,
    {
      name: c.name,
      port: c.sshd.port,
      user: c.sshd.user,
      auth: c.auth,
      hostKey: c.sshd.hostKeyFingerprint,
      commands: c.commands,
    },
    secretFile,
  );
  if (r.code !== 0) throw new Error(`cred add ${c.name}: ${r.stderr}`);
}

// /proc, for the process tree under sshd.
function procLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ');
  } catch {
    return '';
  }
}

function parentOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return 0;
  }
}

function pidsRunning(line: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e) && procLine(Number(e)) === line)
    .map(Number);
}

// sshd's processes for `user`'s sessions: the privileged monitor
// ("sshd: <user> [priv]", root) and the unprivileged process that holds the
// connection ("sshd: <user>@notty"), whose child is the command's shell.
function sessionPids(user: string): number[] {
  return [...pidsRunning(`sshd: ${user} [priv]`), ...pidsRunning(`sshd: ${user}@notty`)];
}

// The session process holding the connection that runs `command`.
function connectionOf(user: string, command: string): number[] {
  const out: number[] = [];
  for (const pid of pidsRunning(command)) {
    for (let p = parentOf(pid); p > 1; p = parentOf(p)) {
      if (procLine(p) === `sshd: ${user}@notty`) {
        out.push(p);
        break;
      }
    }
  }
  return out;
}

// The 32-byte seed of an unencrypted OpenSSH ed25519 private key: in the
// private section the 64-byte private key is the seed followed by the
// public key, so the seed is the 32 bytes before the public key's last
// occurrence.
function ed25519Seed(privateKeyText: string, publicKeyLine: string): Buffer {
  const blob = Buffer.from(
    privateKeyText
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('-----'))
      .join(''),
    'base64',
  );
  const pubBlob = Buffer.from(publicKeyLine.split(' ')[1]!, 'base64');
  const pub = pubBlob.subarray(pubBlob.length - 32);
  const at = blob.lastIndexOf(pub);
  if (at < 32) throw new Error('no ed25519 public key in the private key blob');
  return blob.subarray(at - 32, at);
}

const NO_CHANNEL = '127.0.0.1 would not open an exec channel; the command was not started';
const CHANNEL_FAILED =
  'the SSH channel to 127.0.0.1 failed while the command ran; it may have had effects — check before retrying';

t.test('SSH channel failures through the daemon', async (t) => {
  const [healthy, noSession, oneSession, s] = await Promise.all([
    startSshd({ passwordUser: true }),
    startSshd({ passwordUser: true, extraConfig: ['MaxSessions 0'] }),
    startSshd({ extraConfig: ['MaxSessions 1'] }),
    startStack(),
  ]);
  t.teardown(() => healthy.close());
  t.teardown(() => noSession.close());
  t.teardown(() => oneSession.close());
  t.teardown(() => s.close());
  await s.approver();

  addSsh(s, { name: 'nosession-key', sshd: noSession, auth: 'key', commands: ['touch ran-nosession-key'] });
  addSsh(s, { name: 'nosession-pw', sshd: noSession, auth: 'password', commands: ['touch ran-nosession-pw'] });
  addSsh(s, { name: 'one', sshd: oneSession, auth: 'key', commands: ['sleep 2; echo first', 'echo second'] });
  addSsh(s, { name: 'good-pw', sshd: healthy, auth: 'password', commands: ['id -un', 'echo started; sleep 30'] });
  addSsh(s, {
    name: 'good-key',
    sshd: healthy,
    auth: 'key',
    commands: ['id -un', 'echo started; sleep 29', 'sleep 2; echo first', 'sleep 28'],
  });

  const texts: string[] = [];
  const post = async (body: Record<string, unknown>): Promise<{ status: number; json: unknown; text: string }> => {
    const r = await agentRequest(s.sock, 'POST', '/v1/ssh', body);
    texts.push(r.text);
    return r;
  };
  const entries = (): Entry[] => auditList<Entry>(s);
  // The outcome a refusal points at, and the intent that outcome names.
  const journaled = (
    t: Test,
    auditSeq: unknown,
    outcome: Record<string, unknown>,
    intent: Record<string, unknown>,
  ): void => {
    const all = entries();
    const out = all.find((e) => e.seq === auditSeq);
    t.match(out, { kind: 'ssh_outcome', ...outcome }, 'the outcome is journaled');
    t.type(out?.['duration_ms'], 'number');
    const int = all.find((e) => e.seq === out?.['intent_seq']);
    t.match(int, { kind: 'ssh_intent', address: '127.0.0.1', ...intent }, 'its intent is journaled');
    t.ok((int?.seq ?? Infinity) < (out?.seq ?? -Infinity), 'the intent comes first');
  };
  const healthyWorks = async (t: Test, credential: string): Promise<void> => {
    const r = await post({ credential, command: 'id -un' });
    t.equal(r.status, 200, r.text);
    t.equal((r.json as SshReply).exit_code, 0);
    t.equal((r.json as SshReply).stdout, `${healthy.user}\n`);
  };
  const home = (d: Sshd): string => join(d.dir, 'home');

  await t.test('the server refuses the exec channel after a successful login', async (t) => {
    for (const [credential, accepted] of [
      ['nosession-key', 'Accepted publickey for'],
      ['nosession-pw', 'Accepted password for'],
    ] as const) {
      const logBefore = noSession.logs().length;
      const connections = noSession.connections();
      const command = `touch ran-${credential}`;
      const r = await post({ credential, command });
      t.equal(r.status, 502, r.text);
      const err = errorOf(r.json);
      t.equal(err.code, 'upstream_error', credential);
      t.equal(err.message, NO_CHANNEL);
      t.same(Object.keys(err).sort(), ['audit_seq', 'code', 'message'], 'no maybe_executed: the command never started');
      t.type(err.audit_seq, 'number');
      t.ok(
        await eventually(() => /^no more sessions$/m.test(noSession.logs().slice(logBefore)), 5000),
        'sshd refused the session channel',
      );
      const said = noSession.logs().slice(logBefore);
      t.match(said, `${accepted} ${noSession.user}`, 'the login itself succeeded');
      t.equal(noSession.connections(), connections + 1, 'one connection, no second attempt');
      t.notOk(existsSync(join(home(noSession), `ran-${credential}`)), 'the command never ran');
      // The connection is not kept: sshd's session for it ends.
      t.ok(await eventually(() => sessionPids(noSession.user).length === 0, 5000), 'the connection was closed');
      journaled(
        t,
        err.audit_seq,
        { error: 'upstream_error', maybe_executed: null },
        {
          credential,
          command,
          port: noSession.port,
          user: noSession.user,
          host_key: noSession.hostKeyFingerprint,
        },
      );
    }
    // The same credential again: a new connection (none was kept), the same refusal.
    const connections = noSession.connections();
    const again = await post({ credential: 'nosession-key', command: 'touch ran-nosession-key' });
    t.equal(again.status, 502, again.text);
    t.equal(errorOf(again.json).code, 'upstream_error');
    t.equal(noSession.connections(), connections + 1, 'a fresh connection');
    // The daemon keeps serving.
    await healthyWorks(t, 'good-pw');
  });

  await t.test('a kept connection that has no room for another channel', async (t) => {
    const connections = oneSession.connections();
    const first = post({ credential: 'one', command: 'sleep 2; echo first' });
    t.ok(
      await eventually(() => oneSession.processesOf(oneSession.user).includes('sleep 2'), 5000),
      'the first command runs',
    );
    t.equal(oneSession.connections(), connections + 1);
    // sshd refuses a second session on that connection: a fresh one is made.
    const second = await post({ credential: 'one', command: 'echo second' });
    t.equal(second.status, 200, second.text);
    t.match(second.json, { exit_code: 0, signal: null, stdout: 'second\n', stderr: '' });
    t.equal(oneSession.connections(), connections + 2, 'the second command had a connection of its own');
    // The first command is not disturbed by the second's failed channel.
    const r = await first;
    t.equal(r.status, 200, r.text);
    t.match(r.json, { exit_code: 0, signal: null, stdout: 'first\n', stderr: '' });
  });

  await t.test('a command that times out does not end the others on its connection', async (t) => {
    await healthyWorks(t, 'good-key');
    const connections = healthy.connections();
    const first = post({ credential: 'good-key', command: 'sleep 2; echo first' });
    t.ok(await eventually(() => healthy.processesOf(healthy.user).includes('sleep 2'), 5000), 'the first command runs');
    const late = await post({ credential: 'good-key', command: 'sleep 28', timeout_ms: 300 });
    t.equal(late.status, 504, late.text);
    t.equal(errorOf(late.json).code, 'upstream_timeout');
    t.equal(errorOf(late.json).maybe_executed, true);
    t.equal(healthy.connections(), connections, 'both ran on the kept connection');
    const r = await first;
    t.equal(r.status, 200, r.text);
    t.match(r.json, { exit_code: 0, signal: null, stdout: 'first\n', stderr: '' });
  });

  await t.test('the connection drops while the command runs', async (t) => {
    for (const [credential, sleep] of [
      ['good-pw', 'sleep 30'],
      ['good-key', 'sleep 29'],
    ] as const) {
      // A kept connection first, which the long command then uses.
      await healthyWorks(t, credential);
      const connections = healthy.connections();
      const command = `echo started; ${sleep}`;
      const pending = post({ credential, command, timeout_ms: 20_000 });
      t.ok(await eventually(() => healthy.processesOf(healthy.user).includes(sleep), 10_000), `${sleep} runs`);
      t.equal(healthy.connections(), connections, 'on the kept connection');
      const holder = connectionOf(healthy.user, sleep);
      t.equal(holder.length, 1, 'one session process holds its connection');
      const killedAt = Date.now();
      for (const pid of holder) process.kill(pid, 'SIGKILL');
      const r = await pending;
      const took = Date.now() - killedAt;
      t.equal(r.status, 502, r.text);
      const err = errorOf(r.json);
      t.equal(err.code, 'upstream_error');
      t.equal(err.maybe_executed, true);
      t.equal(err.message, CHANNEL_FAILED);
      t.same(
        Object.keys(err).sort(),
        ['audit_seq', 'code', 'maybe_executed', 'message'],
        'a refusal: no partial output, exit code or signal',
      );
      t.ok(took < 5000, `answered ${took} ms after the connection dropped, not at the timeout`);
      // (A reply that is not a refusal points at its outcome too.)
      journaled(
        t,
        err.audit_seq ?? (r.json as Partial<SshReply> | null)?.audit_seq,
        { error: 'upstream_error', maybe_executed: true },
        {
          credential,
          command,
          port: healthy.port,
          user: healthy.user,
          host_key: healthy.hostKeyFingerprint,
        },
      );
      // The next command gets a fresh connection: the broken one is gone.
      await healthyWorks(t, credential);
      t.equal(healthy.connections(), connections + 1, 'a fresh connection');
    }
  });

  await t.test('no secret in any reply, log or journal', async (t) => {
    const key = healthy.keys.ed25519;
    const seed = ed25519Seed(key.privateKey, key.publicKey);
    const keyLines = key.privateKey.split('\n').filter((l) => l.length >= 16 && !l.startsWith('-----'));
    // The files keep events encrypted: the decrypted entries are searched too.
    const places = [
      ['replies', texts.join('\n')],
      ['daemon log', s.d.logs()],
      ['journal files', journalBytes(s.h.home).toString('latin1')],
      ['decrypted journal', await journalText(s.h)],
    ] as const;
    for (const [where, text] of places) {
      for (const pw of [healthy.password!.password, noSession.password!.password])
        t.same(exposures(text, pw), [], `${where}: no form of a password`);
      t.same(exposures(text, seed), [], `${where}: no form of the key's seed`);
      t.same(
        keyLines.filter((l) => text.includes(l)),
        [],
        `${where}: no line of the key file`,
      );
    }
    t.ok(texts.length >= 12, `${texts.length} replies searched`);
  });
});
