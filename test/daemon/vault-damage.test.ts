// A damaged vault gets a clear, one-line refusal from the real daemon and
// CLI — never a crash, a hang or a stack trace — and nothing else is lost.
import t from 'tap';
import { copyFileSync, readFileSync, symlinkSync, renameSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon } from '../helpers/postern';

const noStack = /\n\s+at [^\n]+\(/;

t.test('truncated, bit-flipped and cost-inflated vaults', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const vault = join(h.home, 'vault');
  const good = readFileSync(vault);
  copyFileSync(vault, join(h.dir, 'vault.good'));

  // Truncated inside the header: the daemon refuses to start, naming it.
  writeFileSync(vault, good.subarray(0, 40));
  let r = cli(h, ['daemon']);
  t.equal(r.code, 1);
  t.match(r.stderr, /vault/);
  t.match(r.stderr, /backup|init/);
  t.notMatch(r.stderr, noStack);

  // A header asking for a 4 GiB / billion-pass derivation is refused at once.
  for (const [offset, value, what] of [
    [14, 0xffffffff, 'memlimit'],
    [10, 1_000_000_000, 'opslimit'],
  ] as const) {
    const evil = Buffer.from(good);
    evil.writeUInt32LE(value, offset);
    writeFileSync(vault, evil);
    const started = Date.now();
    r = cli(h, ['daemon']);
    t.equal(r.code, 1, `${what} inflated`);
    t.match(r.stderr, new RegExp(what));
    t.ok(Date.now() - started < 5000, `${what}: refused without deriving`);
  }

  // A body bit flipped: the daemon starts, unlock refuses, the vault is untouched.
  const flipped = Buffer.from(good);
  flipped[flipped.length - 20]! ^= 0x01;
  writeFileSync(vault, flipped);
  const d = await startDaemon(h);
  r = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(r.code, 1);
  t.match(r.stderr, /wrong passphrase \(or the vault was modified\)|modified/);
  t.notMatch(r.stderr, noStack);
  t.same(readFileSync(vault), flipped, 'the refused vault is left as it was');
  await d.stop();

  // The good copy opens again.
  writeFileSync(vault, good);
  const d2 = await startDaemon(h);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  await d2.stop();
});

t.test('a home replaced by a symlink after init is refused by the daemon', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const moved = join(h.dir, 'elsewhere');
  renameSync(h.home, moved);
  symlinkSync(moved, h.home);
  const r = cli(h, ['daemon']);
  t.equal(r.code, 1);
  t.match(r.stderr, /symlink/);
});

t.test('a missing vault: the daemon says to run init', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(join(h.home, 'config.toml'), '', { mode: 0o600 });
  const r = cli(h, ['daemon']);
  t.equal(r.code, 1);
  t.match(r.stderr, /postern init/);
});
