// A daemon kept locked by a rolled-back vault says so (SPEC §6.3, §8):
// agents on POST /v1/http and /v1/ssh are refused 423 rollback_detected,
// told what a human must do (restore, or `unlock --accept-rollback`), not
// that a plain unlock would help; status shows the cause. Accepting the
// state lifts it.
import t from 'tap';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRequest, cli, init, makeHome, startDaemon } from '../helpers/postern';

const DEF = (name: string): string =>
  `name = "${name}"\nkind = "http"\n[inject]\nheader = "X-Key"\ntemplate = "{secret}"\n[[allow]]\nhost = "api.example.com"\n`;

t.test('agents are told rollback_detected while a rollback keeps the daemon locked', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  let d = await startDaemon(h);
  const unlock = (...extra: string[]): ReturnType<typeof cli> =>
    cli(h, ['unlock', '--passphrase-file', h.passFile, ...extra]);
  const add = (name: string): void => {
    const r = cli(h, [
      'cred',
      'add',
      '--file',
      h.file(`${name}.toml`, DEF(name)),
      '--secret-file',
      h.file(`${name}.secret`, `s-${name}`),
      '--passphrase-file',
      h.passFile,
    ]);
    t.equal(r.code, 0, r.stderr);
  };
  t.equal(unlock().code, 0);
  add('one');
  copyFileSync(join(h.home, 'vault'), join(h.dir, 'vault.old'));
  add('two');
  await d.stop();
  copyFileSync(join(h.dir, 'vault.old'), join(h.home, 'vault'));
  d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(unlock().code, 1, 'the unlock is refused');

  const st = JSON.parse(cli(h, ['status', '--json']).stdout) as { lock_code: string; lock_reason: string };
  t.equal(st.lock_code, 'rollback_detected');
  t.match(st.lock_reason, /^rollback detected: .*older copy of the vault/);
  const sock = join(h.home, 'agent.sock');
  for (const [path, body] of [
    ['/v1/http', { credential: 'one', method: 'GET', url: 'https://api.example.com/' }],
    ['/v1/ssh', { credential: 'box', command: 'true' }],
  ] as const) {
    const r = await agentRequest(sock, 'POST', path, body);
    t.equal(r.status, 423, path);
    const e = (r.json as { error: { code: string; message: string } }).error;
    t.equal(e.code, 'rollback_detected');
    t.match(
      e.message,
      /^the daemon stays locked because the vault or the journal was rolled back \(.*older copy of the vault.*\); a human must restore the matching vault and journal, or accept this state with `postern unlock --accept-rollback`$/,
    );
  }

  t.equal(unlock('--accept-rollback').code, 0);
  const r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'two',
    method: 'GET',
    url: 'https://api.example.com/',
  });
  t.match(r.json, { error: { code: 'unknown_credential' } }, 'unlocked: the accepted (older) vault answers');
});
