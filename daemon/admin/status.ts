// `postern status`: what the daemon is doing, without secrets.
import { formatHead } from '../../shared/audit-format';
import type { AdminContext } from './context';
import { describeSession } from './sessions';

export function daemonStatus(ctx: AdminContext): Record<string, unknown> {
  const { state, journal } = ctx;
  const vault = state.current;
  const unlockedAt = state.unlockedAt;
  return {
    locked: state.locked,
    lock_reason: state.locked ? state.cause.text : null,
    lock_code: state.locked ? state.cause.refusal.code : null,
    pid: process.pid,
    started_at: ctx.startedAt.toISOString(),
    unlocked_at: unlockedAt ? unlockedAt.toISOString() : null,
    config_path: ctx.config.configPath,
    config_hash: ctx.config.hash,
    vault_generation: vault ? vault.generation : null,
    audit_head: formatHead(journal.head().seq, journal.head().hash),
    credentials: vault ? vault.credentials().length : null,
    sessions: ctx.sessions.list().map(describeSession),
    pending_approvals: ctx.approvals
      .list()
      .map((c) => ({ id: c.id, credential: c.credential, pid: c.process.pid, created_at: c.created_at })),
    approvers: ctx.approvals.approverCount,
    ...ctx.timers.describe(),
    counters: { ...ctx.counters },
  };
}
