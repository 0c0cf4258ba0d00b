// `postern request http|ssh`: a client for the agent socket, for people and
// scripts. It holds no secret and needs no passphrase: it is an agent.
// `request http` ends as curl does, `request ssh` as ssh does (SPEC §5):
// stdout carries only what the target sent, everything postern has to say
// goes to stderr.
import { Command } from 'commander';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { constants } from 'node:os';
import { Context } from '../context';
import { DaemonRefusal, UsageError } from '../errors';
import { agentCall, agentSocketPath } from '../agent-client';
import { escapeText } from '../approver/escape';
import { inReaderWords } from '../../shared/reader-words';
import { errnoWords } from '../../shared/errno-remedy';
import type { ApprovalNotice } from '../../shared/protocol';

type Ctx = () => Context;
type Reply = Record<string, unknown>;

// ssh's convention: 255 is the tool's own failure, any other code the
// remote command's.
const SSH_OWN_FAILURE = 255;

function timeoutOption(text: string | undefined): Record<string, number> {
  if (text === undefined) return {};
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError('--timeout-ms must be a positive whole number');
  return { timeout_ms: n };
}

// Judged by the daemon (SPEC §6.1: at most 200 characters).
function reasonOption(text: string | undefined): Record<string, string> {
  return text === undefined ? {} : { reason: text };
}

// While the request waits for a human, a person at a terminal is told so
// (on stderr: stdout is the target's); a script is not.
function sayWaiting(approval: ApprovalNotice): void {
  if (approval.approved) {
    process.stderr.write(`postern: request ${approval.id} approved; sending it\n`);
    return;
  }
  const at = new Date(approval.expiresAt);
  const shown = Number.isNaN(at.getTime())
    ? approval.expiresAt
    : `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
  const left = Math.max(0, Math.round((at.getTime() - Date.now()) / 1000));
  process.stderr.write(
    `postern: waiting for approval of request ${approval.id} at \`postern approver\`; it expires at ${shown}${Number.isNaN(left) ? '' : ` (in ${left} s)`}\n`,
  );
}

// Sends the request; a refusal becomes the CLI's refusal (exit 1), its
// detail (audit_seq, maybe_executed...) kept for --json.
async function call(c: Context, path: string, body: Reply): Promise<Reply> {
  const onWaiting = process.stderr.isTTY ? sayWaiting : undefined;
  const r = await agentCall(
    agentSocketPath(c.env, () => c.config().paths.agentSocket),
    'POST',
    path,
    body,
    { onWaiting },
  );
  if (r.status !== 200) {
    const err = (r.json['error'] ?? {}) as Reply;
    const { code, message, ...detail } = err;
    const said = inReaderWords(String(message), 'cli');
    throw new DaemonRefusal(String(code), `${String(code)}: ${said}`, { ...detail, message: said });
  }
  return r.json;
}

// A file named by an option, and why it cannot be used: a path that does
// not work is the caller's mistake, said in one line naming the option and
// the file.
function fileProblem(option: string, shown: string, e: unknown, use: 'fileRead' | 'fileWritten'): string {
  const code = (e as NodeJS.ErrnoException).code;
  return `${option} ${shown}: ${errnoWords(code, use) ?? `cannot be used (${code ?? String(e)}); check it`}`;
}

function readOptionFile(option: string, file: string, dashIsStdin: boolean): Buffer {
  const stdin = dashIsStdin && file === '-';
  try {
    return readFileSync(stdin ? 0 : file);
  } catch (e) {
    throw new UsageError(fileProblem(option, stdin ? '- (stdin)' : JSON.stringify(file), e, 'fileRead'));
  }
}

// Where the body goes: stdout, or `-o FILE`, opened before the request is
// sent so that a path that cannot be written refuses nothing was done for.
interface Output {
  write(bytes: Buffer): void;
}

const STDOUT: Output = { write: (bytes) => void process.stdout.write(bytes) };

