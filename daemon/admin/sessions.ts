// `postern sessions` and `sessions revoke`.
import { Refusal } from '../../shared/errors';
import type { Session } from '../sessions/sessions';
import type { AdminContext } from './context';

export function sessionsList(ctx: AdminContext): Record<string, unknown> {
  return { sessions: ctx.sessions.list().map(describeSession) };
}

export function sessionsRevoke(ctx: AdminContext, args: Record<string, unknown>): Record<string, unknown> {
  if (args['all'] === true) return { revoked: ctx.sessions.endAll('revoked') };
  const id = args['id'];
  if (typeof id !== 'string' || !ctx.sessions.revoke(id))
    throw new Refusal('not_found', `no session ${JSON.stringify(id)}; see \`postern sessions\``);
  return { revoked: 1 };
}

export function describeSession(s: Session): Record<string, unknown> {
  return {
    id: s.id,
    credential: s.credential,
    root: { pid: s.root.pid, exe: s.root.exe, cmdline: s.root.cmdline, key: s.root.key },
    created_at: new Date(s.createdAt).toISOString(),
    expires_at: new Date(s.expiresAt).toISOString(),
  };
}
