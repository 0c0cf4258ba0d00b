// The human's emergency brake must not depend on a file the agent can write.
// SPEC §1: lock, revoke and ending sessions never need the passphrase, and
// "the config file is agent-writable in the same-user deployment". A
// confused deputy that scribbles on config.toml (broken TOML, an unknown
// key, a bad value) must not leave the human unable to `postern lock` or
// `postern sessions revoke --all` a daemon that is running unlocked with the
// config it was approved with.
import t from 'tap';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, unlockedHome } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';

async function lockedNow(home: string): Promise<boolean> {
  const a = await TestAdmin.connect(join(home, 'admin.sock'));
  try {
    const r = await a.request('status');
    return (r['result'] as { locked: boolean }).locked;
  } finally {
    a.close();
  }
}

const SCRIBBLES: [string, (orig: string) => string][] = [
  ['broken TOML appended', (o) => o + '\ngarbage [[[\n'],
  ['an unknown key', (o) => o.replace('[daemon]', '[daemon]\nauto_lok = "1h"')],
  ['a bad value', (o) => o.replace('[daemon]', '[daemon]\nmax_pending = -1')],
];

for (const [what, scribble] of SCRIBBLES) {
  t.test(`config.toml with ${what}: \`postern lock\` still locks the running daemon`, async (t) => {
    const h = await unlockedHome(t);
    const cfg = join(h.home, 'config.toml');
    writeFileSync(cfg, scribble(readFileSync(cfg, 'utf8')));
    t.equal(await lockedNow(h.home), false, 'precondition: the daemon is unlocked');

    const r = cli(h, ['lock']);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    t.equal(r.code, 0, `lock exits 0 (stderr: ${r.stderr.trim()})`);
    t.equal(await lockedNow(h.home), true, 'the daemon is locked after `postern lock`');
  });
}

t.test('config.toml broken: `postern sessions revoke --all` and `status` still reach the daemon', async (t) => {
  const h = await unlockedHome(t);
  const cfg = join(h.home, 'config.toml');
  writeFileSync(cfg, readFileSync(cfg, 'utf8') + '\n[[[ not toml\n');
  const rv = cli(h, ['sessions', 'revoke', '--all']);
  t.equal(rv.code, 0, `revoke --all exits 0 (stderr: ${rv.stderr.trim()})`);
  const st = cli(h, ['status', '--json']);
  t.equal(st.code, 0, `status exits 0 and can tell the human the daemon is unlocked (stderr: ${st.stderr.trim()})`);
});

t.test('config.toml removed from the home: `postern lock` still locks, with the defaults', async (t) => {
  const h = await unlockedHome(t);
  rmSync(join(h.home, 'config.toml'));
  const r = cli(h, ['lock']);
  t.equal(r.code, 0, `lock exits 0 (stderr: ${r.stderr.trim()})`);
  t.match(r.stderr, /no config file here/, 'the warning says what is wrong');
  t.equal(await lockedNow(h.home), true, 'the daemon is locked');
});

t.test('a --config that names no file, or a file that cannot be read: said as before, nothing defaulted', async (t) => {
  const h = await unlockedHome(t);
  const missing = cli(h, ['--config', join(h.dir, 'nowhere.toml'), 'lock']);
  t.equal(missing.code, 1, missing.stderr);
  t.match(missing.stderr, /nowhere\.toml: no config file here/);
  t.notMatch(missing.stderr, /warning/);
  t.equal(await lockedNow(h.home), false, 'nothing was sent to a daemon the config did not name');
});
