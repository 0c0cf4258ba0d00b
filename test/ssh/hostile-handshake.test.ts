// POST /v1/ssh against servers that misbehave before the command runs: one
// that accepts TCP and says nothing, one that sends its version and stalls,
// one that sends garbage, one that floods pre-version lines, one that asks
// for a password change, one that refuses every login, one that shows
// another host key, one that never answers the exec request. SPEC §6.3
// (a code, a message saying what to do, the daemon keeps serving), §6.6
// (host key before any authentication; timeouts), docs/ssh.md "Timeouts
// and failures" (connecting: min(timeout_ms, 20 s)).
import t from 'tap';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startStack } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';
import { addSshCredential, SshReply } from '../helpers/ssh-credential';
import { exposures } from '../helpers/exposure';
import { journalText } from '../helpers/canary';
import { startHostile, newEd25519, rssKb } from '../helpers/ssh-hostile-server';

interface Err {
  code?: string;
  message?: string;
  maybe_executed?: unknown;
  audit_seq?: unknown;
  offered_host_keys?: { type: string; fingerprint: string }[];
}
const errOf = (j: unknown): Err => ((j as { error?: Err } | null)?.error ?? {}) as Err;

// A raw TCP server whose connections do `onConn`.
async function rawServer(onConn: (s: net.Socket) => void): Promise<{ port: number; close(): Promise<void> }> {
  const socks = new Set<net.Socket>();
  const srv = net.createServer((s) => {
    socks.add(s);
    s.on('error', () => undefined);
    s.on('close', () => socks.delete(s));
    onConn(s);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    port: (srv.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        for (const s of socks) s.destroy();
        srv.close(() => r());
      }),
  };
}

const PW = `pw-${randomBytes(16).toString('hex')}`;

