// Rollback detection (SPEC §8) with the real daemon: an older copy of the
// vault, a journal cut back to before the vault's last write, and a journal
// from another vault each keep the daemon locked with rollback_detected,
// until a human accepts the state with `unlock --accept-rollback`.
import t, { type Test } from 'tap';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon, type Daemon, type Home } from '../helpers/postern';

const DEF = (name: string): string =>
  `name = "${name}"\nkind = "http"\n[inject]\nheader = "X-Key"\ntemplate = "{secret}"\n[[allow]]\nhost = "api.example.com"\n`;

function add(h: Home, name: string): void {
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
  if (r.code !== 0) throw new Error(r.stderr);
}

function unlock(h: Home, ...extra: string[]): ReturnType<typeof cli> {
  return cli(h, ['unlock', '--passphrase-file', h.passFile, '--json', ...extra]);
}

// A home whose vault was copied after credential "one" was added, then
// written again once per name in `later`, then put back: the daemon is
// started again on the older vault.
async function olderVault(t: Test, later: string[]): Promise<{ h: Home; d: Daemon }> {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const first = await startDaemon(h);
  t.equal(unlock(h).code, 0);
  add(h, 'one');
  copyFileSync(join(h.home, 'vault'), join(h.dir, 'vault.old'));
  for (const name of later) add(h, name);
  await first.stop();
  copyFileSync(join(h.dir, 'vault.old'), join(h.home, 'vault'));
  return { h, d: await startDaemon(h) };
}

t.test('an older copy of the vault is refused until accepted', async (t) => {
  const { h, d } = await olderVault(t, ['two']);
  t.teardown(() => d.stop());
  let r = unlock(h);
  t.equal(r.code, 1);
  t.equal(JSON.parse(r.stdout).error.code, 'rollback_detected');
  t.match(r.stderr, /older copy of the vault/);
  t.match(r.stderr, /--accept-rollback/);
  t.equal(JSON.parse(cli(h, ['status', '--json']).stdout).locked, true, 'still locked');

  r = unlock(h, '--accept-rollback');
  t.equal(r.code, 0, r.stderr);
  t.same(
    JSON.parse(cli(h, ['cred', 'list', '--json']).stdout).credentials.map((c: { name: string }) => c.name),
    ['one'],
    'the accepted vault is the old one',
  );
  t.equal(cli(h, ['lock']).code, 0);
  t.equal(unlock(h).code, 0, 'after acceptance the vault and journal agree again');
});

t.test('a rollback of several writes, accepted, holds across a restart and verifies', async (t) => {
  const older = await olderVault(t, ['two', 'three']);
  const h = older.h;
  let d = older.d;
  t.equal(unlock(h).code, 1, 'refused');
  const r = unlock(h, '--accept-rollback');
  t.equal(r.code, 0, r.stderr);
  await d.stop();
  // The accepted vault's generation went past the journal's highest: after
  // a restart the journal's vault entries still never go down.
  d = await startDaemon(h);
  t.teardown(() => d.stop());
  const again = unlock(h);
  t.equal(again.code, 0, `unlocked after a restart: ${again.stderr}`);
  const v = cli(h, ['audit', 'verify', '--allow-unsigned-tail']);
  t.equal(v.code, 0, `the journal verifies: ${v.stdout}${v.stderr}`);
});

t.test("a journal cut back to before the vault's last write is refused", async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  let d = await startDaemon(h);
  t.equal(unlock(h).code, 0);
  add(h, 'one');
  copyFileSync(join(h.home, 'audit.log'), join(h.dir, 'audit.old'));
  add(h, 'two');
  await d.stop();

  copyFileSync(join(h.dir, 'audit.old'), join(h.home, 'audit.log'));
  d = await startDaemon(h);
  t.teardown(() => d.stop());
  const r = unlock(h);
  t.equal(r.code, 1);
  t.equal(JSON.parse(r.stdout).error.code, 'rollback_detected');
  t.match(r.stderr, /cut back/);
});

t.test('a journal from another vault is refused', async (t) => {
  const a = makeHome();
  const b = makeHome();
  t.teardown(() => {
    a.cleanup();
    b.cleanup();
  });
  t.equal(init(a).code, 0);
  t.equal(init(b).code, 0);
  copyFileSync(join(b.home, 'audit.log'), join(a.home, 'audit.log'));
  const d = await startDaemon(a);
  t.teardown(() => d.stop());
  const r = unlock(a);
  t.equal(r.code, 1);
  t.equal(JSON.parse(r.stdout).error.code, 'rollback_detected');
  t.match(r.stderr, /another vault/);
});
