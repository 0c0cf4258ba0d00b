// `postern request http|ssh`: a client for the agent socket, for people and
// scripts. It holds no secret and needs no passphrase: it is an agent.
import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { Context } from '../context';
import { DaemonRefusal, UsageError } from '../errors';
import { agentCall, agentSocketPath } from '../agent-client';
import { inReaderWords } from '../../shared/reader-words';

type Ctx = () => Context;

function timeoutOption(text: string | undefined): Record<string, number> {
  if (text === undefined) return {};
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError('--timeout-ms must be a positive whole number');
  return { timeout_ms: n };
}

// Sends the request; a refusal becomes the CLI's refusal (exit 1), its
// detail (audit_seq, maybe_executed...) kept for --json.
async function call(c: Context, path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await agentCall(agentSocketPath(c.env, () => c.config().paths.agentSocket), 'POST', path, body);
  if (r.status !== 200) {
    const err = (r.json['error'] ?? {}) as Record<string, unknown>;
    const { code, message, ...detail } = err;
    const said = inReaderWords(String(message), 'cli');
    throw new DaemonRefusal(String(code), `${String(code)}: ${said}`, { ...detail, message: said });
  }
  return r.json;
}

// A file named by an option, read whole; a path that cannot be read is the
// caller's mistake, said in one line naming the option and the file.
const UNREADABLE: Record<string, string> = {
  ENOENT: 'no such file; check the path',
  ENOTDIR: 'a part of the path is not a directory; check the path',
  EISDIR: 'is a directory; name a file',
  EACCES: 'permission denied; check the file\'s permissions',
  EPERM: 'permission denied; check the file\'s permissions',
  ELOOP: 'too many symbolic links; check the path',
  ENAMETOOLONG: 'the path is too long; check it',
};

function readOptionFile(option: string, file: string, dashIsStdin: boolean): Buffer {
  const stdin = dashIsStdin && file === '-';
  try {
    return readFileSync(stdin ? 0 : file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const shown = stdin ? '- (stdin)' : JSON.stringify(file);
    throw new UsageError(`${option} ${shown}: ${(code && UNREADABLE[code]) ?? `cannot be read (${code ?? String(e)}); check it`}`);
  }
}

function headerList(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function register(program: Command, ctx: Ctx): void {
  const request = program.command('request').description('send a request through the agent socket, as an agent would');
  request
    .command('http')
    .description('perform an HTTP request with a credential (POST /v1/http)')
    .requiredOption('--credential <name>', 'the credential to use')
    .requiredOption('--url <url>', 'the URL')
    .option('-X, --method <method>', 'the HTTP method', 'GET')
    .option('-H, --header <name: value>', 'a header (repeatable)', headerList, [])
    .option('--data <text>', 'the request body (UTF-8)')
    .option('--data-file <file>', 'read the body from a file (sent as base64)')
    .option('--timeout-ms <ms>', 'time limit after approval')
    .option('--idempotency-key <key>', 'idempotency key')
    .action(async (o: { credential: string; url: string; method: string; header: string[]; data?: string; dataFile?: string; timeoutMs?: string; idempotencyKey?: string }) => {
      const c = ctx();
      const headers: Record<string, string> = {};
      for (const h of o.header) {
        const i = h.indexOf(':');
        if (i <= 0) throw new UsageError(`-H "${h}": write "name: value"`);
        headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
      }
      if (o.data !== undefined && o.dataFile) throw new UsageError('give --data or --data-file, not both');
      const body: Record<string, unknown> = { credential: o.credential, method: o.method, url: o.url, headers };
      if (o.data !== undefined) body['body'] = o.data;
      if (o.dataFile) body['body_base64'] = readOptionFile('--data-file', o.dataFile, false).toString('base64');
      Object.assign(body, timeoutOption(o.timeoutMs));
      if (o.idempotencyKey) body['idempotency_key'] = o.idempotencyKey;
      const j = await call(c, '/v1/http', body);
      const bodyText = j['body_encoding'] === 'base64' ? `(${Buffer.from(String(j['body']), 'base64').length} bytes of binary, base64 in --json)` : String(j['body']);
      const redirect = j['redirect'] as { location: string } | null;
      c.out(j, [
        `status ${String(j['status'])} from ${JSON.stringify(j['target'])} (audit #${String(j['audit_seq'])})${j['truncated'] ? ' [truncated]' : ''}${Number(j['redactions']) > 0 ? ` [${String(j['redactions'])} redactions]` : ''}`,
        ...(redirect ? [`redirect (not followed): ${redirect.location}`] : []),
        bodyText,
      ]);
    });
  request
    .command('ssh')
    .description('run a command over SSH with a credential (POST /v1/ssh)')
    .requiredOption('--credential <name>', 'the credential to use')
    .requiredOption('--command <command>', 'the command line, as the credential\'s rules allow it')
    .option('--stdin-file <file>', 'send this file as stdin (- for this process\'s stdin)')
    .option('--timeout-ms <ms>', 'time limit after approval')
    .action(async (o: { credential: string; command: string; stdinFile?: string; timeoutMs?: string }) => {
      const c = ctx();
      const body: Record<string, unknown> = { credential: o.credential, command: o.command, ...timeoutOption(o.timeoutMs) };
      if (o.stdinFile !== undefined) body['stdin_base64'] = readOptionFile('--stdin-file', o.stdinFile, true).toString('base64');
      const j = await call(c, '/v1/ssh', body);
      const show = (v: unknown): string => (j['encoding'] === 'base64' ? Buffer.from(String(v), 'base64').toString('utf8') : String(v));
      const ending = j['signal'] ? `signal ${String(j['signal'])}` : `exit ${String(j['exit_code'])}`;
      c.out(j, [
        `${ending} on ${JSON.stringify(j['target'])} (audit #${String(j['audit_seq'])})${j['truncated'] ? ' [truncated]' : ''}${Number(j['redactions']) > 0 ? ` [${String(j['redactions'])} redactions]` : ''}`,
        ...(String(j['stdout']) !== '' ? [show(j['stdout']).replace(/\n$/, '')] : []),
        ...(String(j['stderr']) !== '' ? [`stderr: ${show(j['stderr']).replace(/\n$/, '')}`] : []),
      ]);
      // The remote command's failure is the command's failure.
      if (j['exit_code'] !== 0) process.exitCode = 1;
    });
}
