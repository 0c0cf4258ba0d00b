#!/usr/bin/env node
// The `postern` command line. Exit codes (SPEC §5): 0 success; 1 refused or
// failed; 2 usage error; 3 the daemon is not reachable. Errors are one line
// on stderr; never a stack trace.
import './inspector-signal';
import './closed-pipe';
import { Command, CommanderError } from 'commander';
import { Context, GlobalOptions } from './context';
import { EXIT, DaemonRefusal, Unreachable, UsageError, codeOf, describeError, exitCodeFor, problemsOf } from './errors';
import * as init from './commands/init';
import * as lifecycle from './commands/lifecycle';
import * as cred from './commands/cred';
import * as config from './commands/config';
import * as doctor from './commands/doctor';
import * as audit from './commands/audit';
import * as request from './commands/request';
import * as auditShow from './commands/audit-show';
import * as auditRotate from './commands/audit-rotate';
import * as approver from './commands/approver';
import * as sessions from './commands/sessions';
import * as mcp from './commands/mcp';
import * as run from './commands/run';
import * as completion from './completion';
import { addExamples, commandPath } from './help-examples';
import { escapeInvisible } from '../shared/units';
import * as systemdUnit from './commands/systemd-unit';
import * as ca from './commands/ca';
import { packageVersion } from '../shared/version';

// commander's own errors ("error: unknown command 'lst'\n(Did you mean
// list?)") as one line in postern's voice, naming where help is.
function usageLine(text: string, command: string): string {
  const said = text
    .replace(/^error: /, '')
    .replace(/\s*\n\s*\(Did you mean (.*)\?\)\s*/, ' (did you mean $1?)')
    .replace(/\s*\n\s*/g, ' ')
    .trim()
    .replace(/\.$/, '');
  return `postern: ${said}; see \`postern ${command ? `${command} ` : ''}--help\`\n`;
}

function buildProgram(): { program: Command; ctx: () => Context } {
  const program = new Command('postern');
  program
    .description('holds API and SSH credentials for AI agents and performs requests with them')
    .option('--config <file>', 'config file (default: $POSTERN_CONFIG, else <home>/config.toml)')
    .option('--json', 'print data as JSON')
    .version(packageVersion(), '--version', 'print the version')
    .enablePositionalOptions(false)
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), outputError: (s, write) => write(usageLine(s, '')) })
    .showHelpAfterError(false);
  const ctx = (): Context => new Context(program.opts<GlobalOptions>());
  for (const m of [
    init,
    lifecycle,
    cred,
    config,
    doctor,
    audit,
    request,
    approver,
    sessions,
    auditShow,
    auditRotate,
    mcp,
    run,
    systemdUnit,
    ca,
  ])
    m.register(program, ctx);
  // Sub-commands take the global options anywhere on the line.
  const propagate = (cmd: Command): void => {
    for (const sub of cmd.commands) {
      sub.exitOverride();
      sub.configureOutput({
        writeErr: (s) => process.stderr.write(s),
        outputError: (s, write) => write(usageLine(s, commandPath(sub))),
      });
      if (!sub.options.some((o) => o.long === '--json')) sub.option('--json', 'print data as JSON');
      if (!sub.options.some((o) => o.long === '--config')) sub.option('--config <file>', 'config file');
      refuseRepeats(sub);
      propagate(sub);
    }
  };
  completion.register(program);
  propagate(program);
  addExamples(program);
  program.hook('preAction', (_this, action) => {
    refuseEmptyPaths(program);
    refuseEmptyPaths(action);
    refuseEmptyArguments(action);
    const own = action.opts<GlobalOptions>();
    const global = program.opts<GlobalOptions>();
    if (own.json) global.json = true;
    if (own.config) global.config = own.config;
  });
  return { program, ctx };
}

