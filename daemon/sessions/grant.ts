// A session a human just granted: journaled before it is stored, so the
// journal knows every session that ever covered a request. A lock while
// the entry was written ends the grant with the unlock it was made under.
import { Refusal } from '../../shared/errors';
import type { JournalEvent } from '../../shared/events';
import type { ProcessInfo } from '../identity/identify';
import type { Session, SessionStore } from './sessions';

export interface GrantDeps {
  sessions: SessionStore;
  journal: { record(event: JournalEvent): Promise<unknown> };
  // Throws the lock's refusal when locked.
  vault(): unknown;
  lockEpoch(): number;
}

export async function grantSession(
  deps: GrantDeps,
  credential: string,
  root: ProcessInfo,
  ttlMs: number,
): Promise<Session> {
  deps.vault();
  const epoch = deps.lockEpoch();
  const s = deps.sessions.make(credential, root, ttlMs);
  await deps.journal.record({
    kind: 'session_start',
    session: s.id,
    credential,
    root_pid: root.pid,
    root_exe: root.exe,
    root_instance: root.key,
    expires_at: new Date(s.expiresAt).toISOString(),
  });
  deps.vault();
  if (deps.lockEpoch() !== epoch)
    throw new Refusal(
      'vault_locked',
      'the vault was locked while this session was being granted; a human must run `postern unlock`',
    );
  deps.sessions.add(s);
  return s;
}
