// `ssh_agent` of an SSH credential (SPEC §4, §12): a boolean, only with a
// key; absent and false are the definition as it was before the field
// existed (same hash, printed without it); `cred add` and `cred update`
// state the widening before the passphrase is asked.
import t from 'tap';
import { definitionProblems } from '../helpers/definition-problems';
import { parseDefinitionToml, definitionToToml, definitionHash } from '../../shared/credential';
import { cli } from '../helpers/postern';
import { startStack } from '../helpers/stack';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ssh = (extra: string, auth = 'key') =>
  `name = "box"\nkind = "ssh"\nhost = "build.example.com"\nuser = "deploy"\nauth = "${auth}"\nhost_key = "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"\ncommands = ["ls"]\n${extra}\n`;

const problems = definitionProblems;

t.test('true is kept, printed and read back; false and absent are the old definition', async (t) => {
  const on = parseDefinitionToml(ssh('ssh_agent = true'));
  t.equal(on.kind === 'ssh' && on.ssh_agent, true);
  const toml = definitionToToml(on);
  t.match(toml, /^ssh_agent = true$/m);
  t.same(parseDefinitionToml(toml), on, 'the printed definition reads back equal');
  const none = parseDefinitionToml(ssh(''));
  const off = parseDefinitionToml(ssh('ssh_agent = false'));
  t.notOk('ssh_agent' in none);
  t.same(definitionHash(none), definitionHash(off), 'false is the definition without the field');
  t.notSame(definitionHash(none), definitionHash(on));
  t.notMatch(definitionToToml(off), /ssh_agent/);
});

t.test('refused values, each at its path', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['ssh_agent = "yes"', 'key', /ssh_agent/],
    ['ssh_agent = 1', 'key', /ssh_agent/],
    ['ssh_agent = [true]', 'key', /ssh_agent/],
    ['ssh_agent = true', 'password', /ssh_agent/],
  ];
  for (const [line, auth, path] of cases) {
    const p = problems(ssh(line, auth));
    t.equal(p.length, 1, `${line} with auth = ${auth}: one problem`);
    t.match(p[0]?.path, path, `${line}: at ssh_agent`);
  }
  t.match(problems(ssh('ssh_agent = true', 'password'))[0]?.message, /needs auth = "key"/);
  t.same(problems(ssh('ssh_agent = false', 'password')), [], 'false with a password is fine');
  const http = `name = "gh"\nkind = "http"\nssh_agent = true\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n\n[[allow]]\nhost = "api.github.com"\n`;
  t.match(problems(http)[0]?.path, /ssh_agent/, 'an HTTP credential has no ssh_agent');
});

t.test('the widening is stated by cred add and cred update, and not without it', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const dir = mkdtempSync(join(tmpdir(), 'pt-agentfield-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'k')]);
  const add = cli(s.h, [
    'cred',
    'add',
    '--file',
    s.h.file('box.toml', ssh('ssh_agent = true')),
    '--secret-file',
    join(dir, 'k'),
    '--passphrase-file',
    s.h.passFile,
  ]);
  t.equal(add.code, 0, add.stderr);
  t.match(add.stdout, /Note: ssh_agent = true: this key is also offered to ssh and git/);
  t.match(add.stdout, /`commands` and `stdin` do not apply/);
  t.match(add.stdout, /a login as "deploy" to the server whose host key is SHA256:\+DiY3/);
  t.match(add.stdout, /restrict,command=/);
  t.ok(add.stdout.indexOf('Note:') < add.stdout.indexOf('added credential'), 'before the credential is added');
  const update = cli(s.h, [
    'cred',
    'update',
    'box',
    '--file',
    s.h.file('box2.toml', ssh('')),
    '--passphrase-file',
    s.h.passFile,
  ]);
  t.equal(update.code, 0, update.stderr);
  t.notMatch(update.stdout, /Note:/, 'no note once ssh_agent is gone');
  t.match(update.stdout, /- ssh_agent = true/, 'the change is shown');
  const again = cli(s.h, [
    'cred',
    'update',
    'box',
    '--file',
    s.h.file('box3.toml', ssh('ssh_agent = true')),
    '--passphrase-file',
    s.h.passFile,
  ]);
  t.equal(again.code, 0, again.stderr);
  t.match(again.stdout, /Note: ssh_agent = true/);
  t.match(again.stdout, /\+ ssh_agent = true/);
});
