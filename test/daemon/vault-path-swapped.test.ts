// A careless user (or an unlucky restore script) puts something that is not
// the vault at the vault's path while the daemon runs unlocked: a directory,
// a FIFO. The next vault write must either put the vault back (the daemon
// holds it in memory) or refuse in one line that names the vault file and
// says what to do (SPEC §5: "Errors are one line on stderr naming what to do
// next"), never "an unexpected error; see its log"; nothing stored is lost
// and the daemon keeps serving.
import t from 'tap';
import { mkdirSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { cli, unlockedHome, credAdd } from '../helpers/postern';

const DEF = (n: string): string =>
  `name = "${n}"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\n`;

function add(h: Awaited<ReturnType<typeof unlockedHome>>, name: string): ReturnType<typeof cli> {
  return credAdd(h, name, DEF(name), `tok_${name}_0123456789\n`);
}

t.test('a directory at the vault path: the write is refused naming the vault file, and what to do', async (t) => {
  const h = await unlockedHome(t);
  t.equal(add(h, 'first').code, 0);
  const vault = join(h.home, 'vault');
  renameSync(vault, join(h.dir, 'vault.aside'));
  mkdirSync(vault, { mode: 0o700 });
  const r = add(h, 'second');
  t.equal(r.code, 1, 'refused');
  t.notMatch(r.stderr, /unexpected error|see its log/, `a clear refusal, not an internal error: ${r.stderr.trim()}`);
  t.match(r.stderr, /vault/, 'names the vault file');
  rmdirSync(vault);
  renameSync(join(h.dir, 'vault.aside'), vault);
  t.equal(cli(h, ['status']).code, 0, 'the daemon still serves');
  const third = add(h, 'third');
  t.equal(third.code, 0, `a write succeeds once the vault is back: ${third.stderr}`);
});

t.test('a FIFO at the vault path: the next write puts the vault back, no hang, nothing lost', async (t) => {
  const h = await unlockedHome(t);
  t.equal(add(h, 'first').code, 0);
  const vault = join(h.home, 'vault');
  rmSync(vault);
  execFileSync('mkfifo', ['-m', '600', vault]);
  const t0 = Date.now();
  const r = add(h, 'second');
  t.ok(Date.now() - t0 < 15_000, 'no hang');
  t.equal(r.code, 0, r.stderr);
  t.equal(cli(h, ['lock']).code, 0);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0, 'the rewritten vault opens');
  const list = cli(h, ['cred', 'list', '--json']);
  const names = (JSON.parse(list.stdout).credentials as { name: string }[]).map((c) => c.name).sort();
  t.same(names, ['first', 'second'], 'both credentials are there');
});
