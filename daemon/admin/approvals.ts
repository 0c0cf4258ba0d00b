// The approver's side: attaching after a passphrase proof, leaving, and
// deciding pending approvals.
import { Refusal } from '../../shared/errors';
import type { DecideArgs } from '../../shared/admin-protocol';
import type { ApproverLink, Decision } from '../sessions/approvals';
import type { AdminContext } from './context';
import { openWithPassphrase, prove } from './proof';

// The approver proves the passphrase once; its connection then receives
// cards. Works locked too (the proof then opens the vault file briefly).
export async function attachApprover(
  ctx: AdminContext,
  passphrase: Buffer,
  link: ApproverLink,
): Promise<Record<string, unknown>> {
  if (!ctx.state.locked) await prove(ctx, passphrase);
  else (await openWithPassphrase(ctx, passphrase)).wipe();
  ctx.approvals.attach(link);
  ctx.recorder.bestEffort({ kind: 'approver_attach', approver: link.id });
  return { attached: true, approver: link.id, pending: ctx.approvals.list().length };
}

export function detachApprover(ctx: AdminContext, id: string): void {
  ctx.approvals.detach(id);
}

export function decide(ctx: AdminContext, args: Record<string, unknown>): Record<string, unknown> {
  const a = args as Partial<DecideArgs>;
  if (typeof a.id !== 'string') throw new Refusal('bad_request', 'approval.decide needs an id');
  let decision: Decision;
  if (a.decision === 'deny') decision = { kind: 'deny' };
  else if (a.decision === 'once') decision = { kind: 'once' };
  else if (a.decision === 'session' && typeof a.root_key === 'string')
    decision = { kind: 'session', rootKey: a.root_key };
  else throw new Refusal('bad_request', 'decision must be deny, once, or session with a root_key');
  const taken = ctx.approvals.decide(a.id, decision);
  return { id: a.id, taken };
}