function openOutput(file: string): Output {
  if (file === '-') return STDOUT;
  let fd: number;
  try {
    fd = openSync(file, 'w', 0o666);
  } catch (e) {
    throw new UsageError(fileProblem('-o', JSON.stringify(file), e, 'fileWritten'));
  }
  return {
    write(bytes) {
      try {
        for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
        closeSync(fd);
      } catch (e) {
        // The request was performed: its answer is lost, not its effect.
        process.exitCode = 1;
        process.stderr.write(
          `postern: ${fileProblem('-o', JSON.stringify(file), e, 'fileWritten')}; the request was performed, its body not kept\n`,
        );
      }
    },
  };
}

function headerList(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function decoded(value: unknown, encoding: unknown): Buffer {
  return Buffer.from(String(value ?? ''), encoding === 'base64' ? 'base64' : 'utf8');
}

// Flags that say the output is not exactly what the target sent.
function marks(j: Reply): string {
  return `${j['truncated'] ? ' [truncated]' : ''}${Number(j['redactions']) > 0 ? ` [${String(j['redactions'])} redactions]` : ''}`;
}

function where(j: Reply): string {
  const t = (j['target'] ?? {}) as { host?: string; address?: string; port?: number };
  const address = String(t.address ?? '').includes(':') ? `[${String(t.address)}]` : String(t.address);
  return `${String(t.host)} (${address}:${String(t.port)})`;
}

// The remote command's status as ssh gives it: its exit code, or 128 + the
// signal's number.
function sshStatus(j: Reply): number {
  if (typeof j['exit_code'] === 'number') return j['exit_code'];
  const name = String(j['signal'] ?? '');
  const n = (constants.signals as Record<string, number | undefined>)[name.startsWith('SIG') ? name : `SIG${name}`];
  return n === undefined ? SSH_OWN_FAILURE : 128 + n;
}

interface HttpOptions {
  credential: string;
  url: string;
  method: string;
  header: string[];
  data?: string;
  dataFile?: string;
  timeoutMs?: string;
  idempotencyKey?: string;
  reason?: string;
  output?: string;
  fail?: boolean;
  silent?: boolean;
}

async function requestHttp(c: Context, o: HttpOptions): Promise<void> {
  const headers: Record<string, string> = {};
  for (const h of o.header) {
    const i = h.indexOf(':');
    if (i <= 0) throw new UsageError(`-H "${h}": write "name: value"`);
    headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
  }
  if (o.data !== undefined && o.dataFile) throw new UsageError('give --data or --data-file, not both');
  const body: Reply = { credential: o.credential, method: o.method, url: o.url, headers };
  if (o.data !== undefined) body['body'] = o.data;
  if (o.dataFile) body['body_base64'] = readOptionFile('--data-file', o.dataFile, false).toString('base64');
  Object.assign(body, timeoutOption(o.timeoutMs), reasonOption(o.reason));
  if (o.idempotencyKey) body['idempotency_key'] = o.idempotencyKey;
  const output = o.output !== undefined ? openOutput(o.output) : null;
  const j = await call(c, '/v1/http', body);
  const status = Number(j['status']);
  const failed = Boolean(o.fail) && status >= 400;
  // Decided before anything is written: a reader that closes the pipe
  // early leaves this exit code.
  if (failed) process.exitCode = 1;
  if (c.json) {
    process.stdout.write(JSON.stringify(j, null, 2) + '\n');
    if (output && !failed) output.write(decoded(j['body'], j['body_encoding']));
    return;
  }
  const redirect = j['redirect'] as { location: string } | null;
  if (!o.silent) {
    process.stderr.write(
      `postern: status ${status} from ${where(j)}, audit #${String(j['audit_seq'])}${j['replayed'] ? ' [replayed]' : ''}${marks(j)}\n`,
    );
    // The upstream's words: escaped for the terminal.
    if (redirect) process.stderr.write(`postern: redirect not followed: ${escapeText(redirect.location)}\n`);
  }
  // As curl --fail: an error status writes no body.
  if (failed) {
    process.stderr.write(
      `postern: the upstream answered ${status}; with --fail its body is not written (see it with --json)\n`,
    );
    return;
  }
  (output ?? STDOUT).write(decoded(j['body'], j['body_encoding']));
}

async function requestSsh(
  c: Context,
  o: { credential: string; command: string; stdinFile?: string; timeoutMs?: string; reason?: string },
): Promise<void> {
  const body: Reply = {
    credential: o.credential,
    command: o.command,
    ...timeoutOption(o.timeoutMs),
    ...reasonOption(o.reason),
  };
  if (o.stdinFile !== undefined)
    body['stdin_base64'] = readOptionFile('--stdin-file', o.stdinFile, true).toString('base64');
  let j: Reply;
  try {
    j = await call(c, '/v1/ssh', body);
  } catch (e) {
    // Refused, or the daemon not reachable: postern's failure, not the
    // remote command's.
    throw Object.assign(e as Error, { exitCode: SSH_OWN_FAILURE });
  }
  const status = sshStatus(j);
  process.exitCode = status;
  if (c.json) {
    process.stdout.write(JSON.stringify(j, null, 2) + '\n');
    return;
  }
  process.stdout.write(decoded(j['stdout'], j['encoding']));
  process.stderr.write(decoded(j['stderr'], j['encoding']));
  if (marks(j) !== '')
    process.stderr.write(
      `postern: the remote output above is not exactly the command's:${marks(j)}, audit #${String(j['audit_seq'])}\n`,
    );
  if (status === SSH_OWN_FAILURE && j['exit_code'] === null)
    process.stderr.write(
      `postern: the remote command ended with signal ${String(j['signal'])}, which has no number here\n`,
    );
}

export function register(program: Command, ctx: Ctx): void {
  const request = program.command('request').description('send a request through the agent socket, as an agent would');
  request
    .command('http')
    .description(
      'perform an HTTP request with a credential (POST /v1/http); the body goes to stdout, as curl writes it',
    )
    .requiredOption('--credential <name>', 'the credential to use')
    .requiredOption('--url <url>', 'the URL')
    .option('-X, --method <method>', 'the HTTP method', 'GET')
    .option('-H, --header <name: value>', 'a header (repeatable)', headerList, [])
    .option('--data <text>', 'the request body (UTF-8)')
    .option('--data-file <file>', 'read the body from a file (sent as base64)')
    .option('-o, --output <file>', 'write the response body to this file instead of stdout')
    .option('--fail', 'exit 1, writing no body, when the upstream answers 400 or more')
    .option('-s, --silent', 'no status line on stderr (refusals are still said)')
    .option('--reason <text>', 'why the request is made, shown to the approver')
    .option('--timeout-ms <ms>', 'time limit after approval')
    .option('--idempotency-key <key>', 'idempotency key')
    .addHelpText(
      'after',
      `
The response body alone goes to stdout (or -o FILE), byte for byte; the
status line and refusals go to stderr. Exit 0 when postern performed the
request, whatever the upstream status (1 with --fail for 400 or more);
1 refused, 2 usage error, 3 the daemon is not reachable.`,
    )
    .action((o: HttpOptions) => requestHttp(ctx(), o));
  request
    .command('ssh')
    .description('run a command over SSH with a credential (POST /v1/ssh); ends as ssh does')
    .requiredOption('--credential <name>', 'the credential to use')
    .requiredOption('--command <command>', "the command line, as the credential's rules allow it")
    .option('--stdin-file <file>', "send this file as stdin (- for this process's stdin)")
    .option('--reason <text>', 'why the command is run, shown to the approver')
    .option('--timeout-ms <ms>', 'time limit after approval')
    .addHelpText(
      'after',
      `
The remote stdout and stderr go to stdout and stderr, byte for byte. The
exit code is the remote command's (128 + n when signal n ended it), or 255
when postern refused or failed (the code and message on stderr); 2 for a
usage error.`,
    )
    .action((o: { credential: string; command: string; stdinFile?: string; timeoutMs?: string; reason?: string }) =>
      requestSsh(ctx(), o),
    );
}
