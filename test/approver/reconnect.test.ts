// The approver outlives a daemon restart: it notices the lost connection,
// reconnects (backoff at most 2 s), attaches again with the passphrase it
// kept (the new daemon is locked: attaching still proves it), and decides
// the next card. It says so on screen each time.
import t from 'tap';
import { spawn } from 'node:child_process';
import { cli, CLI, startDaemon, eventually, Daemon } from '../helpers/postern';
import { startStack } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

t.test('a daemon restart: the approver reconnects and attaches again', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'reconnect-secret-0123456789',
  );
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());

  // Text mode this time: the lines a human would read.
  const ap = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'approver', '--auto', 'approve', '--passphrase-file', s.h.passFile],
    { env: s.h.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  ap.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  ap.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => ap.on('exit', (code) => r(code)));
  t.teardown(() => void ap.kill('SIGKILL'));
  const shows = async (re: RegExp, ms = 15_000): Promise<void> => {
    t.ok(await eventually(() => re.test(out), ms), `the approver shows ${re}`, { out, err });
  };

  await shows(/^attached as approver [0-9a-f]+; approving every request/m);
  await s.d.stop();
  await shows(/^the connection to the daemon was lost; reconnecting…$/m);
  // While the daemon is away it keeps trying (and says so once it waits 2 s).
  await shows(/^the daemon is not reachable; trying again every 2 s$/m, 10_000);
  t.equal(ap.exitCode, null, 'still running');

  let d2: Daemon | null = null;
  t.teardown(() => d2?.stop());
  d2 = await startDaemon(s.h);
  await shows(/^re-attached to the daemon \(approver [0-9a-f]+\)$/m, 20_000);
  t.equal(JSON.parse(cli(s.h, ['status', '--json']).stdout).approvers, 1, 'attached to the new daemon');

  t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
  const agent = await Agent.start(script);
  t.teardown(() => agent.kill());
  const r = await agent.request(s.sock, { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });
  t.equal(r.status, 200, r.text.slice(0, 200));
  await shows(
    new RegExp(
      `^decided [0-9a-f]{12} credential=api pid=${agent.pid} decision=session root_pid=${agent.pid} taken=true$`,
      'm',
    ),
  );

  ap.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM: exit 0');
  t.match(out, /approver stopped\n$/);
  t.equal(err, '', 'nothing on stderr');
});
