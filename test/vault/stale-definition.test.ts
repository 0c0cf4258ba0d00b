// A stored definition is checked again when the vault is unlocked: one that
// no longer validates (a vault written by another version, or edited) makes
// requests with that credential refused, naming it and the fix, while the
// other credentials keep working. The policy engine never reads an
// unchecked definition.
import t from 'tap';
import { join } from 'node:path';
import { openVaultFile, rewriteVaultFile } from '../../shared/vault-format';
import { wipe } from '../../shared/crypto';
import { cli, init, makeHome, startDaemon, agentRequest, PASSPHRASE } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';

const def = (name: string): string =>
  `name = "${name}"\ndescription = "the ${name} API"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${name}.example.test"\n`;

const SECRETS: Record<string, string> = { good: makeCanary('STALEGOOD'), stale: makeCanary('STALEBAD') };

t.test('a stored definition that no longer validates is refused by name; the others work', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  let d = await startDaemon(h);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  for (const name of ['good', 'stale']) {
    const r = cli(h, [
      'cred',
      'add',
      '--file',
      h.file(`${name}.toml`, def(name)),
      '--secret-file',
      h.file(`${name}.secret`, `${SECRETS[name]}\n`),
      '--passphrase-file',
      h.passFile,
    ]);
    t.equal(r.code, 0, r.stderr);
  }
  t.equal(await d.stop(), 0);

  // The vault rewritten with "stale"'s rules in a shape no version accepts,
  // at the same generation (so rollback detection has nothing to say).
  const vault = join(h.home, 'vault');
  const { key, header, contents } = await openVaultFile(vault, Buffer.from(PASSPHRASE));
  const meta = contents.meta as { credentials: { name: string; definition: Record<string, unknown> }[] };
  const stale = meta.credentials.find((c) => c.name === 'stale')!;
  stale.definition['allow'] = [{ host: 'stale.example.test', methods: ['FETCH IT'] }];
  rewriteVaultFile(vault, key, { ...header, generation: header.generation - 1 }, contents);
  wipe(key);

  d = await startDaemon(h);
  t.teardown(() => d.stop());
  const u = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(u.code, 0, `the vault still unlocks: ${u.stderr}`);
  const sock = join(h.home, 'agent.sock');
  const r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'stale',
    method: 'GET',
    url: 'https://stale.example.test/',
  });
  t.equal(r.status, 500);
  const err = (r.json as { error: { code: string; message: string } }).error;
  t.equal(err.code, 'internal_error');
  t.match(
    err.message,
    /^the stored definition of credential "stale" no longer validates \(allow\[0\]\.methods\[0\]: .*\); a human must fix it with `postern cred update stale`$/,
  );
  const good = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'good',
    method: 'GET',
    url: 'https://elsewhere.example.test/',
  });
  t.equal(
    (good.json as { error: { code: string } }).error.code,
    'denied_policy',
    'the other credential is checked by its policy as before',
  );
  const list = JSON.parse(cli(h, ['cred', 'list', '--json']).stdout) as {
    credentials: { name: string; targets: unknown[]; problem?: string }[];
  };
  t.match(
    list.credentials.find((c) => c.name === 'stale'),
    { targets: [], problem: /allow\[0\]\.methods\[0\]/ },
    'cred list says what is wrong',
  );
  t.notOk('problem' in list.credentials.find((c) => c.name === 'good')!, 'and nothing about the good one');
  // The fix the message names works.
  const fixed = cli(h, [
    'cred',
    'update',
    'stale',
    '--file',
    h.file('stale2.toml', def('stale')),
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(fixed.code, 0, fixed.stderr);
  const after = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'stale',
    method: 'GET',
    url: 'https://elsewhere.example.test/',
  });
  t.equal(
    (after.json as { error: { code: string } }).error.code,
    'denied_policy',
    'fixed: checked by its policy again',
  );
  const said = JSON.stringify([r.json, good.json, list, after.json]) + fixed.stdout + fixed.stderr;
  t.equal(await d.stop(), 0);
  for (const secret of Object.values(SECRETS)) {
    t.same(findCanary(said + d.logs(), secret), [], 'no form of a secret in the replies, CLI output or daemon log');
  }
  const v = cli(h, ['audit', 'verify']);
  t.equal(v.code, 0, `the journal verifies: ${v.stdout}${v.stderr}`);
});
