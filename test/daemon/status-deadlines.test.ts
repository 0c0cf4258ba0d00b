// `postern status` says how many approvers are connected and when an
// unlocked daemon will lock by itself (SPEC §3): auto_lock after how long
// without an agent request and at what time (moved on by each request),
// unlock_max at what time; in text and --json. A locked daemon has no
// deadlines.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRequest, cli, CLI, eventually, init, makeHome, startDaemon } from '../helpers/postern';

interface Status {
  locked: boolean;
  approvers: number;
  auto_lock: { after: string; at: string } | null;
  unlock_max: { after: string; at: string } | null;
}

t.test('approvers and lock deadlines in status', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(join(h.home, 'config.toml'), '[daemon]\nauto_lock = "10m"\nunlock_max = "90m"\n', { mode: 0o600 });
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const status = (): Status => JSON.parse(cli(h, ['status', '--json']).stdout) as Status;

  let st = status();
  t.match(st, { locked: true, approvers: 0, auto_lock: null, unlock_max: null }, 'locked: no deadlines');
  let text = cli(h, ['status']).stdout;
  t.match(text, /^approvers: {4}0 connected$/m);
  t.notMatch(text, /auto-lock|unlock max/, 'locked: no deadline lines');

  const before = Date.now();
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const after = Date.now();
  st = status();
  t.equal(st.auto_lock?.after, '10m', 'in the units of the file');
  t.equal(st.unlock_max?.after, '90m');
  const autoAt = Date.parse(st.auto_lock!.at);
  const maxAt = Date.parse(st.unlock_max!.at);
  t.ok(
    autoAt >= before + 600_000 && autoAt <= after + 600_000,
    `auto_lock at ${st.auto_lock!.at}: 10 minutes after the unlock`,
  );
  t.ok(
    maxAt >= before + 5_400_000 && maxAt <= after + 5_400_000,
    `unlock_max at ${st.unlock_max!.at}: 90 minutes after the unlock`,
  );

  text = cli(h, ['status']).stdout;
  t.match(text, `auto-lock:    at ${st.auto_lock!.at} (after 10m without an agent request)\n`);
  t.match(text, `unlock max:   at ${st.unlock_max!.at} (90m after the unlock)\n`);

  // An agent request moves the idle deadline on, not the unlock_max one.
  await new Promise((r) => setTimeout(r, 50));
  const asked = Date.now();
  await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  const moved = status();
  t.ok(Date.parse(moved.auto_lock!.at) >= asked + 600_000, `auto_lock moved on to ${moved.auto_lock!.at}`);
  t.equal(moved.unlock_max!.at, st.unlock_max!.at, 'unlock_max did not move');

  // A real approver, connected: counted.
  const approver = spawn(
    '/usr/bin/env',
    [
      '-u',
      'NODE_OPTIONS',
      process.execPath,
      CLI,
      'approver',
      '--auto',
      'deny',
      '--json',
      '--passphrase-file',
      h.passFile,
    ],
    { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  approver.stdout.on('data', (b: Buffer) => (out += b.toString()));
  t.teardown(() => void approver.kill('SIGKILL'));
  t.ok(await eventually(() => /"attached"/.test(out), 15_000), 'the approver attached');
  t.equal(status().approvers, 1);
  t.match(cli(h, ['status']).stdout, /^approvers: {4}1 connected$/m);
  approver.kill('SIGTERM');
  t.ok(await eventually(() => status().approvers === 0, 5000), 'gone: counted no more');

  t.equal(cli(h, ['lock']).code, 0);
  t.match(status(), { locked: true, auto_lock: null, unlock_max: null }, 'locked again: no deadlines');
});
