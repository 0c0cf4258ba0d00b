// Why the daemon is locked, and what a request made meanwhile is told. Most
// causes are lifted by `postern unlock`; a config not approved and a rolled
// back vault are not, so agents are told the refusal that names them
// (SPEC §3, §6.3) rather than to wait for an unlock that will be refused.
import { Refusal } from '../shared/errors';
import type { ConfigChange } from '../shared/config';
import { describeChanges } from '../shared/config-changes';

export interface LockCause {
  // For `postern status` (lock_reason).
  text: string;
  // What a request needing the vault is refused with.
  refusal: Refusal;
}

export function lockedBecause(text: string): LockCause {
  return {
    text,
    refusal: new Refusal('vault_locked', `the vault is locked (${text}); a human must run \`postern unlock\``),
  };
}

export function configNotApproved(changes: readonly ConfigChange[]): LockCause {
  const what = describeChanges(changes);
  return {
    text: `config not approved: ${what}`,
    refusal: new Refusal(
      'config_not_approved',
      `the daemon stays locked because its config changed since it was approved (${what}); a human must review the change and run \`postern config approve\` (unlocking is refused until then)`,
      { changes },
    ),
  };
}

export function rolledBack(problem: string): LockCause {
  return {
    text: `rollback detected: ${problem}`,
    refusal: new Refusal(
      'rollback_detected',
      `the daemon stays locked because the vault or the journal was rolled back (${problem}); a human must restore the matching vault and journal, or accept this state with \`postern unlock --accept-rollback\``,
    ),
  };
}
