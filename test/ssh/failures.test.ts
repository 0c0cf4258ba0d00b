// POST /v1/ssh when the target is not what it should be or the command does
// not finish (SPEC §6.6, §6.3), through the real daemon against Debian's
// OpenSSH sshd: a host key other than the pinned one is refused before any
// authentication (sshd sees no login attempt, the command never runs); a
// refused login or a closed port is an upstream_error; a command past its
// timeout is signalled and ends on the server (upstream_timeout,
// maybe_executed), also when it ignores TERM. Each failure has its journal
// outcome; the password appears in no reply, log or journal.
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startSshd } from '../helpers/sshd';
import { startStack, Stack, auditList } from '../helpers/stack';
import { agentRequest, eventually, freePort } from '../helpers/postern';
import { SshCredSpec, SshReply, addSshCredential } from '../helpers/ssh-credential';
import { exposures } from '../helpers/exposure';
import { journalBytes, journalText } from '../helpers/canary';

interface ErrorBody {
  error: { code: string; message: string; audit_seq?: unknown; maybe_executed?: unknown };
}

type Entry = Record<string, unknown> & { seq: number; kind?: string };

type CredSpec = SshCredSpec & { auth: 'key' | 'password' };

function addSsh(s: Stack, c: CredSpec, secretFile: string): void {
  const r = addSshCredential(s.h, c, secretFile);
  if (r.code !== 0) throw new Error(`cred add ${c.name}: ${r.stderr}`);
}

const auditEntries = (s: Stack): Entry[] => auditList<Entry>(s);

