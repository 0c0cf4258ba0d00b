// The events a journal records (docs/audit-format.md, *Events*): one type per
// kind, with the fields the daemon writes in the order it writes them. A
// field is a JSON scalar, a list of them, or a list of flat records of them
// (the counts of a refusal summary), so a Buffer, a secret or any object
// with behaviour cannot be journaled: the compiler refuses it. `record()`
// takes only these types; EVENT_FIELDS names each kind's fields at run time,
// for the test that reads the document's table against them.

export type Scalar = string | number | boolean | null;
export type EventField = Scalar | readonly Scalar[] | readonly Readonly<Record<string, Scalar>>[];

// Who asked: the process instance identified on the agent socket.
export type Requester = { pid: number; uid: number; exe: string; instance: string };

type HttpRequestCore = {
  method: string;
  scheme: string;
  host: string;
  port: number;
  path: string;
  body_bytes: number;
  body_sha256: string | null;
  idempotency_key?: string;
  reason?: string;
  via?: 'proxy'; // read by the proxy front door (SPEC §11)
  // A computed credential (SPEC §13): how the secret is used, and for a
  // token, where it is obtained.
  computed?: 'aws_sigv4' | 'github_app' | 'oauth2';
  token_endpoint?: string;
};

export type HttpRequestFacts = { credential: string } & HttpRequestCore;
// A request through the proxy that carried no placeholder: no credential,
// and so no approval either.
export type UncredentialedHttpFacts = HttpRequestCore & { via: 'proxy' };

// `host`… are known once the credential is; the agent's reason comes before
// them, as the daemon has always written it.
export type SshRequestFacts = {
  credential: string;
  command: string;
  stdin_bytes: number;
  stdin_sha256: string | null;
  reason?: string;
  host?: string;
  port?: number;
  user?: string;
  host_key?: string;
};

// A login an OpenSSH client asked the ssh-agent front door to sign (SPEC
// §12): what the connection's binding and the data to sign said, as far as
// they were read. `session` is the SHA-256 of the bound session identifier.
export type SshAgentFacts = {
  request: string;
  credential: string | null;
  host: string | null;
  host_key: string | null;
  user: string | null;
  session: string | null;
  forwarded: boolean;
};

export type Resolution = { address: string; addresses: string[] };
export type Approval = { approval: string };

type Known<T> = Partial<T>;

export type RefusalCount = { kind: string; code: string; credential: string | null; count: number };

export type JournalEvent =
  | { kind: 'daemon_start'; pid: number; config_hash: string }
  | { kind: 'daemon_stop'; reason: string }
  | { kind: 'unlock'; outcome: string; generation?: number }
  | { kind: 'lock'; reason: string }
  | { kind: 'passphrase_refused'; during: string; consecutive: number }
  | { kind: 'config_approve'; config_hash: string; generation: number }
  | { kind: 'passwd'; generation: number }
  | { kind: 'cred_add'; credential: string; credential_kind: string; definition_hash: string; generation: number }
  | {
      kind: 'cred_update';
      credential: string;
      definition_hash: string;
      previous_definition_hash: string;
      secret_replaced: boolean;
      generation: number;
    }
  | { kind: 'cred_rm'; credential: string; credential_kind: string; definition_hash: string; generation: number }
  | {
      kind: 'audit_key_rotation';
      step: string;
      previous_sign_pub?: string;
      sign_pub: string;
      signer_seq?: number;
      generation: number;
    }
  | { kind: 'rollback_accepted'; problem: string; generation: number }
  | { kind: 'proxy_ca_created'; fingerprint: string; generation: number }
  | { kind: 'oauth_refresh_rotated'; credential: string; generation: number }
  | { kind: 'approver_attach'; approver: string }
  | {
      kind: 'session_start';
      session: string;
      credential: string;
      root_pid: number;
      root_exe: string;
      root_instance: string;
      expires_at: string;
    }
  | { kind: 'session_end'; session: string; credential: string; reason: string }
  | {
      kind: 'run_start';
      run: string;
      root_pid: number;
      root_exe: string;
      root_instance: string;
      credentials: string[];
    }
  | { kind: 'run_end'; run: string; reason: string }
  | ({ kind: 'proxy_tunnel' } & Requester & {
        host: string;
        port: number;
        address: string;
        bytes_up: number;
        bytes_down: number;
      })
  | ({ kind: 'http_intent' } & Requester & HttpRequestFacts & Resolution & Approval)
  | ({ kind: 'http_intent' } & Requester & UncredentialedHttpFacts & Resolution)
  | HttpOutcome
  | ({ kind: 'http_replayed' } & Requester & HttpRequestFacts & Resolution & Approval & { replayed_seq: number })
  | ({ kind: 'http_refused' } & RefusedHead & Requester & Known<HttpRequestFacts & Resolution & Approval>)
  | ({ kind: 'ssh_intent' } & Requester & SshRequestFacts & Resolution & Approval)
  | SshOutcome
  | ({ kind: 'ssh_refused' } & RefusedHead & Requester & Known<SshRequestFacts & Resolution & Approval>)
  | { kind: 'agent_refused'; code: string; endpoint: string; pid: number | null }
  | ({ kind: 'ssh_agent_sign' } & Requester & {
        credential: string;
        host: string;
        host_key: string;
        user: string;
        session: string;
        algorithm: string;
      } & Approval)
  | ({ kind: 'ssh_agent_refused' } & RefusedHead & Requester & SshAgentFacts)
  | {
      kind: 'refusals_summarised';
      instance: string;
      pid: number | null;
      uid: number | null;
      exe: string | null;
      first_at: string;
      last_at: string;
      total: number;
      journaled_in_full: number;
      counts: RefusalCount[];
    };

