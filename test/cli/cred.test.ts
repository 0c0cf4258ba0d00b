// Credentials through the real CLI and daemon: definitions validated with
// every problem listed, normalised definition shown before the passphrase,
// update shows the difference, bad input never loses what is stored.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, unlockedHome } from '../helpers/postern';

const HTTP_DEF = `name = "github"
description = "GitHub API"
kind = "http"

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "API.GitHub.com."
methods = ["get", "POST"]
paths = ["/repos/acme/app/*"]
`;

const ready = unlockedHome;

t.test('add shows the normalised definition first; list, show, update, rm', async (t) => {
  const h = await ready(t);
  const def = h.file('gh.toml', HTTP_DEF);
  const secret = h.file('s', 'ghp_abc\n');
  let r = cli(h, ['cred', 'add', '--file', def, '--secret-file', secret, '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /host = "api\.github\.com"/, 'host normalised (case, trailing dot)');
  t.match(r.stdout, /methods = \["GET", "POST"\]/, 'methods upper-cased');
  t.ok(
    r.stdout.indexOf('name = "github"') < r.stdout.indexOf('added credential'),
    'definition printed before the result',
  );

  r = cli(h, ['cred', 'list', '--json']);
  t.equal(r.code, 0);
  const list = JSON.parse(r.stdout).credentials;
  t.equal(list.length, 1);
  t.equal(list[0].name, 'github');
  t.equal(list[0].kind, 'http');
  t.notOk(JSON.stringify(list).includes('ghp_abc'));

  r = cli(h, ['cred', 'show', 'github']);
  t.equal(r.code, 0);
  t.match(r.stdout, /template = "Bearer \{secret\}"/);

  const upd = h.file('gh2.toml', HTTP_DEF.replace('"get", "POST"', '"GET"'));
  r = cli(h, ['cred', 'update', 'github', '--file', upd, '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /methods/, 'the difference is shown');
  t.match(r.stdout, /updated credential "github"/);
  t.notMatch(r.stdout, /and its secret/, 'secret kept');

  r = cli(h, ['cred', 'update', 'nope', '--file', upd, '--passphrase-file', h.passFile]);
  t.equal(r.code, 1);
  t.match(r.stderr, /no credential named "nope"/);

  r = cli(h, ['cred', 'show', 'nope']);
  t.equal(r.code, 1);
  t.match(r.stderr, /cred list/);

  r = cli(h, ['cred', 'add', '--file', def, '--secret-file', secret, '--passphrase-file', h.passFile]);
  t.equal(r.code, 1, 'a duplicate name is refused');
  t.match(r.stderr, /exists.*cred update/);

  r = cli(h, ['cred', 'rm', 'github', '--passphrase-file', h.passFile]);
  t.equal(r.code, 0);
  t.same(JSON.parse(cli(h, ['cred', 'list', '--json']).stdout).credentials, []);
});

const BAD: [string, string, RegExp][] = [
  [
    'two inject forms',
    HTTP_DEF.replace('template = "Bearer {secret}"', 'template = "Bearer {secret}"\nquery = "k"'),
    /inject/,
  ],
  ['no allow rule', HTTP_DEF.slice(0, HTTP_DEF.indexOf('[[allow]]')), /allow/],
  ['bad host pattern', HTTP_DEF.replace('API.GitHub.com.', 'a.*.com'), /allow\[0\]\.host/],
  ['{secret} twice', HTTP_DEF.replace('Bearer {secret}', '{secret}{secret}'), /inject\.template/],
  ['{secret} missing', HTTP_DEF.replace('Bearer {secret}', 'Bearer'), /inject\.template/],
  ['bad name', HTTP_DEF.replace('name = "github"', 'name = "GitHub!"'), /name/],
  ['unknown key', HTTP_DEF.replace('kind = "http"', 'kind = "http"\ncolour = "blue"'), /colour/],
  ['unknown key in a rule', HTTP_DEF + 'verbs = ["GET"]\n', /allow\[0\]\.verbs/],
  [
    'ssh command rule outside the grammar',
    'name = "box"\nkind = "ssh"\nhost = "b.example.com"\nuser = "u"\nauth = "password"\nhost_key = "SHA256:' +
      'A'.repeat(43) +
      '"\ncommands = ["echo *; id"]\n',
    /commands\[0\]/,
  ],
  ['not TOML at all', 'name = "x\n', /./],
];

t.test('bad definitions: exit 1, every problem by path, nothing stored changes', async (t) => {
  const h = await ready(t);
  t.equal(
    cli(h, [
      'cred',
      'add',
      '--file',
      h.file('gh.toml', HTTP_DEF),
      '--secret-file',
      h.file('s', 'tok'),
      '--passphrase-file',
      h.passFile,
    ]).code,
    0,
  );
  const before = readFileSync(join(h.home, 'vault'));
  for (const [what, text, path] of BAD) {
    const r = cli(h, [
      'cred',
      'add',
      '--file',
      h.file('bad.toml', text),
      '--secret-file',
      h.file('s2', 'tok'),
      '--passphrase-file',
      h.passFile,
    ]);
    t.equal(r.code, 1, what);
    t.match(r.stderr, path, `${what}: names the field`);
    t.notMatch(r.stderr, /\n\s+at [^\n]+\(/, `${what}: no stack trace`);
  }
  const many = HTTP_DEF.replace('name = "github"', 'name = "-x"')
    .replace('Bearer {secret}', 'Bearer')
    .replace('API.GitHub.com.', '*');
  const r = cli(h, ['cred', 'add', '--file', h.file('many.toml', many), '--passphrase-file', h.passFile]);
  t.equal(r.code, 1);
  const j = cli(h, ['cred', 'add', '--file', h.file('many.toml', many), '--passphrase-file', h.passFile, '--json']);
  t.equal(JSON.parse(j.stdout).error.code, 'invalid_definition');
  const problems = (JSON.parse(j.stdout) as { error: { problems: { path: string; message: string }[] } }).error
    .problems;
  t.ok(problems.length >= 3, 'several problems found at once');
  t.equal(r.stderr.split('\n').filter(Boolean).length, 1, 'said in one line');
  for (const p of problems)
    t.ok(r.stderr.includes(`${p.path}: ${p.message}`), `the line names ${p.path} and its problem`);

  for (const [what, bytes] of [
    ['a control character', 'tok\u0001en'],
    ['NUL', 'tok\u0000en'],
    ['empty', '\n'],
  ] as const) {
    const r2 = cli(h, [
      'cred',
      'add',
      '--file',
      h.file('ok.toml', HTTP_DEF.replace('"github"', '"other"')),
      '--secret-file',
      h.file('bad-secret', bytes),
      '--passphrase-file',
      h.passFile,
    ]);
    t.equal(r2.code, 1, `secret with ${what} refused`);
    t.match(r2.stderr, /secret/);
  }
  t.same(readFileSync(join(h.home, 'vault')), before, 'the vault was not rewritten by any refused add');
  t.equal(
    JSON.parse(cli(h, ['cred', 'list', '--json']).stdout).credentials.length,
    1,
    'the stored credential is still there',
  );
});

t.test('passwd: the old passphrase stops working, the new one works', async (t) => {
  const h = await ready(t);
  const next = h.file('next', 'a brand new passphrase\n');
  let r = cli(h, ['passwd', '--passphrase-file', h.passFile, '--new-passphrase-file', h.file('short', 'short\n')]);
  t.equal(r.code, 1, 'a short new passphrase is refused');
  r = cli(h, ['passwd', '--passphrase-file', h.passFile, '--new-passphrase-file', next]);
  t.equal(r.code, 0, r.stderr);
  t.equal(cli(h, ['lock']).code, 0);
  r = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(r.code, 1, 'old passphrase refused');
  r = cli(h, ['unlock', '--passphrase-file', next]);
  t.equal(r.code, 0, 'new passphrase accepted');
});

t.test('locked: cred commands say to unlock; usage errors exit 2', async (t) => {
  const h = await ready(t);
  t.equal(cli(h, ['lock']).code, 0);
  const r = cli(h, ['cred', 'list']);
  t.equal(r.code, 1);
  t.match(r.stderr, /locked.*postern unlock/);
  t.equal(cli(h, ['cred', 'add']).code, 2, 'missing --file');
  t.equal(cli(h, ['cred', 'frobnicate']).code, 2, 'unknown subcommand');
  t.equal(cli(h, ['--no-such-flag']).code, 2, 'unknown option');
  const both = cli(h, [
    'cred',
    'add',
    '--file',
    h.file('gh.toml', HTTP_DEF),
    '--secret-file',
    '-',
    '--passphrase-file',
    '-',
  ]);
  t.equal(both.code, 1, 'locked is reported before the stdin clash is reached');
});
