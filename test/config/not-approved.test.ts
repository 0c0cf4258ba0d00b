// A daemon whose config is not approved stays locked (SPEC §3), and says
// so: agents on POST /v1/http and /v1/ssh are refused 423
// config_not_approved naming what changed in the units of the file, and are
// told a human must review it and run `postern config approve`, not that an
// unlock would help. The daemon knows it from the unlock attempt that
// failed, and from its start; once the config is approved (while locked)
// agents are told to wait for `postern unlock` again. `config approve`
// shows the same words.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRequest, cli, init, makeHome, startDaemon, Home } from '../helpers/postern';

interface Refused {
  status: number;
  code: string;
  message: string;
  changes?: unknown;
}

const CHANGE = 'daemon.approval_timeout: 2m → 1m; http.max_response_body: 8MiB → 1MiB';

async function agentsAreTold(h: Home): Promise<Refused[]> {
  const sock = join(h.home, 'agent.sock');
  const out: Refused[] = [];
  for (const [path, body] of [
    ['/v1/http', { credential: 'api', method: 'GET', url: 'https://api.example.test/' }],
    ['/v1/ssh', { credential: 'box', command: 'true' }],
  ] as const) {
    const r = await agentRequest(sock, 'POST', path, body);
    const e = (r.json as { error: { code: string; message: string; changes?: unknown } }).error;
    out.push({ status: r.status, code: e.code, message: e.message, changes: e.changes });
  }
  return out;
}

t.test('agents are told config_not_approved, naming the change, until a human approves it', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  let d = await startDaemon(h);
  t.teardown(() => d.stop());
  const cfg = join(h.home, 'config.toml');
  writeFileSync(
    cfg,
    readFileSync(cfg, 'utf8')
      .replace('# max_response_body = "8MiB"', 'max_response_body = "1MiB"')
      .replace('# approval_timeout = "120s"', 'approval_timeout = "60s"'),
  );

  let r = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(r.code, 1);
  t.equal(
    r.stderr,
    `postern: the config changed since it was approved (${CHANGE}); review it and run \`postern config approve\`, then \`postern unlock\`\n`,
    'the human is told what changed, in the units of the file',
  );

  const expected = `the daemon stays locked because its config changed since it was approved (${CHANGE}); a human must review the change and run \`postern config approve\` (unlocking is refused until then)`;
  for (const e of await agentsAreTold(h)) {
    t.equal(e.status, 423);
    t.equal(e.code, 'config_not_approved');
    t.equal(e.message, expected);
    t.match(
      e.changes,
      [{ path: 'daemon.approval_timeout', from: 120000, to: 60000 }, { path: 'http.max_response_body' }],
      'the changes, as data',
    );
    t.notMatch(e.message, /run `postern unlock`/, 'an unlock is not offered as the fix');
  }
  let st = JSON.parse(cli(h, ['status', '--json']).stdout) as { lock_reason: string; lock_code: string };
  t.equal(st.lock_code, 'config_not_approved');
  t.equal(st.lock_reason, `config not approved: ${CHANGE}`);
  t.match(cli(h, ['status']).stdout, `state:        locked (config not approved: ${CHANGE})\n`);

  await t.test('a daemon started with the changed config says it before any unlock', async (t) => {
    await d.stop();
    d = await startDaemon(h);
    for (const e of await agentsAreTold(h)) t.match(e, { status: 423, code: 'config_not_approved', message: expected });
  });

  await t.test('config approve shows the change in the same words; then agents wait for an unlock', async (t) => {
    r = cli(h, ['config', 'approve', '--passphrase-file', h.passFile]);
    t.equal(r.code, 0, r.stderr);
    t.match(
      r.stdout,
      `differs from the approved one:\n  daemon.approval_timeout: 2m → 1m\n  http.max_response_body: 8MiB → 1MiB\n`,
    );
    t.notMatch(r.stdout, /120000|8388608/, 'no raw numbers');
    t.match(r.stdout, /it applies at unlock: now run `postern unlock`/);
    const json = cli(h, ['config', 'approve', '--json', '--passphrase-file', h.passFile]);
    t.match(JSON.parse(json.stdout), { approved: true, changed: false }, 'approved now');
    for (const e of await agentsAreTold(h)) {
      t.equal(e.status, 423);
      t.equal(e.code, 'vault_locked');
      t.equal(
        e.message,
        'the vault is locked (the config was approved; waiting for `postern unlock`); a human must run `postern unlock`',
      );
    }
    st = JSON.parse(cli(h, ['status', '--json']).stdout) as { lock_reason: string; lock_code: string };
    t.equal(st.lock_code, 'vault_locked');
    t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
    const after = await agentsAreTold(h);
    t.match(after[0], { status: 404, code: 'unknown_credential' }, 'unlocked: the request is judged on its own');
  });
});
