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
    [['bogus'], "error: unknown command 'bogus'\n"],
    [['cred', 'bogus'], "error: unknown command 'bogus'\n"],
    [['config', 'bogus'], "error: unknown command 'bogus'\n"],
    [['audit', 'bogus'], "error: unknown command 'bogus'\n"],
    [['request', 'bogus'], "error: unknown command 'bogus'\n"],
    [['--bogus'], "error: unknown option '--bogus'\n"],
    [['status', '--bogus'], "error: unknown option '--bogus'\n"],
    [['cred', 'list', '--bogus'], "error: unknown option '--bogus'\n"],
    [['audit', 'verify', '--bogus'], "error: unknown option '--bogus'\n"],
    [['--verbose'], "error: unknown option '--verbose'\n"],
    [['sessions', 'bogus'], "error: too many arguments for 'sessions'. Expected 0 arguments but got 1.\n"],
    [['sessions', 'revoke'], 'postern: say which session to end: `postern sessions revoke ID` (see `postern sessions`), or --all\n'],
    [['cred', 'show'], "error: missing required argument 'name'\n"],
    [['cred', 'add'], "error: required option '--file <def.toml>' not specified\n"],
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
