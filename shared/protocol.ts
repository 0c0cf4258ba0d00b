// The one list of refusal codes, with the HTTP status the agent socket
// answers each with (SPEC §6.3). The daemon, the CLI, the MCP bridge and the
// tests all import it from here; a new code is added here first.
export const REFUSALS = {
  bad_request: 400,
  unknown_credential: 404,
  denied_policy: 403,
  denied_address: 403,
  denied_by_user: 403,
  approval_timeout: 403,
  no_approver: 403,
  unidentified_peer: 403,
  denied_peer: 403,
  idempotency_conflict: 409,
  in_progress: 409,
  body_too_large: 413,
  vault_locked: 423,
  config_not_approved: 423,
  rollback_detected: 423,
  rate_limited: 429,
  busy: 429,
  dns_error: 502,
  upstream_error: 502,
  host_key_mismatch: 502,
  upstream_timeout: 504,
  // The journal cannot record the action (disk full, file replaced): fail
  // closed (SPEC §9) rather than act unrecorded.
  audit_unavailable: 503,
  // Admin protocol only (CLI and approver), never sent to agents.
  wrong_passphrase: 401,
  not_found: 404,
  conflict: 409,
  invalid_definition: 400,
  bad_config: 400,
  bad_environment: 400,
  vault_corrupt: 500,
  internal_error: 500,
} as const;

export type RefusalCode = keyof typeof REFUSALS;

// Codes the daemon never sends: postern's own clients say them when the
// daemon had no say. Kept beside the daemon's so the two lists cannot
// overlap (a test checks) and a reader finds every code in one file.
export const CLIENT_CODES = {
  usage: 'CLI: the command line is wrong (exit 2)',
  interrupted: 'CLI: Ctrl-C at a prompt; nothing was done (exit 130)',
  daemon_unreachable:
    'CLI and MCP bridge: the agent or admin socket did not answer (CLI exit 3); `maybe_executed` when it had the request',
  cancelled: 'MCP bridge: the client cancelled the call; its request was withdrawn',
  result_too_large: 'MCP bridge: even with the body emptied the result exceeds mcp.max_result; the request did run',
} as const;

export type ClientCode = keyof typeof CLIENT_CODES;

export function isRefusalCode(code: unknown): code is RefusalCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(REFUSALS, code);
}

export interface ErrorBody {
  error: { code: RefusalCode; message: string; audit_seq?: number; [k: string]: unknown };
}

// The agent socket's replies (SPEC §6.1, §6.6), as the daemon writes them
// and the CLI and the MCP bridge read them.
export interface ReplyTarget {
  host: string;
  address: string;
  port: number;
}

// The upstream's response, as the agent gets it: decoded, redacted, capped.
export interface HttpResponseReply {
  status: number;
  headers: Record<string, string | string[]>;
  body: string;
  body_encoding: 'utf8' | 'base64';
  truncated: boolean;
  redactions: number;
  redirect: { location: string } | null;
}

export interface HttpReply extends HttpResponseReply {
  target: ReplyTarget;
  audit_seq: number;
  // A request with an idempotency key that was already answered.
  replayed?: true;
  replayed_audit_seq?: number;
}

export interface SshReply {
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  encoding: 'utf8' | 'base64';
  truncated: boolean;
  redactions: number;
  target: ReplyTarget;
  audit_seq: number;
}

export interface HealthReply {
  locked: boolean;
}

// Visibility is not authorisation: agents see names and allowed targets.
export interface CredentialsReply {
  credentials: { name: string; kind: string; description: string; targets: unknown }[];
}

// POST /v1/runs (SPEC §11): a run bound to the calling process instance.
// `placeholders`: credential name → placeholder, in the order named;
// `env`: each variable of those credentials' `env` → its placeholder; a
// variable two credentials name goes to the first, and `conflicts` says
// which credentials it was not given to.
export interface RunsReply {
  run: string;
  placeholders: Record<string, string>;
  env: Record<string, string>;
  conflicts: { variable: string; credential: string; ignored: string[] }[];
  audit_seq: number;
}

// The waiting notice (agent socket): a request that carries the header
// `ask` is told, when it starts to wait for a human's decision, by an
// informational `102 Processing` response with the card's id and expiry
// (ISO 8601) in the headers `id` and `expires`; the final response follows
// as usual. Only on request: some HTTP clients (Python's http.client) take
// any 1xx but 100 for the final response.
export const WAITING_NOTICE = {
  ask: 'postern-waiting-notice',
  id: 'postern-approval-id',
  expires: 'postern-approval-expires',
} as const;