type RefusedHead = { code: string; withdrawn?: string };

export type HttpOutcome =
  | {
      kind: 'http_outcome';
      intent_seq: number;
      status: number;
      bytes: number;
      truncated: boolean;
      redactions: number;
      body_sha256: string;
      duration_ms: number;
    }
  | {
      kind: 'http_outcome';
      intent_seq: number;
      status?: number;
      error: string;
      maybe_executed: boolean | null;
      duration_ms: number;
    };

export type SshOutcome =
  | {
      kind: 'ssh_outcome';
      intent_seq: number;
      exit_code: number | null;
      signal: string | null;
      bytes: number;
      truncated: boolean;
      redactions: number;
      output_sha256: string;
      duration_ms: number;
    }
  | {
      kind: 'ssh_outcome';
      intent_seq: number;
      error: string;
      maybe_executed: boolean | null;
      offered_host_keys?: Readonly<Record<string, Scalar>>[];
      duration_ms: number;
    };

export type EventKind = JournalEvent['kind'];
export type EventOf<K extends EventKind> = Extract<JournalEvent, { kind: K }>;

// Every field a kind may carry (across its variants), for the document test.
type FieldsOf<K extends EventKind> = Exclude<
  EventOf<K> extends infer E ? (E extends unknown ? keyof E : never) : never,
  'kind'
>;

const REQUESTER = ['pid', 'uid', 'exe', 'instance'] as const;
const HTTP_REQUEST = [
  'credential',
  'method',
  'scheme',
  'host',
  'port',
  'path',
  'body_bytes',
  'body_sha256',
  'idempotency_key',
  'reason',
  'via',
  'computed',
  'token_endpoint',
] as const;
const SSH_REQUEST = [
  'credential',
  'command',
  'stdin_bytes',
  'stdin_sha256',
  'reason',
  'host',
  'port',
  'user',
  'host_key',
] as const;
const RESOLUTION_APPROVAL = ['address', 'addresses', 'approval'] as const;

// Each list names every field its kind's type has, and nothing else
// (`complete` fails to compile otherwise), in the order they are written: an
// entry's fields are these, some left out, in this order.
type Complete<K extends EventKind, L extends readonly string[]> = [Exclude<FieldsOf<K>, L[number]>] extends [never]
  ? [Exclude<L[number], FieldsOf<K>>] extends [never]
    ? L
    : never
  : never;
function complete<K extends EventKind, const L extends readonly string[]>(_kind: K, list: L & Complete<K, L>): L {
  return list;
}

