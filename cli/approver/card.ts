// A card pushed by the daemon, read defensively: the approver shows what it
// received, so a field of the wrong type becomes a visible placeholder rather
// than a crash, and an unknown approve mode is treated as the stricter
// each-use (fewer ways to say yes).
import type { Card, CardAction, CardProcess } from '../../shared/admin-protocol';

export type { Card, CardAction, CardProcess };

function obj(v: unknown): Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function text(v: unknown, missing = '(not given)'): string {
  return typeof v === 'string' ? v : missing;
}

function int(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) ? v : -1;
}

function readProcess(v: unknown): CardProcess {
  const p = obj(v);
  return {
    // An empty key offers no session root: the daemon would refuse it anyway.
    key: typeof p['key'] === 'string' ? p['key'] : '',
    pid: int(p['pid']),
    uid: int(p['uid']),
    exe: text(p['exe']),
    exe_deleted: p['exe_deleted'] === true,
    exe_memfd: p['exe_memfd'] === true,
    cwd: text(p['cwd']),
    cmdline: Array.isArray(p['cmdline']) ? p['cmdline'].map((a) => (typeof a === 'string' ? a : String(a))) : [],
  };
}

// null when the card has no id: nothing could be decided about it.
export function readCard(v: unknown): Card | null {
  const c = obj(v);
  if (typeof c['id'] !== 'string' || c['id'] === '') return null;
  const action = obj(c['action']);
  return {
    id: c['id'],
    credential: text(c['credential']),
    approve: c['approve'] === 'session' ? 'session' : 'each-use',
    created_at: text(c['created_at'], ''),
    expires_at: text(c['expires_at'], ''),
    process: readProcess(c['process']),
    ancestors: Array.isArray(c['ancestors']) ? c['ancestors'].map(readProcess) : [],
    // The kind is kept as sent: the card renders an unknown kind field by field.
    action: { ...action, kind: String(action['kind'] ?? 'unknown') as CardAction['kind'] },
  };
}
