// Step 1 of POST /v1/ssh (SPEC §6.6): the agent's JSON, checked field by
// field into a typed request.
import { z } from 'zod';
import type { Problem } from '../../shared/errors';
import { hasInvisible } from '../../shared/credential/text';
import {
  Check,
  RequestLimits,
  badRequest,
  bad,
  cachedBy,
  checkBody,
  checkBodyBase64,
  checkCredential,
  checkReason,
  checkTimeout,
  decodeBody,
  field,
  isObject,
  issueProblems,
  ok,
} from './validate-fields';

//
// - `command`: UTF-8 text, 1 to 4096 characters, no control or invisible
//   characters (bad_request); whether it is allowed is the policy's call.
// - `stdin`: UTF-8 text, or `stdin_base64` for bytes, not both; an empty
//   stdin is the same as none (so a request may carry `"stdin": ""` for a
//   credential that allows no stdin). At most max_request_body bytes.
// - `timeout_ms`: as for HTTP, at most http.max_timeout.

export interface SshRequest {
  credential: string;
  command: string;
  stdin: Buffer | null; // null: none (or empty)
  timeoutMs: number | null;
  reason: string | null;
}

export const SSH_REQUEST_FIELDS = ['credential', 'command', 'stdin', 'stdin_base64', 'timeout_ms', 'reason'] as const;
export const MAX_COMMAND_LENGTH = 4096;

function checkCommand(v: unknown): Check<string> {
  if (v === undefined) return bad('is required; give the command line to run, e.g. "git -C /srv/app pull"');
  if (typeof v !== 'string') return bad('must be a string, e.g. "git -C /srv/app pull"');
  if (v.length === 0 || v.length > MAX_COMMAND_LENGTH) return bad(`must be 1 to ${MAX_COMMAND_LENGTH} characters`);
  if (!v.isWellFormed() || hasInvisible(v))
    return bad(
      'contains a control or invisible character (newline, tab, NUL, bidi, zero-width); send one command line of visible characters',
    );
  return ok(v);
}

const sshSchemaFor = cachedBy(buildSshSchema);

function buildSshSchema(limits: RequestLimits) {
  return z.strictObject({
    credential: field(checkCredential),
    command: field(checkCommand),
    stdin: field(checkBody).optional(),
    stdin_base64: field(checkBodyBase64).optional(),
    timeout_ms: field(checkTimeout(limits.maxTimeout)).optional(),
    reason: field(checkReason).optional(),
  });
}

export function validateSshRequest(json: unknown, limits: RequestLimits): SshRequest {
  if (!isObject(json))
    throw badRequest([{ path: '', message: 'the request must be a JSON object with fields credential, command, ...' }]);
  const parsed = sshSchemaFor(limits).safeParse(json);
  const problems: Problem[] = parsed.success
    ? []
    : parsed.error.issues.flatMap((i) => issueProblems(i, SSH_REQUEST_FIELDS));
  if (json['stdin'] !== undefined && json['stdin_base64'] !== undefined) {
    problems.push({
      path: 'stdin, stdin_base64',
      message: 'both are given; send one: "stdin" for UTF-8 text or "stdin_base64" for bytes',
    });
  }
  if (problems.length > 0 || !parsed.success) throw badRequest(problems);
  const v = parsed.data;
  const stdin = decodeBody(v.stdin ?? null, v.stdin_base64 ?? null, limits.maxRequestBody, ['stdin', 'stdin_base64']);
  return {
    credential: v.credential,
    command: v.command,
    stdin: stdin && stdin.length > 0 ? stdin : null,
    timeoutMs: v.timeout_ms ?? null,
    reason: v.reason ?? null,
  };
}
