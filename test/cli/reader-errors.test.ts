// Errors a person meets at the CLI (SPEC §5): one line, in their words, with
// a "did you mean" for a near miss; a passphrase from a pipe; a TOML slip
// named for what it is. Real CLI, real daemon.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cli, init, makeHome, startDaemon, agentRequest, CLI, ROOT } from '../helpers/postern';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const DEF = `name = "github"
description = "GitHub API"
kind = "http"

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "api.github.com"
`;

t.test('a passphrase from a pipe: --passphrase-file <(...) and - work', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  // bash's process substitution hands the command /dev/fd/63, a pipe.
  const r = spawnSync(
    'bash',
    [
      '-c',
      `exec env -u NODE_OPTIONS "$NODE" "$CLI" init --kdf interactive --passphrase-file <(printf '%s\\n' 'a passphrase from a pipe')`,
    ],
    {
      env: { ...h.env, NODE: process.execPath, CLI },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  t.equal(r.status, 0, r.stderr);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const u = spawnSync(
    'bash',
    [
      '-c',
      `exec env -u NODE_OPTIONS "$NODE" "$CLI" unlock --passphrase-file <(printf '%s\\n' 'a passphrase from a pipe')`,
    ],
    {
      env: { ...h.env, NODE: process.execPath, CLI },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  t.equal(u.status, 0, `unlock from a pipe: ${u.stderr}`);
  // A directory is still refused, naming what is accepted.
  const dir = cli(h, ['lock']);
  t.equal(dir.code, 0);
  const bad = cli(h, ['unlock', '--passphrase-file', h.dir]);
  t.equal(bad.code, 2, 'a usage error: the command line names a directory');
  t.equal(
    bad.stderr,
    `postern: the passphrase file ${h.dir} is not a regular file or a pipe; name a file, or use - for stdin\n`,
  );
});

t.test('near misses: credential names (CLI and agent) and definition keys get a did-you-mean', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const secret = h.file('s', 'ghp_canary_reader_errors\n');
  t.equal(
    cli(h, ['cred', 'add', '--file', h.file('gh.toml', DEF), '--secret-file', secret, '--passphrase-file', h.passFile])
      .code,
    0,
  );

  let r = cli(h, ['cred', 'show', 'githb']);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'postern: no credential named "githb" (did you mean "github"?); see `postern cred list`\n');
  r = cli(h, ['cred', 'show', 'zzz']);
  t.equal(r.stderr, 'postern: no credential named "zzz"; see `postern cred list`\n', 'nothing close: no guess');
  r = cli(h, ['cred', 'rm', 'GitHub', '--passphrase-file', h.passFile]);
  t.equal(
    r.stderr,
    'postern: no credential named "GitHub" (did you mean "github"?); see `postern cred list`\n',
    'case counts as a slip',
  );

  // The agent socket says it in a socket client's words, the CLI in a person's.
  const a = await agentRequest(join(h.home, 'agent.sock'), 'POST', '/v1/http', {
    credential: 'gihtub',
    method: 'GET',
    url: 'https://api.github.com/',
  });
  t.equal(a.status, 404);
  t.match((a.json as { error: unknown }).error, {
    code: 'unknown_credential',
    message: 'no credential named "gihtub" (did you mean "github"?); see GET /v1/credentials',
  });
  r = cli(h, ['request', 'http', '--credential', 'gihtub', '--url', 'https://api.github.com/']);
  t.match(
    r.stderr,
    /^postern: unknown_credential: no credential named "gihtub" \(did you mean "github"\?\); see `postern cred list`\n$/,
    'the CLI client: postern cred list',
  );

  // Definition keys: each problem once, with its guess.
  r = cli(h, [
    'cred',
    'add',
    '--file',
    h.file('bad.toml', DEF.replace('description', 'descriptio').replace('host =', 'hots =')),
    '--secret-file',
    secret,
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(r.code, 1);
  const lines = r.stderr.split('\n').filter(Boolean);
  t.equal(lines.length, 1, `one line: ${r.stderr}`);
  t.match(lines[0], /allow\[0\]\.hots: unknown key; remove it \(did you mean host\?\)/);
  t.match(lines[0], /descriptio: unknown key; remove it \(did you mean description\?\)/);
  t.notMatch(r.stdout + r.stderr, /ghp_canary_reader_errors/, 'the secret is in no output');
});

t.test('an unterminated TOML string is called that, in a definition and in the config', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const def = h.file('open.toml', 'name = "github\nkind = "http"\n');
  let r = cli(h, ['cred', 'add', '--file', def, '--secret-file', h.passFile, '--passphrase-file', h.passFile]);
  t.equal(
    r.stderr,
    `postern: ${def}: not valid TOML at line 1, column 15: a string is not closed before the end of line 1; end it with the quote it began with (use """ or ''' for a string of several lines); fix the definition and run the command again\n`,
  );
  // (cred list reads the config strictly; status, lock and sessions go on
  // with one that does not load: cli/emergency-brake)
  const crlf = h.file('crlf.toml', "[daemon]\r\nlog_level = 'info\r\n");
  r = cli(h, ['--config', crlf, 'cred', 'list']);
  t.equal(r.code, 1);
  t.equal(
    r.stderr,
    `postern: ${crlf}: not valid TOML: [syntax] line 2, column 18: a string is not closed before the end of line 2; end it with the quote it began with (use """ or ''' for a string of several lines). Fix the syntax there and try again\n`,
    'CRLF, a literal string, printed once',
  );
  // A table written twice, as when a setting is appended to a config whose
  // [mcp] table init already wrote; a key set twice.
  const twice = h.file('twice.toml', '[mcp]\n# max_result = "1MiB"\n[mcp]\nmax_result = "2MiB"\n');
  r = cli(h, ['--config', twice, 'cred', 'list']);
  t.equal(
    r.stderr,
    `postern: ${twice}: not valid TOML: [syntax] line 3, column 2: the table opened on line 3 is already defined above (each [table] may appear once); put these settings under the first one. Fix the syntax there and try again\n`,
  );
  const key = h.file('key.toml', 'name = "a"\nname = "b"\n');
  r = cli(h, ['cred', 'add', '--file', key, '--secret-file', h.passFile, '--passphrase-file', h.passFile]);
  t.match(
    r.stderr,
    /not valid TOML at line 2, column 1: the key on line 2 is already set above \(each key may be set once\); keep one of them/,
  );
  const eof = h.file('eof.toml', 'name = """github\n');
  r = cli(h, ['cred', 'add', '--file', eof, '--secret-file', h.passFile, '--passphrase-file', h.passFile]);
  t.match(r.stderr, /the string that begins at line 1, column 8 is never closed; end it with the quote it began with/);
});

t.test(
  'an unknown config table: its guess, and every table postern has (as executor.example.toml documents them)',
  async (t) => {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    const r = cli(h, ['--config', h.file('c.toml', '[htp]\ntimeout = "5s"\n'), 'cred', 'list']);
    t.equal(r.code, 1);
    const line =
      /\[unknown table\] htp: postern has no \[htp\] table \(did you mean "http"\?\); the tables are ([^.]*)\./.exec(
        r.stderr,
      );
    t.ok(line, r.stderr);
    const example = readFileSync(join(ROOT, 'executor.example.toml'), 'utf8');
    const documented = [...example.matchAll(/^\[([a-z]+)\]/gm)].map((m) => `[${m[1]}]`);
    t.same(line?.[1]?.split(', ').sort(), documented.sort(), 'the tables named are the documented ones');
  },
);
