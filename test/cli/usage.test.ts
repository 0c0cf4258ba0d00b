// Usage errors exit 2 (SPEC §5), with what went wrong on stderr: a command
// group without its sub-command (its usage), an unknown command or option,
// a missing argument. Help that was asked for exits 0 on stdout.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, cleanEnv, cliAsync, Result } from '../helpers/postern';

// No home: none of these may get as far as reading a config.
const env = cleanEnv({ POSTERN_HOME: '/nonexistent/postern-usage-home' });

// A few CLI processes at a time.
async function runAll(cases: string[][]): Promise<Result[]> {
  const results: Result[] = new Array(cases.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const i = next++;
      results[i] = await cliAsync({ env }, cases[i]!);
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  return results;
}

const usageLine = (group: string): string => `Usage: postern${group ? ` ${group}` : ''} [options] [command]\n`;

t.test('a command group without its sub-command: usage on stderr, exit 2', async (t) => {
  const groups = ['', 'cred', 'config', 'audit', 'request'];
  const results = await runAll(groups.map((g) => (g ? [g] : [])));
  groups.forEach((g, i) => {
    const r = results[i]!;
    const name = `postern${g ? ` ${g}` : ''}`;
    t.equal(r.code, 2, `${name}: exit 2`);
    t.equal(r.stdout, '', `${name}: nothing on stdout`);
    t.ok(r.stderr.startsWith(usageLine(g)), `${name}: its usage on stderr`);
    t.match(r.stderr, /\nCommands:\n/, `${name}: listing its sub-commands`);
  });
});

t.test('an unknown command, option or argument, or a missing one: exit 2, named on stderr', async (t) => {
  const cases: [string[], string][] = [
    [['bogus'], "postern: unknown command 'bogus'; see `postern --help`\n"],
    [['cred', 'bogus'], "postern: unknown command 'bogus'; see `postern cred --help`\n"],
    [['config', 'bogus'], "postern: unknown command 'bogus'; see `postern config --help`\n"],
    [['audit', 'bogus'], "postern: unknown command 'bogus'; see `postern audit --help`\n"],
    [['request', 'bogus'], "postern: unknown command 'bogus'; see `postern request --help`\n"],
    [['--bogus'], "postern: unknown option '--bogus'; see `postern --help`\n"],
    [['status', '--bogus'], "postern: unknown option '--bogus'; see `postern status --help`\n"],
    [['cred', 'list', '--bogus'], "postern: unknown option '--bogus'; see `postern cred list --help`\n"],
    [['audit', 'verify', '--bogus'], "postern: unknown option '--bogus'; see `postern audit verify --help`\n"],
    [['--verbose'], "postern: unknown option '--verbose'; see `postern --help`\n"],
    [
      ['sessions', 'bogus'],
      "postern: too many arguments for 'sessions'. Expected 0 arguments but got 1; see `postern sessions --help`\n",
    ],
    [
      ['sessions', 'revoke'],
      'postern: say which session to end: `postern sessions revoke ID` (see `postern sessions`), or --all\n',
    ],
    [['cred', 'show'], "postern: missing required argument 'name'; see `postern cred show --help`\n"],
    [['cred', 'add'], "postern: required option '--file <def.toml>' not specified; see `postern cred add --help`\n"],
    // A near miss of a command or an option is named (SPEC §5).
    [['statsu'], "postern: unknown command 'statsu' (did you mean status?); see `postern --help`\n"],
    [['cred', 'lst'], "postern: unknown command 'lst' (did you mean list?); see `postern cred --help`\n"],
    [['status', '--jsn'], "postern: unknown option '--jsn' (did you mean --json?); see `postern status --help`\n"],
    [
      ['request', 'http', '--credential', 'x', '--url', 'https://a', '--metod', 'GET'],
      "postern: unknown option '--metod' (did you mean --method?); see `postern request http --help`\n",
    ],
  ];
  const results = await runAll(cases.map(([args]) => args));
  cases.forEach(([args, stderr], i) => {
    const r = results[i]!;
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
    t.equal(r.stderr, stderr, `${args.join(' ')}: says what is wrong`);
    t.equal(r.stdout, '');
  });
  const [help] = await runAll([['help', 'bogus']]);
  t.equal(help!.code, 2, 'help for an unknown command: exit 2');
  t.ok(help!.stderr.startsWith(usageLine('')), 'with the usage on stderr');
});

t.test('--version: the version on stdout, exit 0', async (t) => {
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const [r] = await runAll([['--version']]);
  t.equal(r!.code, 0);
  t.equal(r!.stdout, `${version}\n`);
  t.equal(r!.stderr, '');
});

t.test('help asked for: usage on stdout, exit 0', async (t) => {
  const cases: [string[], string][] = [
    [['--help'], usageLine('')],
    [['-h'], usageLine('')],
    [['help'], usageLine('')],
    [['help', 'cred'], usageLine('cred')],
    [['cred', '--help'], usageLine('cred')],
    [['cred', 'help'], usageLine('cred')],
    [['config', '-h'], usageLine('config')],
    [['audit', '--help'], usageLine('audit')],
    [['request', '--help'], usageLine('request')],
    [['cred', 'add', '--help'], 'Usage: postern cred add [options]\n'],
    [['sessions', '--help'], 'Usage: postern sessions [options] [command]\n'],
  ];
  const results = await runAll(cases.map(([args]) => args));
  cases.forEach(([args, first], i) => {
    const r = results[i]!;
    t.equal(r.code, 0, `${args.join(' ')}: exit 0`);
    t.ok(r.stdout.startsWith(first), `${args.join(' ')}: usage on stdout`);
    t.equal(r.stderr, '', `${args.join(' ')}: nothing on stderr`);
  });
});

t.test("every command's --help ends with examples (SPEC §5)", async (t) => {
  // The command tree as the program knows it: every path, from the fish
  // completion (one "complete ... -a WORD" per sub-command).
  const [fish] = await runAll([['completion', 'fish']]);
  const paths = [''];
  const tree = new Map<string, string[]>();
  for (const line of fish!.stdout.split('\n')) {
    const m = /^complete -c postern -n '([^']*)' -a ([a-z-]+) /.exec(line);
    if (!m) continue;
    const seen = [...m[1]!.matchAll(/(?<!not )__fish_seen_subcommand_from ([a-z-]+)/g)].map((x) => x[1]!);
    const path = [...seen, m[2]!].join(' ');
    paths.push(path);
    tree.set(seen.join(' '), [...(tree.get(seen.join(' ')) ?? []), m[2]!]);
  }
  t.ok(paths.length > 25, `the tree has its commands (${paths.length})`);
  for (const must of ['cred add', 'audit verify', 'request http', 'sessions revoke', 'completion'])
    t.ok(paths.includes(must), `${must} is in the tree`);
  const results = await runAll(paths.map((p) => [...(p ? p.split(' ') : []), '--help']));
  paths.forEach((p, i) => {
    const r = results[i]!;
    t.equal(r.code, 0, `postern ${p} --help: exit 0`);
    t.match(
      r.stdout,
      /\nExamples:\n(  \$ postern .*\n|  \$ \S.*postern.*\n)+$/,
      `postern ${p} --help ends with examples`,
    );
    t.equal((r.stdout.match(/^Examples:$/gm) ?? []).length, 1, `postern ${p} --help: one block of examples`);
  });
});
