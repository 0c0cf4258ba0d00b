// Operations of the admin protocol (admin.sock) and which attachments each
// carries, in order. Attachments are raw bytes (see admin-frame.ts).
export const ADMIN_OPS = {
  status: [],
  unlock: ['passphrase'],
  lock: [],
  'config.diff': [],
  'config.approve': ['passphrase'],
  passwd: ['passphrase', 'new_passphrase'],
  'audit.rotate_key': ['passphrase'],
  'cred.add': ['passphrase', 'secret'],
  'cred.update': ['passphrase', 'secret?'],
  'cred.list': [],
  'cred.show': [],
  'cred.rm': ['passphrase'],
  // The approver: attach once with the passphrase; the connection then
  // receives pushed frames `{ push: 'pending', card }` and
  // `{ push: 'withdrawn', id, reason }`, and may send approval.decide.
  'approver.attach': ['passphrase'],
  'approval.decide': [],
  'approvals.list': [],
  'sessions.list': [],
  'sessions.revoke': [],
} as const;

export type AdminOp = keyof typeof ADMIN_OPS;

export function isAdminOp(op: unknown): op is AdminOp {
  return typeof op === 'string' && Object.prototype.hasOwnProperty.call(ADMIN_OPS, op);
}

export interface AdminError {
  code: string;
  message: string;
  [k: string]: unknown;
}

export type AdminResponse =
  { id: number; ok: true; result: Record<string, unknown> } | { id: number; ok: false; error: AdminError };

// A decision sent by an attached approver (`approval.decide` args).
export interface DecideArgs {
  id: string;
  decision: 'deny' | 'once' | 'session';
  root_key?: string; // for 'session': the card's process key or one of its ancestors' keys
}

// The approval card: the protocol between the daemon and approvers.
// What the human is asked to approve; every string here may be agent-
// controlled and is escaped by whoever displays it.
export interface CardAction {
  kind: 'http' | 'ssh' | 'ssh-agent';
  [field: string]: unknown;
}

// An HTTP card's action for a request through the proxy front door (SPEC
// §11) also says so, and names the descendant of `postern run` that opened
// the connection as `postern run` reported it (null: it could not tell);
// the kernel vouches only for the card's process (`postern run` itself).
export interface ProxyCardFields {
  via: 'proxy';
  proxy_client_pid: number | null;
}

export interface Card {
  id: string;
  credential: string;
  approve: 'session' | 'each-use';
  created_at: string;
  expires_at: string;
  process: CardProcess;
  ancestors: CardProcess[];
  action: CardAction;
}

export interface CardProcess {
  key: string;
  pid: number;
  uid: number;
  exe: string;
  exe_deleted: boolean;
  exe_memfd: boolean;
  cwd: string;
  cmdline: string[];
}

// What the daemon puts in a CardProcess's `exe` (and `cwd`) when the path
// is not simply the program that runs (SPEC §1, §7). A path the kernel
// prints always begins with "/", so NOT_READABLE is never a path; the notes
// are appended to the path, after two spaces, and an agent can only add a
// false warning by naming its files after them, never remove one.
export const NOT_READABLE = "(not readable by the daemon: another user's process)";
export const OTHER_MOUNT_NS_NOTE =
  "[runs in another mount namespace than the daemon's: this path may name another program]";
export const EXE_MISMATCH_NOTE = '[not the file the process runs: this path names another file for the daemon]';
