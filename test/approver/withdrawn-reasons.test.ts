// Every approver is told the true reason a card left its screen (SPEC §7):
// the vault was locked (`postern lock`), the card expired
// (daemon.approval_timeout), the requester went away, or another approver
// decided. The interactive approver in a real terminal (tmux), against the
// real daemon; the agent is told the matching refusal.
import t from 'tap';
import { cli, CLI, PASSPHRASE } from '../helpers/postern';
import { startStack } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';
import { Tmux } from '../helpers/tmux';

const CRED = (port: number): string =>
  `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\n`;

const code = (r: { json: unknown }): string => (r.json as { error: { code: string } }).error.code;

t.test('the approver says why a card was withdrawn', async (t) => {
  const s = await startStack({ config: 'approval_timeout = "4s"' });
  t.teardown(() => s.close());
  s.addCredential('api', CRED(s.up.port), 'withdrawn-secret-0123456789');
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const get = { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') };

  const tm = Tmux.start([process.execPath, CLI, 'approver'], { env: s.h.env, width: 200, height: 50 });
  t.teardown(() => tm.kill());
  await tm.waitFor(/^Vault passphrase:$/m);
  tm.type(PASSPHRASE);
  tm.send('Enter');
  await tm.waitFor(/No request is waiting for approval/, 20_000);
  const cardId = async (): Promise<string> =>
    /Approval request ([0-9a-f]{12})/.exec(await tm.waitFor(/Approval request [0-9a-f]{12}/))![1]!;

  await t.test('postern lock: the vault was locked', async (t) => {
    const reply = s.request(get);
    const id = await cardId();
    t.equal(cli(s.h, ['lock']).code, 0);
    const r = await reply;
    t.equal(r.status, 423);
    t.equal(code(r), 'vault_locked');
    const screen = await tm.waitFor(
      new RegExp(
        `request ${id} \\(api, pid ${process.pid}\\) withdrawn: the vault was locked \\(locked by \`postern lock\`\\)$`,
        'm',
      ),
    );
    t.notMatch(screen, /decided by another approver/);
    t.match(screen, /No request is waiting/);
    t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
  });

  await t.test('no decision in time: it expired', async (t) => {
    const reply = s.request(get);
    const id = await cardId();
    const r = await reply;
    t.equal(r.status, 403);
    t.equal(code(r), 'approval_timeout');
    const screen = await tm.waitFor(
      new RegExp(
        `request ${id} \\(api, pid ${process.pid}\\) withdrawn: it expired: no decision within 4s \\(daemon\\.approval_timeout\\)$`,
        'm',
      ),
    );
    t.notMatch(screen, /decided by another approver/);
  });

  await t.test('the requester exits: withdrawn by the requester', async (t) => {
    const agent = await Agent.start(script);
    t.teardown(() => agent.kill());
    void agent.request(s.sock, get).catch(() => undefined);
    const id = await cardId();
    agent.kill();
    await tm.waitFor(
      new RegExp(`request ${id} \\(api, pid ${agent.pid}\\) withdrawn: withdrawn by the requester$`, 'm'),
    );
  });

  await t.test('another approver decides: decided by another approver', async (t) => {
    const other = await s.approver(() => null);
    const reply = s.request(get);
    const id = await cardId();
    t.match(await other.request('approval.decide', { id, decision: 'deny' }), { ok: true, result: { taken: true } });
    t.equal(code(await reply), 'denied_by_user');
    await tm.waitFor(
      new RegExp(`request ${id} \\(api, pid ${process.pid}\\) withdrawn: decided by another approver$`, 'm'),
    );
  });
});