t.test('servers that misbehave before the command runs', async (t) => {
  const pinned = newEd25519();
  const [s, silent, versionOnly, garbage, preflood, pwChange, refuser, otherKey, noExecReply, good] = await Promise.all(
    [
      startStack({ sshConfig: 'connection_idle = "1s"' }),
      rawServer(() => undefined),
      rawServer((c) => c.write('SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n')),
      rawServer((c) => {
        c.write('SSH-2.0-OpenSSH_9.2p1\r\n');
        c.write(randomBytes(4096));
        const i = setInterval(() => c.writable && c.write(randomBytes(4096)), 50);
        c.on('close', () => clearInterval(i));
      }),
      rawServer((c) => {
        // RFC 4253 §4.2 lets a server send lines before its version; endlessly.
        const line = Buffer.from('x'.repeat(200) + '\r\n');
        let stop = false;
        c.on('close', () => (stop = true));
        const pump = (): void => {
          while (!stop) if (!c.write(line)) return void c.once('drain', pump);
        };
        pump();
      }),
      startHostile({
        hostKey: pinned.private,
        auth: (ctx) => {
          if (ctx.method === 'password')
            (ctx as unknown as { requestChange(p: string, cb: () => void): void }).requestChange(
              'Your password expired. New password:',
              () => undefined,
            );
          else ctx.reject(['password']);
        },
      }),
      startHostile({ hostKey: pinned.private, auth: (ctx) => ctx.reject(['password', 'keyboard-interactive']) }),
      startHostile(), // a fresh key, not the pinned one
      startHostile({
        hostKey: pinned.private,
        execNoReply: true,
      }),
      startHostile({ hostKey: pinned.private }),
    ],
  );
  t.teardown(async () => {
    for (const x of [silent, versionOnly, garbage, preflood, pwChange, refuser, otherKey, noExecReply, good])
      await x.close();
    await s.close();
  });
  await s.approver();
  const add = (name: string, port: number, hostKey = pinned.fingerprint, commands = ['uptime']): void => {
    const r = addSshCredential(
      s.h,
      { name, port, user: 'deploy', auth: 'password', hostKey, commands },
      s.h.file(`${name}.secret`, PW + '\n'),
    );
    if (r.code !== 0) throw new Error(r.stderr);
  };
  add('silent', silent.port);
  add('version-only', versionOnly.port);
  add('garbage', garbage.port);
  add('preflood', preflood.port);
  add('pw-change', pwChange.port);
  add('refuser', refuser.port);
  add('other-key', otherKey.port);
  add('good', good.port);
  const texts: string[] = [];
  const post = async (body: Record<string, unknown>) => {
    const x = await agentRequest(s.sock, 'POST', '/v1/ssh', body);
    texts.push(x.text);
    return x;
  };
  const timed = async (body: Record<string, unknown>) => {
    const at = Date.now();
    const x = await post(body);
    return { ...x, took: Date.now() - at };
  };

  for (const [name, label] of [
    ['silent', 'accepts TCP and never speaks'],
    ['version-only', 'sends its version and stalls'],
  ] as const) {
    await t.test(`a server that ${label}: 504 at the connect limit, not sent`, async (t) => {
      const x = await timed({ credential: name, command: 'uptime', timeout_ms: 2000 });
      t.equal(x.status, 504, x.text.slice(0, 300));
      const e = errOf(x.json);
      t.equal(e.code, 'upstream_timeout');
      t.equal(e.maybe_executed, false, 'nothing was sent: maybe_executed false');
      t.match(e.message ?? '', /not sent/, 'the message says the command was not sent');
      t.ok(x.took < 5000, `answered in ${x.took} ms (timeout_ms 2000)`);
    });
  }

  await t.test('a server that sends garbage after its version: 502 upstream_error promptly', async (t) => {
    const x = await timed({ credential: 'garbage', command: 'uptime', timeout_ms: 5000 });
    t.equal(x.status, 502, x.text.slice(0, 300));
    t.equal(errOf(x.json).code, 'upstream_error');
    t.ok(x.took < 4000, `answered in ${x.took} ms`);
  });

  await t.test('endless lines before the version: refused within the limit, memory bounded', async (t) => {
    const pid = s.d.proc.pid!;
    const before = rssKb(pid);
    const x = await timed({ credential: 'preflood', command: 'uptime', timeout_ms: 3000 });
    t.ok([502, 504].includes(x.status), x.text.slice(0, 300));
    t.ok(['upstream_error', 'upstream_timeout'].includes(errOf(x.json).code ?? ''), String(errOf(x.json).code));
    t.ok(x.took < 6000, `answered in ${x.took} ms`);
    t.ok(rssKb(pid) - before < 100_000, `RSS grew ${rssKb(pid) - before} kB`);
  });

  await t.test('a server that asks for a password change: refused within the connect limit, no command', async (t) => {
    const x = await timed({ credential: 'pw-change', command: 'uptime', timeout_ms: 2000 });
    t.ok([502, 504].includes(x.status), x.text.slice(0, 300));
    t.ok(x.took < 5000, `answered in ${x.took} ms`);
    t.equal(errOf(x.json).maybe_executed ?? false, false);
    t.notOk(
      pwChange.events.some((e) => e.startsWith('session:exec')),
      'no command was sent',
    );
  });

  await t.test('a server that refuses every login: 502 upstream_error; no keyboard-interactive tried', async (t) => {
    const x = await timed({ credential: 'refuser', command: 'uptime', timeout_ms: 5000 });
    t.equal(x.status, 502, x.text.slice(0, 300));
    t.equal(errOf(x.json).code, 'upstream_error');
    t.match(errOf(x.json).message ?? '', /refused the credential's login/);
    t.notOk(refuser.events.includes('auth:keyboard-interactive'), `auth methods tried: ${refuser.events.join(',')}`);
    t.ok(x.took < 4000);
  });

  await t.test('another host key: 502 host_key_mismatch, no authentication at all', async (t) => {
    const x = await timed({ credential: 'other-key', command: 'uptime' });
    t.equal(x.status, 502, x.text.slice(0, 300));
    const e = errOf(x.json);
    t.equal(e.code, 'host_key_mismatch');
    t.same(e.offered_host_keys, [{ type: 'ssh-ed25519', fingerprint: otherKey.fingerprint }]);
    t.match(e.message ?? '', /postern cred update/);
    t.same(
      otherKey.events.filter((x) => x.startsWith('auth:')),
      [],
      'the server saw no authentication attempt',
    );
    t.same(otherKey.passwords, []);
  });

  await t.test('the exec request is never answered: 504 maybe_executed true at timeout_ms', async (t) => {
    add('no-exec-reply', noExecReply.port, pinned.fingerprint, ['uptime']);
    // The server accepts the session channel but never answers the exec
    // request: docs/ssh.md says 504 maybe_executed true, connection closed.
    const x = await timed({ credential: 'no-exec-reply', command: 'uptime', timeout_ms: 1500 });
    t.ok(x.took < 5000, `answered in ${x.took} ms`);
    t.equal(x.status, 504, x.text.slice(0, 300));
    t.match(x.json, { error: { code: 'upstream_timeout', maybe_executed: true } });
  });

  await t.test('ten requests stuck on a silent server do not hold up another credential', async (t) => {
    const stuck = Array.from({ length: 10 }, () =>
      timed({ credential: 'silent', command: 'uptime', timeout_ms: 4000 }),
    );
    await new Promise((r) => setTimeout(r, 300));
    const ok = await timed({ credential: 'good', command: 'uptime' });
    t.equal(ok.status, 200, ok.text.slice(0, 300));
    t.equal((ok.json as SshReply).stdout, 'ran uptime\n');
    t.ok(ok.took < 2000, `the other credential answered in ${ok.took} ms`);
    const all = await Promise.all(stuck);
    t.same(
      all.map((x) => errOf(x.json).code),
      Array(10).fill('upstream_timeout'),
    );
    t.equal(s.d.proc.exitCode, null, 'the daemon runs');
  });

  await t.test('no secret in replies, daemon log or journal', async (t) => {
    t.same(exposures(texts.join('\n'), PW), [], 'replies');
    t.same(exposures(s.d.logs(), PW), [], 'daemon log');
    t.same(exposures(await journalText(s.h), PW), [], 'journal');
  });
});