t.test('SSH failures through the daemon', async (t) => {
  const [sshd, s] = await Promise.all([startSshd({ passwordUser: true }), startStack()]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  await s.approver();
  const password = sshd.password!.password;
  const home = join(sshd.dir, 'home');
  const base = { port: sshd.port, user: sshd.user, hostKey: sshd.hostKeyFingerprint };
  const pwFile = s.h.file('pw.secret', password + '\n');
  addSsh(
    s,
    { ...base, name: 'wrongkey', auth: 'key', hostKey: sshd.otherHostKeyFingerprint, commands: ['touch ran-wrongkey'] },
    sshd.keys.ed25519.path,
  );
  addSsh(
    s,
    {
      ...base,
      name: 'wrongkey-pw',
      auth: 'password',
      hostKey: sshd.otherHostKeyFingerprint,
      commands: ['touch ran-wrongkey-pw'],
    },
    pwFile,
  );
  addSsh(
    s,
    {
      ...base,
      name: 'good',
      auth: 'key',
      commands: ['id -un', 'sleep 30', "trap '' TERM; sleep 29", 'touch ran-good'],
    },
    sshd.keys.ed25519.path,
  );
  addSsh(s, { ...base, name: 'stranger', auth: 'key', commands: ['touch ran-stranger'] }, sshd.keys.stranger.path);
  addSsh(
    s,
    { ...base, name: 'badpw', auth: 'password', commands: ['touch ran-badpw'] },
    s.h.file('bad.secret', password + 'x\n'),
  );
  addSsh(
    s,
    { ...base, port: await freePort(), name: 'closed', auth: 'key', commands: ['touch ran-closed'] },
    sshd.keys.ed25519.path,
  );

  const texts: string[] = [];
  const post = async (body: Record<string, unknown>): Promise<{ status: number; json: unknown; text: string }> => {
    const r = await agentRequest(s.sock, 'POST', '/v1/ssh', body);
    texts.push(r.text);
    return r;
  };

  await t.test('a host key other than the pinned one: refused before authentication', async (t) => {
    for (const name of ['wrongkey', 'wrongkey-pw']) {
      const logBefore = sshd.logs().length;
      const connections = sshd.connections();
      const r = await post({ credential: name, command: `touch ran-${name}` });
      t.equal(r.status, 502, r.text);
      const err = (r.json as ErrorBody).error;
      t.equal(err.code, 'host_key_mismatch');
      t.match(err.message, /not the pinned one; nothing was sent/);
      t.type(err.audit_seq, 'number');
      t.equal(
        sshd.connections(),
        connections + 2,
        'the server was reached twice: its ed25519 key was seen, then a handshake asking for the other host key types, of which it has none',
      );
      // Wait for sshd to log the end of both connections, then read all it said.
      t.ok(
        await eventually(() => /no matching host key type found/.test(sshd.logs().slice(logBefore)), 5000),
        'sshd logged both connections ending before authentication',
      );
      const said = sshd.logs().slice(logBefore);
      t.notMatch(
        said,
        /Accepted|Failed|Postponed|userauth|Invalid user|authenticat/i,
        `${name}: no authentication attempt:\n${said}`,
      );
      t.notMatch(said, sshd.user, 'the user was never named');
      t.notMatch(said, sshd.keys.ed25519.fingerprint, 'the key was never offered');
      t.notOk(existsSync(join(home, `ran-${name}`)), 'the command never ran');
      const outcome = auditEntries(s).find((e) => e.seq === err.audit_seq);
      t.match(outcome, { kind: 'ssh_outcome', error: 'host_key_mismatch' });
    }
    // The server itself is fine: the right pin logs in.
    const r = await post({ credential: 'good', command: 'id -un' });
    t.equal(r.status, 200, r.text);
    t.equal((r.json as SshReply).stdout, `${sshd.user}\n`);
  });

  await t.test('a refused login or a closed port: upstream_error, nothing ran', async (t) => {
    for (const [name, message] of [
      ['stranger', /refused the credential's login; the command was not sent/],
      ['badpw', /refused the credential's login; the command was not sent/],
      ['closed', /refused the SSH connection/],
    ] as const) {
      const r = await post({ credential: name, command: `touch ran-${name}` });
      t.equal(r.status, 502, r.text);
      const err = (r.json as ErrorBody).error;
      t.equal(err.code, 'upstream_error', name);
      t.match(err.message, message);
      t.type(err.audit_seq, 'number');
      t.notOk(existsSync(join(home, `ran-${name}`)), `${name}: the command never ran`);
      t.match(
        auditEntries(s).find((e) => e.seq === err.audit_seq),
        { kind: 'ssh_outcome', error: 'upstream_error' },
      );
    }
  });

  await t.test('a timeout ends the remote command', async (t) => {
    for (const [command, timeoutMs, name] of [
      ['sleep 30', 1500, 'sleep 30'],
      ["trap '' TERM; sleep 29", 1000, 'sleep 29'],
    ] as const) {
      let seenRunning = false;
      const watch = setInterval(() => {
        if (sshd.processesOf(sshd.user).includes(name)) seenRunning = true;
      }, 25);
      const started = Date.now();
      const r = await post({ credential: 'good', command, timeout_ms: timeoutMs });
      const took = Date.now() - started;
      clearInterval(watch);
      t.equal(r.status, 504, r.text);
      const err = (r.json as ErrorBody).error;
      t.equal(err.code, 'upstream_timeout');
      t.equal(err.maybe_executed, true);
      t.type(err.audit_seq, 'number');
      t.ok(seenRunning, `${command}: the command was running`);
      t.ok(took >= timeoutMs && took < timeoutMs + 5000, `${command}: answered after ${took} ms`);
      t.ok(
        await eventually(() => !sshd.processesOf(sshd.user).some((p) => p.includes(name)), 5000),
        `${command}: ended on the server`,
      );
      t.match(
        auditEntries(s).find((e) => e.seq === err.audit_seq),
        { kind: 'ssh_outcome', error: 'upstream_timeout', maybe_executed: true },
      );
    }
    const r = await post({ credential: 'good', command: 'id -un' });
    t.equal(r.status, 200, `a command after a timeout: ${r.text}`);
  });

  await t.test('the password is in no reply, log or journal', async (t) => {
    t.same(exposures(texts.join('\n'), password), [], 'replies');
    t.same(exposures(s.d.logs(), password), [], 'daemon log');
    t.same(exposures(journalBytes(s.h.home), password), [], 'journal files');
    t.same(exposures(await journalText(s.h), password), [], 'decrypted journal entries');
    t.ok(texts.length >= 8);
  });
});
