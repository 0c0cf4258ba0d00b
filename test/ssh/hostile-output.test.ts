// POST /v1/ssh against a hostile SSH server (ssh2's Server on loopback) that
// holds the pinned host key and learns the password at login, then tries to
// hand it back to the agent through every channel it controls: stdout and
// stderr in many encodings and split across packets, the exit-signal name
// and its message, non-UTF-8 output, output around the max_output cap. It
// also floods, never exits, ignores signals, sends exit-status twice and
// opens channels back towards the client. SPEC §6.6 (password redacted
// from output like §6.4; exec only; on timeout the command is signalled
// and the channel closed), §6.3 (codes, daemon keeps serving), §6.4
// (secrets never in postern's errors, logs or journal).
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { startStack, auditList } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';
import { addSshCredential, SshReply } from '../helpers/ssh-credential';
import { exposures, base32 } from '../helpers/exposure';
import { journalBytes, journalText } from '../helpers/canary';
import { startHostile, writeSlowly, rssKb, ExecInfo } from '../helpers/ssh-hostile-server';
// ssh2's server refuses to send a signal name it does not know; a hostile
// server is not bound by that, so the table is widened in this process.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { SIGNALS } = require('ssh2/lib/protocol/constants') as { SIGNALS: Record<string, number> };

// Upper case so that it survives ssh2's upper-casing of signal names.
const PW = `PW${randomBytes(18).toString('hex').toUpperCase()}`;
SIGNALS[PW] = 1;
const CAP = 64 * 1024;

const pct = (b: Buffer): string => [...b].map((x) => `%${x.toString(16).padStart(2, '0')}`).join('');
const forms = (): string[] => {
  const b = Buffer.from(PW);
  return [
    `raw ${PW}`,
    `b64-0 ${b.toString('base64')}`,
    `b64-1 ${Buffer.concat([Buffer.from('x'), b]).toString('base64')}`,
    `b64-2 ${Buffer.concat([Buffer.from('xy'), b]).toString('base64')}`,
    `b64url ${b.toString('base64url')}`,
    `hex ${b.toString('hex')}`,
    `HEX ${b.toString('hex').toUpperCase()}`,
    `pct ${pct(b)}`,
    `pct2 ${pct(b).replace(/%/g, '%25')}`,
    `b32 ${base32(b)}`,
    `html ${[...b].map((x) => `&#${x};`).join('')}`,
    `json ${[...b].map((x) => `\\u00${x.toString(16).padStart(2, '0')}`).join('')}`,
    `xesc ${[...b].map((x) => `\\x${x.toString(16).padStart(2, '0')}`).join('')}`,
  ];
};

function behave(e: ExecInfo): void {
  const s = e.stream;
  const done = (code = 0): void => {
    s.exit(code);
    s.end();
  };
  switch (e.command) {
    case 'forms':
      s.write(forms().join('\n') + '\n');
      s.write(Buffer.from(`u16le `).toString() + Buffer.from(PW, 'utf16le').toString('latin1'));
      s.write(
        Buffer.concat([
          Buffer.from('\nu16le-bytes '),
          Buffer.from(PW, 'utf16le'),
          Buffer.from('\nu16be-bytes '),
          Buffer.from(PW, 'utf16le').swap16(),
          Buffer.from('\n'),
        ]),
      );
      void writeSlowly(s.stderr, [PW.slice(0, 7), PW.slice(7, 20), PW.slice(20)]).then(() => done());
      return;
    case 'signal-name':
      s.write('bye\n');
      s.exit(PW, false, 'killed');
      s.end();
      return;
    case 'signal-message':
      s.write('bye\n');
      s.exit('TERM', false, `the password is ${PW}`);
      s.end();
      return;
    case 'binary':
      s.write(Buffer.concat([Buffer.from([0xff, 0xfe, 0x80]), Buffer.from(` ${PW} `), Buffer.from([0xc0, 0xaf])]));
      done();
      return;
    case 'straddle':
      s.write('A'.repeat(CAP - 10) + PW + '\n');
      done();
      return;
    case 'straddle-overflow':
      s.write('A'.repeat(CAP - 10) + PW + 'B'.repeat(200_000));
      done();
      return;
    case 'huge': {
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let n = 0;
      const pump = (): void => {
        while (n < 48) {
          n++;
          if (!s.write(chunk)) return void s.once('drain', pump);
        }
        done(0);
      };
      pump();
      return;
    }
    case 'endless': {
      const chunk = Buffer.alloc(64 * 1024, 0x62);
      let stop = false;
      s.on('close', () => (stop = true));
      const pump = (): void => {
        while (!stop) if (!s.write(chunk)) return void s.once('drain', pump);
      };
      pump();
      return;
    }
    case 'ignore':
      s.write('started\n');
      return; // never exits, never closes, ignores signals
    case 'twice':
      s.exit(7);
      s.exit(0);
      s.end();
      return;
    case 'noclose':
      s.write('done\n');
      s.exit(0);
      s.eof();
      return; // the channel is never closed
    case 'backchannels': {
      const results: string[] = [];
      const c = e.conn as unknown as {
        _chanMgr: { add(cb: unknown): number };
        _protocol: { openssh_authAgent(ch: number, w: number, p: number): void };
      };
      const tries: [string, (cb: (err?: Error) => void) => void][] = [
        ['x11', (cb) => e.conn.x11('127.0.0.1', 6000, (err) => cb(err))],
        ['forwarded-tcpip', (cb) => e.conn.forwardOut('127.0.0.1', 8080, '127.0.0.1', 5555, (err) => cb(err))],
        ['streamlocal', (cb) => e.conn.openssh_forwardOutStreamLocal('/tmp/x.sock', (err) => cb(err))],
        [
          'auth-agent',
          (cb) => {
            const w = (err?: Error) => cb(err);
            (w as unknown as { type: string }).type = 'auth-agent@openssh.com';
            const ch = c._chanMgr.add(w);
            c._protocol.openssh_authAgent(ch, 2 * 1024 * 1024, 32 * 1024);
          },
        ],
      ];
      let i = 0;
      const next = (): void => {
        if (i >= tries.length) {
          s.write(results.join(' ') + '\n');
          return done();
        }
        const [name, fn] = tries[i++]!;
        fn((err) => {
          results.push(`${name}:${err ? 'rejected' : 'ACCEPTED'}`);
          next();
        });
      };
      next();
      return;
    }
    default:
      s.write(`ran ${e.command}\n`);
      done();
  }
}

