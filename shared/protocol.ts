// The one list of refusal codes (SPEC §6.3): for each, the HTTP status the
// agent socket answers with, who can receive it (`agent`: the agent socket
// and so the front doors; `admin`: the CLI and the approver over admin.sock;
// `both`), and when it is given. The daemon, the CLI, the MCP bridge and the
// tests all read it from here; a new code is added here first.
type Audience = 'agent' | 'admin' | 'both';
interface RefusalRow {
  status: number;
  audience: Audience;
  when: string;
}

export const REFUSAL_TABLE = {
  bad_request: {
    status: 400,
    audience: 'both',
    when: 'malformed JSON, a missing or invalid field, a forbidden header, a bad URL or path',
  },
  unknown_credential: { status: 404, audience: 'agent', when: 'no credential has that name' },
  denied_policy: {
    status: 403,
    audience: 'agent',
    when: 'the scheme, host, port, method, path or command is not allowed by the credential',
  },
  denied_address: {
    status: 403,
    audience: 'agent',
    when: 'a resolved address is blocked (the message names the address and its range)',
  },
  denied_by_user: {
    status: 403,
    audience: 'both',
    when: 'a human denied the request; on admin.sock, a decision from a connection that is not an attached approver',
  },
  approval_timeout: { status: 403, audience: 'agent', when: 'no human decided within daemon.approval_timeout' },
  no_approver: { status: 403, audience: 'agent', when: 'approval is needed and no approver is connected' },
  unidentified_peer: {
    status: 403,
    audience: 'agent',
    when: 'the connecting process could not be identified, or is no longer the one that connected',
  },
  denied_peer: {
    status: 403,
    audience: 'agent',
    when: "the connecting process's uid is not allowed on the agent socket",
  },
  idempotency_conflict: {
    status: 409,
    audience: 'agent',
    when: 'an idempotency key was used before for another request (SPEC §6.5)',
  },
  in_progress: {
    status: 409,
    audience: 'agent',
    when: 'a request with this idempotency key is still running (SPEC §6.5)',
  },
  body_too_large: { status: 413, audience: 'agent', when: 'the request body is over the limit' },
  vault_locked: { status: 423, audience: 'both', when: 'the vault is locked' },
  config_not_approved: { status: 423, audience: 'both', when: 'the config changed since it was approved' },
  rollback_detected: { status: 423, audience: 'both', when: 'the vault or the journal was rolled back (SPEC §8)' },
  rate_limited: { status: 429, audience: 'agent', when: "the credential's rate budget is spent" },
  busy: {
    status: 429,
    audience: 'both',
    when: 'too many requests in flight, approvals pending or passphrase checks waiting',
  },
  dns_error: { status: 502, audience: 'agent', when: 'the name could not be resolved' },
  upstream_error: { status: 502, audience: 'agent', when: 'the connection, TLS or the upstream protocol failed' },
  host_key_mismatch: {
    status: 502,
    audience: 'agent',
    when: 'the SSH server showed a host key other than the pinned one',
  },
  upstream_timeout: {
    status: 504,
    audience: 'agent',
    when: 'the upstream did not answer in time; `maybe_executed` says whether it may have acted',
  },
  // Fail closed (SPEC §9) rather than act unrecorded.
  audit_unavailable: {
    status: 503,
    audience: 'both',
    when: 'the journal cannot record the action (disk full, file replaced)',
  },
  wrong_passphrase: { status: 401, audience: 'admin', when: 'the passphrase does not open the vault' },
  not_found: { status: 404, audience: 'admin', when: 'no credential, session or card with that name or id' },
  conflict: { status: 409, audience: 'admin', when: 'the thing exists already, or changed while it was reviewed' },
  invalid_definition: { status: 400, audience: 'admin', when: 'a credential definition does not validate' },
  bad_config: { status: 400, audience: 'both', when: 'the config file does not validate' },
  bad_environment: {
    status: 400,
    audience: 'admin',
    when: 'a variable in the environment would change what the daemon runs or trusts',
  },
  vault_corrupt: { status: 500, audience: 'admin', when: 'the vault file cannot be read or decrypted' },
  internal_error: { status: 500, audience: 'both', when: 'an unexpected error; the daemon log says more' },
} as const satisfies Record<string, RefusalRow>;

// Code → status, as the agent socket answers.
export const REFUSALS = Object.fromEntries(Object.entries(REFUSAL_TABLE).map(([code, row]) => [code, row.status])) as {
  readonly [C in keyof typeof REFUSAL_TABLE]: (typeof REFUSAL_TABLE)[C]['status'];
};

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
  // The daemon's ssh-agent front door (SPEC §12), for SSH_AUTH_SOCK; null
  // when it is off.
  ssh_agent_socket: string | null;
}

// The waiting notice (agent socket): a request that carries the header
// `ask` is told, when it starts to wait for a human's decision, by an
// informational `102 Processing` response with the card's id and expiry
// (ISO 8601) in the headers `id` and `expires`; once a human approves it,
// by a second one with the same headers and `decision: approved`, so the
// requester stops saying a human is being asked while the request goes on
// (a denial or an expiry is the final response itself). The final response
// follows as usual. Only on request: some HTTP clients (Python's
// http.client) take any 1xx but 100 for the final response. Such a request
// is also sent a `102 Processing` with `working: 1` every HEARTBEAT_MS
// while it runs, so a requester that reports progress (the MCP bridge) can
// tell a daemon still at work from one that stopped answering.
export const WAITING_NOTICE = {
  ask: 'postern-waiting-notice',
  id: 'postern-approval-id',
  expires: 'postern-approval-expires',
  decision: 'postern-approval-decision',
  working: 'postern-working',
} as const;

export const HEARTBEAT_MS = 5000;

// What a waiting notice tells the requester.
export interface ApprovalNotice {
  id: string;
  expiresAt: string;
  // A human approved it; the request goes on.
  approved: boolean;
}

// Told when a request starts to wait for a human (`approved` false), and
// again once a human approved it (`approved` true).
export type WaitingListener<C> = (card: C, approved: boolean) => void;