export const EVENT_FIELDS: { readonly [K in EventKind]: readonly string[] } = {
  daemon_start: complete('daemon_start', ['pid', 'config_hash']),
  daemon_stop: complete('daemon_stop', ['reason']),
  unlock: complete('unlock', ['outcome', 'generation']),
  lock: complete('lock', ['reason']),
  passphrase_refused: complete('passphrase_refused', ['during', 'consecutive']),
  config_approve: complete('config_approve', ['config_hash', 'generation']),
  passwd: complete('passwd', ['generation']),
  cred_add: complete('cred_add', ['credential', 'credential_kind', 'definition_hash', 'generation']),
  cred_update: complete('cred_update', [
    'credential',
    'definition_hash',
    'previous_definition_hash',
    'secret_replaced',
    'generation',
  ]),
  cred_rm: complete('cred_rm', ['credential', 'credential_kind', 'definition_hash', 'generation']),
  audit_key_rotation: complete('audit_key_rotation', [
    'step',
    'previous_sign_pub',
    'sign_pub',
    'signer_seq',
    'generation',
  ]),
  rollback_accepted: complete('rollback_accepted', ['problem', 'generation']),
  proxy_ca_created: complete('proxy_ca_created', ['fingerprint', 'generation']),
  oauth_refresh_rotated: complete('oauth_refresh_rotated', ['credential', 'generation']),
  approver_attach: complete('approver_attach', ['approver']),
  session_start: complete('session_start', [
    'session',
    'credential',
    'root_pid',
    'root_exe',
    'root_instance',
    'expires_at',
  ]),
  session_end: complete('session_end', ['session', 'credential', 'reason']),
  run_start: complete('run_start', ['run', 'root_pid', 'root_exe', 'root_instance', 'credentials']),
  run_end: complete('run_end', ['run', 'reason']),
  proxy_tunnel: complete('proxy_tunnel', [...REQUESTER, 'host', 'port', 'address', 'bytes_up', 'bytes_down']),
  http_intent: complete('http_intent', [...REQUESTER, ...HTTP_REQUEST, ...RESOLUTION_APPROVAL]),
  http_outcome: complete('http_outcome', [
    'intent_seq',
    'status',
    'bytes',
    'truncated',
    'redactions',
    'body_sha256',
    'error',
    'maybe_executed',
    'duration_ms',
  ]),
  http_replayed: complete('http_replayed', [...REQUESTER, ...HTTP_REQUEST, ...RESOLUTION_APPROVAL, 'replayed_seq']),
  http_refused: complete('http_refused', ['code', 'withdrawn', ...REQUESTER, ...HTTP_REQUEST, ...RESOLUTION_APPROVAL]),
  ssh_intent: complete('ssh_intent', [...REQUESTER, ...SSH_REQUEST, ...RESOLUTION_APPROVAL]),
  ssh_outcome: complete('ssh_outcome', [
    'intent_seq',
    'exit_code',
    'signal',
    'bytes',
    'truncated',
    'redactions',
    'output_sha256',
    'error',
    'maybe_executed',
    'offered_host_keys',
    'duration_ms',
  ]),
  ssh_refused: complete('ssh_refused', ['code', 'withdrawn', ...REQUESTER, ...SSH_REQUEST, ...RESOLUTION_APPROVAL]),
  agent_refused: complete('agent_refused', ['code', 'endpoint', 'pid']),
  ssh_agent_sign: complete('ssh_agent_sign', [
    ...REQUESTER,
    'credential',
    'host',
    'host_key',
    'user',
    'session',
    'algorithm',
    'approval',
  ]),
  ssh_agent_refused: complete('ssh_agent_refused', [
    'code',
    'withdrawn',
    ...REQUESTER,
    'request',
    'credential',
    'host',
    'host_key',
    'user',
    'session',
    'forwarded',
  ]),
  refusals_summarised: complete('refusals_summarised', [
    'instance',
    'pid',
    'uid',
    'exe',
    'first_at',
    'last_at',
    'total',
    'journaled_in_full',
    'counts',
  ]),
};

// The field groups the document's table names in words.
export const EVENT_FIELD_GROUPS: Readonly<Record<string, readonly string[]>> = {
  requester: REQUESTER,
  'HTTP request': HTTP_REQUEST,
  'SSH request': SSH_REQUEST,
  resolution: ['address', 'addresses'],
  approval: ['approval'],
};

// A journal event's fields must be JSON values of the shapes above; this
// type check is what stops a Buffer (or an object with a toJSON) reaching a
// payload. Kept as an assertion so a change to JournalEvent that breaks it
// fails to compile here.
type OnlyFields<E> = E extends unknown
  ? { [F in keyof E]-?: E[F] extends EventField | undefined ? true : false }[keyof E]
  : never;
const _onlyFields: Exclude<OnlyFields<JournalEvent>, true> extends never ? true : never = true;
void _onlyFields;

// The events that describe a vault write: the writer adds `generation`, the
// one the write produces, last.
type VaultWriteKind =
  | 'config_approve'
  | 'passwd'
  | 'cred_add'
  | 'cred_update'
  | 'cred_rm'
  | 'audit_key_rotation'
  | 'rollback_accepted'
  | 'proxy_ca_created'
  | 'oauth_refresh_rotated';
export type VaultWriteEvent =
  EventOf<VaultWriteKind> extends infer E ? (E extends { generation: number } ? Omit<E, 'generation'> : never) : never;
