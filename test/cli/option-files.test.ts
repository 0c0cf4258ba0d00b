// Files given to the CLI that are not what they should be (a directory on
// stdin, a FIFO nobody writes to, an endless device, non-UTF-8 text, an
// empty path, as an unset variable gives): each answered at once with a
// clear refusal, never a hang, a read without bound, a silent fix-up or "a
// bug in postern". Each row failed before its change.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, init, makeHome, unlockedHome } from '../helpers/postern';
import { BUG, STACK, runTimed } from '../helpers/cli-timed';

const DEF = `name = "api"
kind = "http"
[inject]
header = "Authorization"
template = "Bearer {secret}"
[[allow]]
host = "api.example.com"
`;

const ready = unlockedHome;

t.test('--passphrase-file - with stdin a directory: a clear refusal, not "a bug in postern"', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const dir = join(h.dir, 'somedir');
  mkdirSync(dir);
  // init reads the new passphrase before anything else is touched.
  const r = await runTimed(h.env, ['init', '--kdf', 'interactive', '--passphrase-file', '-'], { stdinPath: dir });
  t.notOk(r.timedOut, 'ends');
  t.notMatch(r.stderr, BUG, `no "unexpected error (a bug)": ${JSON.stringify(r.stderr.split('\n')[0])}`);
  t.notMatch(r.stderr, STACK, 'no stack trace (POSTERN_DEBUG=1 as the helpers set it)');
  t.match(r.stderr.split('\n')[0], /stdin|directory/i, 'its first line names stdin / the directory');
});

t.test('cred add --file naming a FIFO nobody writes to: refused at once, no hang', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const fifo = join(h.dir, 'def.fifo');
  execFileSync('mkfifo', [fifo]);
  const r = await runTimed(h.env, ['cred', 'add', '--file', fifo], { ms: 8000 });
  // The config loader refuses a FIFO at once ("not a regular file"); the
  // definition reader opens it and waits for a writer forever.
  t.notOk(r.timedOut, `ends by itself (killed after ${r.ms} ms)`);
  t.match(r.stderr, /not a regular file|FIFO|pipe/i, 'says what is wrong with the file');
});

t.test('cred add --file /dev/zero: refused at once, not read without bound', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  // Kept short: the reader grows by hundreds of MB per second.
  const r = await runTimed(h.env, ['cred', 'add', '--file', '/dev/zero'], { ms: 3000 });
  t.notOk(r.timedOut, `ends by itself (killed after ${r.ms} ms)`);
  t.equal(r.code, 2, 'a usage error: the command line names a device');
  t.match(r.stderr, /not a regular file|too large|larger than/i);
});

t.test('a definition that is not UTF-8 is refused, not stored with U+FFFD', async (t) => {
  const h = await ready(t);
  const def = h.file(
    'latin1.toml',
    Buffer.concat([
      Buffer.from('name = "api"\ndescription = "caf'),
      Buffer.from([0xe9]),
      Buffer.from(' billing"\n' + DEF.split('\n').slice(1).join('\n')),
    ]),
  );
  const secret = h.file('s', 'tok\n');
  const r = cli(h, ['cred', 'add', '--file', def, '--secret-file', secret, '--passphrase-file', h.passFile]);
  t.not(r.code, 0, 'refused (the config loader refuses the same bytes: "not valid UTF-8; save it as UTF-8 text")');
  t.match(r.stderr, /UTF-8/, 'says the file is not UTF-8');
  const show = cli(h, ['cred', 'show', 'api']);
  t.notOk(
    show.stdout.includes('\uFFFD'),
    `nothing stored with a replacement character: ${JSON.stringify(show.stdout.split('\n')[1])}`,
  );
});

t.test('cred update NAME --secret-file "" is an error, not "keep the secret"', async (t) => {
  const h = await ready(t);
  const def = h.file('d.toml', DEF);
  const secret = h.file('s', 'tok\n');
  t.equal(cli(h, ['cred', 'add', '--file', def, '--secret-file', secret, '--passphrase-file', h.passFile]).code, 0);
  // e.g. `--secret-file "$NEW_TOKEN_FILE"` with the variable unset.
  const r = cli(h, ['cred', 'update', 'api', '--file', def, '--secret-file', '', '--passphrase-file', h.passFile]);
  t.equal(r.code, 2, `usage error (got ${r.code}: ${JSON.stringify((r.stdout + r.stderr).trim().split('\n').at(-1))})`);
  t.match(r.stderr, /--secret-file/, 'names --secret-file');
});

t.test('--passphrase-file "" and --config "" are errors, not treated as absent', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const r = cli(h, ['audit', 'show', '--passphrase-file', '']);
  t.match(r.stderr, /--passphrase-file/, `names --passphrase-file: ${JSON.stringify(r.stderr.trim())}`);
  const c = cli(h, ['audit', 'head', '--config', '']);
  t.not(c.code, 0, `--config "" refused (got ${c.code}: ${JSON.stringify(c.stdout.trim())} from the home's config)`);
});

t.test('an unreadable option file has the same exit code everywhere', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const missing = join(h.dir, 'missing');
  const data = cli(h, [
    'request',
    'http',
    '--credential',
    'api',
    '--url',
    'https://api.example.com/',
    '--data-file',
    missing,
  ]);
  t.equal(data.code, 2, 'request --data-file: usage, 2 (test/cli/request-files.test.ts)');
  const def = cli(h, ['cred', 'add', '--file', missing]);
  t.equal(def.code, data.code, `cred add --file: same exit code (got ${def.code}: ${def.stderr.trim()})`);
  const pass = cli(h, ['audit', 'show', '--passphrase-file', missing]);
  t.equal(
    pass.code,
    data.code,
    `audit show --passphrase-file: same exit code (got ${pass.code}: ${pass.stderr.trim()})`,
  );
});

t.test('an empty secret is said once, not twice', async (t) => {
  const h = await ready(t);
  const def = h.file('d.toml', DEF);
  const empty = h.file('empty', '');
  const r = cli(h, ['cred', 'add', '--file', def, '--secret-file', empty, '--passphrase-file', h.passFile]);
  t.equal(r.code, 1);
  const lines = r.stderr.trim().split('\n');
  t.equal(lines.length, 1, `one line: ${JSON.stringify(lines)}`);
});
