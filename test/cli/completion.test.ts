// `postern completion bash|zsh|fish` (SPEC §5): each script is loaded into
// the real shell and asked to complete, as a person pressing Tab would.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanEnv, cliAsync } from '../helpers/postern';

const env = cleanEnv({ POSTERN_HOME: '/nonexistent/postern-completion-home' });
const dir = mkdtempSync(join(tmpdir(), 'postern-completion-'));
writeFileSync(join(dir, 'github.toml'), '');

async function script(shell: string): Promise<string> {
  const r = await cliAsync({ env }, ['completion', shell]);
  if (r.code !== 0) throw new Error(`completion ${shell}: exit ${r.code}: ${r.stderr}`);
  const file = join(dir, `postern.${shell}`);
  writeFileSync(file, r.stdout);
  return file;
}

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`${cmd} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

// [words typed, what must be offered, what must not]
const CASES: [string[], string[], string[]][] = [
  [['postern', 'cr'], ['cred'], ['config']],
  [['postern', 'cred', ''], ['add', 'update', 'list', 'show', 'rm'], ['verify']],
  [['postern', 'cred', 'add', '--f'], ['--file'], ['--fail']],
  [['postern', '--config', 'x.toml', 'audit', 's'], ['show'], ['status']],
  [['postern', 'audit', 'verify', '--'], ['--pubkey', '--expect-head', '--allow-unsigned-tail'], ['--file']],
  [['postern', 'request', 'http', '--cred'], ['--credential'], []],
  [['postern', 'cred', 'add', '--file', 'gith'], ['github.toml'], []],
];

t.test('bash: the script completes commands, options and files', async (t) => {
  const file = await script('bash');
  for (const [words, want, not] of CASES) {
    const probe = `source ${JSON.stringify(file)}; COMP_WORDS=(${words.map((w) => JSON.stringify(w)).join(' ')}); COMP_CWORD=${words.length - 1}; _postern; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const got = run('bash', ['-c', probe]).split('\n').filter(Boolean);
    for (const w of want) t.ok(got.includes(w), `bash ${words.join(' ')}⇥ offers ${w} (got ${got.join(' ')})`);
    for (const w of not) t.notOk(got.includes(w), `bash ${words.join(' ')}⇥ does not offer ${w}`);
  }
});

t.test('fish: the script completes commands, options and files', async (t) => {
  const file = await script('fish');
  for (const [words, want, not] of CASES) {
    const line = words.join(' ');
    const got = run('fish', [
      '--no-config',
      '-c',
      `source ${JSON.stringify(file)}; complete -C ${JSON.stringify(line)}`,
    ])
      .split('\n')
      .map((l) => l.split('\t')[0]!)
      .filter(Boolean);
    for (const w of want) t.ok(got.includes(w), `fish ${line}⇥ offers ${w} (got ${got.join(' ')})`);
    for (const w of not) t.notOk(got.includes(w), `fish ${line}⇥ does not offer ${w}`);
  }
});

t.test('zsh: the script parses, and its function offers the right words', async (t) => {
  const file = await script('zsh');
  run('zsh', ['-n', file]);
  // compsys itself needs a terminal; its entry points are stood in for by
  // functions that print what the script hands them (filtered by the word
  // typed, as _describe does).
  const stubs =
    'compdef() {}; _describe() { local -a all=("${(@)${(@P)4}%%:*}"); print -rl -- "${(@M)all:#${words[CURRENT]}*}" }; _files() { print -r -- FILES }';
  for (const [words, want, not] of CASES) {
    const probe = `${stubs}; source ${JSON.stringify(file)}; words=(${words.map((w) => `'${w}'`).join(' ')}); CURRENT=${words.length}; _postern`;
    const got = run('zsh', ['-f', '-c', probe]).split('\n').filter(Boolean);
    const offered = got.includes('FILES') ? [...got, 'github.toml'] : got;
    for (const w of want)
      t.ok(
        offered.some((g) => g === w),
        `zsh ${words.join(' ')}⇥ offers ${w} (got ${got.join(' ')})`,
      );
    for (const w of not) t.notOk(got.includes(w), `zsh ${words.join(' ')}⇥ does not offer ${w}`);
  }
});

t.test('an unknown shell is a usage error naming the choices', async (t) => {
  const r = await cliAsync({ env }, ['completion', 'tcsh']);
  t.equal(r.code, 2);
  t.equal(r.stdout, '');
  t.equal(r.stderr, 'postern: no completion for the shell "tcsh"; say bash, zsh or fish\n');
});
