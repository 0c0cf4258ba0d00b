// Kept SSH connections (docs/ssh.md, Reuse), seen on the server. They close
// `ssh.connection_idle` after their last command: with connection_idle =
// "1s" the sshd session process of the connection ("sshd: <user>@notty") is
// gone within about a second of the last command, not before a command run
// meanwhile has finished, and the next command opens a new connection. A
// kept connection whose server stopped answering (its session process
// stopped with SIGSTOP): the next command's timeout_ms still holds (504
// upstream_timeout, maybe_executed), and the command after it gets a new
// connection.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { startSshd } from '../helpers/sshd';
import { startStack } from '../helpers/stack';
import { agentRequest, eventually } from '../helpers/postern';
import { SshReply, addSshCredential } from '../helpers/ssh-credential';

// Pids of the processes whose command line is `line`.
function pidsRunning(line: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ') === line)
        out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

t.test('connection_idle closes a kept connection', async (t) => {
  const [sshd, s] = await Promise.all([startSshd(), startStack({ sshConfig: 'connection_idle = "1s"' })]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  await s.approver();
  const added = addSshCredential(
    s.h,
    {
      name: 'box',
      port: sshd.port,
      user: sshd.user,
      hostKey: sshd.hostKeyFingerprint,
      commands: ['echo hi', 'sleep 1.5'],
    },
    sshd.keys.ed25519.path,
  );
  t.equal(added.code, 0, added.stderr);
  // sshd's unprivileged process for a logged-in connection.
  const sessions = (): number => sshd.processesOf(sshd.user).filter((p) => p === `sshd: ${sshd.user}@notty`).length;
  const run = async (command: string): Promise<SshReply> => {
    const r = await agentRequest(s.sock, 'POST', '/v1/ssh', { credential: 'box', command });
    t.equal(r.status, 200, r.text);
    return r.json as SshReply;
  };
  const gone = async (): Promise<number> => {
    const from = Date.now();
    t.ok(await eventually(() => sessions() === 0, 5000), 'the session ended on the server');
    return Date.now() - from;
  };

  const before = sshd.connections();
  t.equal((await run('echo hi')).stdout, 'hi\n');
  t.equal(sessions(), 1, 'the connection is kept after the command');
  const after = await gone();
  t.ok(after >= 700 && after <= 3000, `closed ${after} ms after the command (connection_idle 1 s)`);
  t.equal(sshd.connections(), before + 1);

  t.equal((await run('echo hi')).stdout, 'hi\n');
  t.equal(sshd.connections(), before + 2, 'the next command opened a new connection');

  // A command running past the idle time keeps the connection; the idle
  // time counts from its end.
  t.equal((await run('sleep 1.5')).exit_code, 0);
  t.equal(sshd.connections(), before + 2, 'the long command ran on the kept connection');
  t.equal(sessions(), 1, 'still open right after the long command');
  const afterLong = await gone();
  t.ok(afterLong >= 700 && afterLong <= 3000, `closed ${afterLong} ms after the long command ended`);

  await t.test('a kept connection that stopped answering: timeout_ms holds', async (t) => {
    t.equal((await run('echo hi')).stdout, 'hi\n');
    const held = pidsRunning(`sshd: ${sshd.user}@notty`);
    t.equal(held.length, 1, 'one kept connection');
    const connections = sshd.connections();
    process.kill(held[0]!, 'SIGSTOP');
    const resume = (): void => {
      try {
        process.kill(held[0]!, 'SIGCONT');
      } catch {
        // gone already
      }
    };
    t.teardown(resume);
    const started = Date.now();
    const r = await agentRequest(s.sock, 'POST', '/v1/ssh', {
      credential: 'box',
      command: 'echo hi',
      timeout_ms: 1000,
    });
    const took = Date.now() - started;
    t.equal(r.status, 504, r.text);
    t.same((r.json as { error: Record<string, unknown> }).error, {
      code: 'upstream_timeout',
      message:
        '127.0.0.1 did not start the command in time (its exec channel was not confirmed); it may yet run — check before retrying',
      maybe_executed: true,
      audit_seq: (r.json as { error: { audit_seq: unknown } }).error.audit_seq,
    });
    t.ok(took >= 1000 && took < 4000, `answered after ${took} ms (timeout_ms 1000)`);
    t.equal(sshd.connections(), connections, 'no new connection was tried');
    resume();
    t.ok(
      await eventually(() => pidsRunning(`sshd: ${sshd.user}@notty`).length === 0, 5000),
      'postern dropped that connection',
    );
    t.equal((await run('echo hi')).stdout, 'hi\n');
    t.equal(sshd.connections(), connections + 1, 'the next command had a new connection');
  });
});