t.test('a hostile SSH server that knows the password', async (t) => {
  const [srv, s] = await Promise.all([
    startHostile({ onExec: behave }),
    startStack({ sshConfig: `max_output = "64KiB"\nconnection_idle = "1s"` }),
  ]);
  t.teardown(() => srv.close());
  t.teardown(() => s.close());
  await s.approver();
  const commands = [
    'forms',
    'signal-name',
    'signal-message',
    'binary',
    'straddle',
    'straddle-overflow',
    'huge',
    'endless',
    'ignore',
    'twice',
    'noclose',
    'backchannels',
    'echo ok',
  ];
  const r = addSshCredential(
    s.h,
    { name: 'pw', port: srv.port, user: 'deploy', auth: 'password', hostKey: srv.fingerprint, commands },
    s.h.file('pw.secret', PW + '\n'),
  );
  if (r.code !== 0) throw new Error(r.stderr);
  const texts: string[] = [];
  const post = async (body: Record<string, unknown>) => {
    const x = await agentRequest(s.sock, 'POST', '/v1/ssh', body);
    texts.push(x.text);
    return x;
  };
  const pid = s.d.proc.pid!;

  await t.test('password in many encodings, split across packets: redacted in the reply', async (t) => {
    const x = await post({ credential: 'pw', command: 'forms' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    t.equal(srv.passwords[0], PW, 'the server did learn the password');
    t.same(exposures(x.text, PW), [], 'no form of the password in the reply');
    t.ok((x.json as SshReply).redactions >= 10, `redactions counted (${(x.json as SshReply).redactions})`);
  });

  await t.test('password as the exit-signal name: not in the reply', async (t) => {
    const x = await post({ credential: 'pw', command: 'signal-name' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    t.equal((x.json as SshReply).stdout, 'bye\n');
    t.match(x.json, { exit_code: null, signal: 'SIGUNKNOWN' }, 'a name outside RFC 4254 is not passed on');
    t.same(exposures(x.text, PW), [], `no form of the password in the reply: ${x.text}`);
  });

  await t.test('password in the exit-signal error message: not in the reply', async (t) => {
    const x = await post({ credential: 'pw', command: 'signal-message' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    t.match(x.json, { exit_code: null, signal: 'SIGTERM' });
    t.same(exposures(x.text, PW), []);
  });

  await t.test('non-UTF-8 output (base64 encoding) is redacted before encoding', async (t) => {
    const x = await post({ credential: 'pw', command: 'binary' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    const j = x.json as SshReply;
    t.equal(j.encoding, 'base64');
    const raw = Buffer.from(j.stdout, 'base64');
    t.same(exposures(raw, PW), [], 'decoded stdout holds no password');
    t.equal(j.redactions, 1);
  });

  for (const cmd of ['straddle', 'straddle-overflow']) {
    await t.test(`password across the max_output cap (${cmd}): no part of it returned`, async (t) => {
      const x = await post({ credential: 'pw', command: cmd });
      t.equal(x.status, 200, x.text.slice(0, 300));
      const j = x.json as SshReply;
      t.ok(Buffer.byteLength(j.stdout) <= CAP, `at most max_output bytes (${Buffer.byteLength(j.stdout)})`);
      t.equal(j.truncated, true);
      t.notOk(j.stdout.includes(PW.slice(0, 8)), 'not even the first 8 characters of the password');
      t.same(exposures(x.text, PW), []);
    });
  }

  await t.test('3 MiB of output with a 64 KiB cap: truncated, exit status kept', async (t) => {
    const x = await post({ credential: 'pw', command: 'huge' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    const j = x.json as SshReply;
    t.equal(j.exit_code, 0);
    t.equal(j.truncated, true);
    t.equal(Buffer.byteLength(j.stdout), CAP);
  });

  await t.test('endless output, never exits: 504 at the timeout, memory bounded', async (t) => {
    const before = rssKb(pid);
    const at = Date.now();
    const x = await post({ credential: 'pw', command: 'endless', timeout_ms: 2000 });
    const took = Date.now() - at;
    t.equal(x.status, 504, x.text.slice(0, 300));
    t.match(x.json, { error: { code: 'upstream_timeout', maybe_executed: true } });
    t.ok(took < 7000, `answered in ${took} ms (timeout 2 s + TERM/KILL/close 2 s)`);
    const after = rssKb(pid);
    t.ok(after - before < 150_000, `daemon RSS grew ${after - before} kB`);
  });

  await t.test('a command that ignores signals and never closes: 504, signalled TERM then KILL', async (t) => {
    const mark = srv.events.length;
    const at = Date.now();
    const x = await post({ credential: 'pw', command: 'ignore', timeout_ms: 1500 });
    const took = Date.now() - at;
    t.equal(x.status, 504, x.text.slice(0, 300));
    t.match(x.json, { error: { code: 'upstream_timeout', maybe_executed: true } });
    t.ok(took < 6500, `answered in ${took} ms`);
    const sigs = srv.events.slice(mark).filter((e) => e.startsWith('request:signal') || e.startsWith('session:signal'));
    t.match(sigs, [/TERM/, /KILL/], `the server was sent TERM then KILL: ${JSON.stringify(sigs)}`);
  });

  await t.test('exit-status sent twice: the first one counts', async (t) => {
    const x = await post({ credential: 'pw', command: 'twice' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    t.equal((x.json as SshReply).exit_code, 7);
  });

  await t.test('exit-status and EOF but the channel is never closed: no hang', async (t) => {
    const at = Date.now();
    const x = await post({ credential: 'pw', command: 'noclose', timeout_ms: 1500 });
    const took = Date.now() - at;
    t.ok(took < 6500, `answered in ${took} ms: ${x.status} ${x.text}`);
    t.ok([200, 504].includes(x.status), x.text.slice(0, 300));
  });

  await t.test(
    'channels opened back towards postern (x11, forwarded-tcpip, streamlocal, agent): all refused',
    async (t) => {
      const mark = srv.events.length;
      const x = await post({ credential: 'pw', command: 'backchannels' });
      t.equal(x.status, 200, x.text.slice(0, 300));
      t.equal(
        (x.json as SshReply).stdout,
        'x11:rejected forwarded-tcpip:rejected streamlocal:rejected auth-agent:rejected\n',
      );
      const asked = srv.events.slice(mark).filter((e) => !e.startsWith('auth:'));
      t.same(
        asked.filter((e) => e !== 'channel:session' && !e.startsWith('session:exec:')),
        [],
        'postern asked for nothing but an exec session (no pty, env, agent or x11 forwarding, global requests)',
      );
    },
  );

  await t.test('the daemon keeps serving', async (t) => {
    const x = await post({ credential: 'pw', command: 'echo ok' });
    t.equal(x.status, 200, x.text.slice(0, 300));
    t.equal((x.json as SshReply).stdout, 'ran echo ok\n');
    t.equal(s.d.proc.exitCode, null);
  });

  await t.test('no form of the password in the daemon log or the journal', async (t) => {
    const logLines = s.d
      .logs()
      .split('\n')
      .filter((l) => l.includes(PW));
    t.same(exposures(s.d.logs(), PW), [], `daemon log: ${logLines.join('\n').slice(0, 600)}`);
    t.same(exposures(journalBytes(s.h.home), PW), [], 'journal files');
    const jt = await journalText(s.h);
    const found = exposures(jt, PW);
    const lines = jt.split('\n').filter((l) => l.includes(PW));
    t.same(found, [], `decrypted journal: ${lines.join('\n').slice(0, 600)}`);
    t.ok(auditList(s).length > 0);
  });
});