// An option that takes one value, given twice: commander keeps the last,
// so `-X GET -X DELETE` sent a DELETE and `--credential a --credential b`
// used b without a word. Options meant to repeat (-H, run's --credential)
// collect into a list.
function refuseRepeats(cmd: Command): void {
  for (const o of cmd.options) {
    // Those meant to repeat say so in their help ("repeatable").
    if (!(o.required || o.optional) || /\brepeatable\b/.test(o.description)) continue;
    let seen = 0;
    cmd.on(`option:${o.name()}`, () => {
      seen += 1;
      if (seen > 1) throw new UsageError(`${o.long ?? o.short} was given more than once; give it once`);
    });
  }
}

// Options that name a file: an empty value is what an unset variable gives
// (`--secret-file "$SECRET_FILE"`), and read as "not given" it would keep
// an old secret or fall back to a prompt or another config without a word.
const PATH_OPTION = /^--(.+-file|file|config|log)$/;

function refuseEmptyPaths(action: Command): void {
  const values = action.opts<Record<string, unknown>>();
  for (const o of action.options) {
    if (!o.long || !PATH_OPTION.test(o.long)) continue;
    if (values[o.attributeName()] === '')
      throw new UsageError(`${o.long} is empty; name a file${o.long.endsWith('-file') ? ' (or - for stdin)' : ''}`);
  }
}

// A single argument that is empty (`cred show ""`, `cred rm "$NAME"` with
// NAME unset) names nothing: said here in the CLI's words, not sent on.
// A variadic one (run's command line) may hold empty strings.
function refuseEmptyArguments(action: Command): void {
  action.registeredArguments.forEach((a, i) => {
    if (!a.variadic && action.processedArgs[i] === '')
      throw new UsageError(`the ${a.name()} argument is empty; give a ${a.name()}`);
  });
}

function fail(e: unknown, json: boolean): never {
  const code = exitCodeFor(e);
  const message = describeError(e);
  const problems = problemsOf(e);
  if (json) {
    // A daemon's refusal keeps its own message and detail (audit_seq...).
    const detail =
      e instanceof DaemonRefusal
        ? e.detail
        : e instanceof Unreachable && e.maybeExecuted
          ? { maybe_executed: true }
          : {};
    process.stdout.write(
      JSON.stringify(
        { error: { code: codeOf(e), message, ...(problems.length ? { problems } : {}), ...detail } },
        null,
        2,
      ) + '\n',
    );
  }
  // A message that begins with "postern" (a hardening refusal: "postern
  // unlock refuses to run: ...") already names its subject.
  // One line, whatever it quotes (a name given on the command line, the
  // daemon's words): control and invisible characters are escaped, so a
  // value cannot rewrite the terminal's line.
  const line = escapeInvisible(message);
  process.stderr.write(line.startsWith('postern ') ? `${line}\n` : `postern: ${line}\n`);
  // For developers: the stack of an unexpected error, only when asked for.
  if (code === EXIT.refused && codeOf(e) === 'internal_error' && process.env['POSTERN_DEBUG'] === '1')
    process.stderr.write(`${(e as Error)?.stack ?? String(e)}\n`);
  // The problems list adds detail only when it says more than the message:
  // a problem whose place the message already names is not printed again.
  const extra = problems.filter(
    (p) =>
      (p.path !== '' || problems.length > 1) &&
      !(p.path !== '' && message.includes(`${p.path}: `)) &&
      p.message !== message,
  );
  for (const p of extra)
    process.stderr.write(`  ${escapeInvisible(p.path || '(top level)')}: ${escapeInvisible(p.message)}\n`);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  const { program } = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help asked for (--help, -h, `help`) ends with commander's exit code 0;
      // a missing or unknown sub-command prints the same usage to stderr with
      // a non-zero one, and is a usage error like any other.
      const asked =
        ['commander.helpDisplayed', 'commander.help', 'commander.version'].includes(e.code) && e.exitCode === 0;
      process.exit(asked ? EXIT.ok : EXIT.usage);
    }
    fail(e, Boolean(program.opts<GlobalOptions>().json));
  }
}

void main(process.argv);
