// A vault rewrite the filesystem refuses (full, immutable, read-only): the
// CLI gets a refusal naming the vault file, the errno and what to fix; the
// vault on disk is the one before; the daemon keeps serving and the change
// goes through once the filesystem is fixed. The home is a small tmpfs this
// test mounts (we run as root); the journal lives outside it, so only the
// vault write fails.
import t from 'tap';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { cli, eventually, init, makeHome, startDaemon } from '../helpers/postern';
import { findCanary, journalText, makeCanary } from '../helpers/canary';

const def = (name: string): string => `name = "${name}"
kind = "http"

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "api.example.test"
paths = ["/v1/*"]
`;

// Fills the filesystem of `dir` to the last block; returns the filler.
function fill(dir: string): string {
  const filler = join(dir, 'filler');
  const st = fs.statfsSync(dir);
  fs.writeFileSync(filler, Buffer.alloc(Number(st.bavail) * Number(st.bsize), 1));
  return filler;
}

t.test('a vault write refused by the filesystem leaves the vault as it was, and says what to fix', async (t) => {
  const h = makeHome();
  fs.mkdirSync(h.home, { mode: 0o700 });
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', h.home]);
  let daemonStop: (() => Promise<unknown>) | null = null;
  t.teardown(async () => {
    await daemonStop?.();
    execFileSync('chattr', ['-i', h.home]);
    execFileSync('umount', ['-l', h.home]);
    h.cleanup();
  });
  fs.writeFileSync(join(h.home, 'config.toml'), `[daemon]\naudit_log = "${join(h.dir, 'audit.log')}"\n`, {
    mode: 0o600,
  });
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  daemonStop = () => d.stop();
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);

  const canary = makeCanary('VAULTFAIL');
  const secret = h.file('secret', `${canary}\n`);
  const outputs: string[] = [];
  const add = (name: string, ...extra: string[]) => {
    const r = cli(h, [
      'cred',
      'add',
      '--file',
      h.file(`${name}.toml`, def(name)),
      '--secret-file',
      secret,
      '--passphrase-file',
      h.passFile,
      ...extra,
    ]);
    outputs.push(r.stdout, r.stderr);
    return r;
  };
  const names = (): string[] => {
    const r = cli(h, ['cred', 'list', '--json']);
    return (JSON.parse(r.stdout) as { credentials: { name: string }[] }).credentials.map((c) => c.name);
  };
  t.equal(add('first').code, 0);
  const vault = join(h.home, 'vault');
  const before = fs.readFileSync(vault);
  const homeFiles = fs.readdirSync(h.home).sort();

  const failed = (errno: string, text: string, remedy: string): string =>
    `postern: the vault ${vault} could not be written (${errno}: ${text}); nothing was changed; ${remedy}, then retry\n`;
  const unchanged = (what: string): void => {
    t.ok(fs.readFileSync(vault).equals(before), `${what}: the vault file is the one before`);
    t.same(
      fs
        .readdirSync(h.home)
        .filter((n) => n !== 'filler')
        .sort(),
      homeFiles,
      `${what}: no temp file left in the home`,
    );
    t.same(names(), ['first'], `${what}: the daemon still serves the credentials it had`);
  };

  // Full.
  const filler = fill(h.home);
  const full = failed('ENOSPC', 'no space left on device', `free space on the filesystem that holds ${h.home}`);
  let r = add('second', '--json');
  t.equal(r.code, 1);
  // With --json the normalised definition is shown on stderr first.
  t.equal(r.stderr.slice(r.stderr.lastIndexOf('\n', r.stderr.length - 2) + 1), full, 'the last line of stderr');
  t.same(JSON.parse(r.stdout).error, {
    code: 'bad_environment',
    message: full.slice('postern: '.length, -1),
    errno: 'ENOSPC',
    path: vault,
  });
  unchanged('ENOSPC');
  t.ok(
    await eventually(() =>
      d
        .logs()
        .includes(
          `"event":"vault_write_failed","kind":"cred_add","path":${JSON.stringify(vault)},"errno":"ENOSPC","code":"bad_environment"`,
        ),
    ),
    'the log names the file and the errno',
  );
  fs.rmSync(filler);

  // Immutable (chattr +i): no file can be created in the home.
  execFileSync('chattr', ['+i', h.home]);
  r = add('second');
  t.equal(r.code, 1);
  t.equal(
    r.stderr,
    failed(
      'EPERM',
      'operation not permitted',
      `fix the permissions of ${h.home} (the daemon's user must be able to create and rename files in it; \`lsattr -d\` shows an immutable flag)`,
    ),
  );
  unchanged('EPERM');
  execFileSync('chattr', ['-i', h.home]);

  // Read-only.
  execFileSync('mount', ['-o', 'remount,ro', h.home]);
  r = add('second');
  t.equal(r.code, 1);
  t.equal(r.stderr, failed('EROFS', 'read-only file system', `remount the filesystem that holds ${h.home} read-write`));
  unchanged('EROFS');
  execFileSync('mount', ['-o', 'remount,rw', h.home]);

  // The vault on disk opens with what it had.
  t.equal(cli(h, ['lock']).code, 0);
  r = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, `unlocks again: ${r.stderr}`);
  t.same(names(), ['first'], 'after lock and unlock');

  // Fixed: the change goes through.
  r = add('second');
  t.equal(r.code, 0, r.stderr);
  t.same(names(), ['first', 'second']);
  t.equal(cli(h, ['lock']).code, 0);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  t.same(names(), ['first', 'second'], 'and is in the vault file');

  t.same(findCanary(outputs.join('\n'), canary), [], 'the secret is in no CLI output, refused or not');
  t.same(findCanary(d.logs(), canary), [], 'nor in the daemon log');
  t.same(findCanary(fs.readFileSync(join(h.dir, 'audit.log')), canary), [], 'nor in the journal file');
  t.same(findCanary(await journalText(h), canary), [], 'nor in any decrypted journal entry');
});
