// SPEC §6.1 step 5: a session that covers the requester, or a human's
// decision on a card. The request's concurrency slot is given back while it
// waits; the requester must still be the same process instance once decided.
import { Refusal } from '../../shared/errors';
import type { Approve, CredentialDef } from '../../shared/credential';
import type { CardAction } from '../../shared/admin-protocol';
import type { Approval } from '../../shared/events';
import { identify, stillRunning } from '../identity/identify';
import type { Decision } from '../sessions/approvals';
import { grantSession } from '../sessions/grant';
import type { RequestContext } from './context';

// "session:<id>" when a session covers (or was just granted), "once" for an
// allow-once decision. The card shows `action`.
export async function approve(
  ctx: RequestContext,
  def: CredentialDef,
  mode: Approve,
  action: CardAction,
): Promise<Approval> {
  const s = ctx.services;
  const credential = def.name;
  // Locked while the request waited before this step (for DNS, say): no
  // card is shown for it (a lock ends every pending approval).
  inForce(s, def);
  if (mode === 'session') {
    const covering = s.sessions.covering(ctx.identity, credential, ctx.requesterConfirmed === true);
    if (covering) return { approval: `session:${covering.id}` };
  }
  // The card shows the process as it is now: on a kept connection the
  // identity was read when it connected, and its executable may have been
  // deleted, its working directory or its parent changed since (the
  // instance is the same, checked on every request).
  ctx.identity = nowShown(ctx);
  // Taken again once decided, even when the limit was reached meanwhile: a
  // decision a human made is never thrown away as busy.
  ctx.slot?.suspend();
  let decision: Decision;
  try {
    decision = await s.approvals.ask(
      ctx.identity,
      credential,
      mode,
      action,
      s.config().daemon.approval_timeout,
      ctx.signal,
      ctx.onWaiting,
    );
  } finally {
    ctx.slot?.resume();
  }
  if (!stillRunning(ctx.identity.process))
    throw new Refusal(
      'unidentified_peer',
      'the requesting process changed while it waited for approval; retry from a running process',
    );
  if (decision.kind === 'deny')
    throw new Refusal('denied_by_user', 'a human denied this request; do not retry it unchanged');
  // Removed or changed while the human decided: nothing is sent, and no
  // session is granted for a name that may later mean another credential.
  inForce(s, def);
  if (decision.kind === 'once') return { approval: 'once' };
  const root = [ctx.identity.process, ...ctx.identity.ancestors].find((p) => p.key === decision.rootKey)!;
  const granted = await grantSession(s, credential, root, s.config().daemon.session_ttl);
  return { approval: `session:${granted.id}` };
}

// The vault open (else the lock's refusal) and the credential still the
// one the request was checked against (else removed or changed).
function inForce(s: RequestContext['services'], def: CredentialDef): void {
  const changed = s.vault().changedSince(def);
  if (changed) throw changed;
}

function nowShown(ctx: RequestContext): RequestContext['identity'] {
  const { pid, uid, key } = ctx.identity.process;
  let now: RequestContext['identity'] | null = null;
  try {
    now = identify(pid, uid, true);
  } catch {
    // gone: refused below
  }
  if (now?.process.key !== key)
    throw new Refusal(
      'unidentified_peer',
      `the process that made this connection (pid ${pid}) has exited or exec'd; whoever holds the connection now cannot speak for it — connect again from a running process`,
    );
  return now;
}
