// Pending approvals (SPEC §7): a request without a covering session waits
// here for a human's decision, shown to every connected approver; the first
// decision wins. No approver connected: refused at once. At most 16 pending
// per process (pid and start time) and daemon.max_pending in all (the caller gives
// back its http.max_concurrent place for the wait, steps.ts approve()). A
// requester that goes away withdraws its card.
import { randomBytes } from 'node:crypto';
import { Refusal } from '../../shared/errors';
import { formatDuration } from '../../shared/units';
import type { Identity } from '../identity/identify';
import type { Card, CardProcess, CardAction } from '../../shared/admin-protocol';
import type { WaitingListener } from '../../shared/protocol';

export type { Card, CardProcess, CardAction };

export const MAX_PENDING_PER_PROCESS = 16;

// The withdrawal reason of a card a human decided (the approver that
// decided reports its own decision; the others say another one did).
export const DECIDED = 'decided';

export type Decision = { kind: 'deny' } | { kind: 'once' } | { kind: 'session'; rootKey: string };

export interface ApproverLink {
  id: string;
  push(event: { push: 'pending'; card: Card } | { push: 'withdrawn'; id: string; reason: string }): void;
}

interface Pending {
  card: Card;
  processKey: string; // pid:start time
  // `why`: what every approver is told about the card's withdrawal.
  settle: (d: Decision | Refusal, why: string) => void;
}

function cardProcess(p: Identity['process']): CardProcess {
  return {
    key: p.key,
    pid: p.pid,
    uid: p.uid,
    exe: p.exe,
    exe_deleted: p.exeDeleted,
    exe_memfd: p.exeMemfd,
    cwd: p.cwd,
    cmdline: p.cmdline,
  };
}

// The requester went away while it waited (SPEC §6.1); `withdrawn` goes
// into the journal entry of the refusal.
function withdrawn(): Refusal {
  return new Refusal('bad_request', 'the request was withdrawn by its sender', { withdrawn: 'by the requester' });
}

export class ApprovalBroker {
  private approvers = new Map<string, ApproverLink>();
  private pending = new Map<string, Pending>();

  // `maxPending`: daemon.max_pending, read at every request.
  constructor(private readonly maxPending: () => number = () => 32) {}

  attach(link: ApproverLink): void {
    this.approvers.set(link.id, link);
    for (const p of this.pending.values()) link.push({ push: 'pending', card: p.card });
  }

  detach(id: string): void {
    this.approvers.delete(id);
  }

  get approverCount(): number {
    return this.approvers.size;
  }

  list(): Card[] {
    return [...this.pending.values()].map((p) => p.card);
  }

  // Ask the humans. Resolves with their decision or rejects with a Refusal
  // (no_approver, busy, approval_timeout, or the abort reason). `onWaiting`
  // is told again, `approved`, when a human allows it (once or a session).
  // is told the card once it is shown, so the requester can say it waits.
  ask(
    identity: Identity,
    credential: string,
    approve: 'session' | 'each-use',
    action: CardAction,
    timeoutMs: number,
    signal?: AbortSignal,
    onWaiting?: WaitingListener<Card>,
  ): Promise<Decision> {
    if (this.approvers.size === 0) {
      return Promise.reject(
        new Refusal(
          'no_approver',
          'no approver is connected to decide on this request; a human must run `postern approver` in a terminal, then retry',
        ),
      );
    }
    // Counted per process (its pid and start time), not per instance: an
    // instance changes with the command line, which a process may rewrite
    // at will (process.title, prctl), and each rewrite would buy another 16.
    const key = `${identity.process.pid}:${identity.process.startTime}`;
    let mine = 0;
    for (const p of this.pending.values()) if (p.processKey === key) mine += 1;
    if (mine >= MAX_PENDING_PER_PROCESS) {
      return Promise.reject(
        new Refusal(
          'busy',
          `this process already has ${MAX_PENDING_PER_PROCESS} requests waiting for approval (the limit per process); wait for them to be decided, then retry`,
          { limit: 'per_process', pending: mine },
        ),
      );
    }
    const all = this.maxPending();
    if (this.pending.size >= all) {
      return Promise.reject(
        new Refusal(
          'busy',
          `${this.pending.size} requests are already waiting for approval (daemon.max_pending = ${all}, all processes together); wait for the human to decide some, then retry`,
          { limit: 'max_pending', pending: this.pending.size },
        ),
      );
    }
    const now = Date.now();
    const card: Card = {
      id: randomBytes(6).toString('hex'),
      credential,
      approve,
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + timeoutMs).toISOString(),
      process: cardProcess(identity.process),
      ancestors: identity.ancestors.map(cardProcess),
      action,
    };
    return new Promise<Decision>((resolve, reject) => {
      const finish = (d: Decision | Refusal, why: string): void => {
        if (!this.pending.delete(card.id)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        for (const a of this.approvers.values()) a.push({ push: 'withdrawn', id: card.id, reason: why });
        if (d instanceof Refusal) reject(d);
        else {
          if (d.kind !== 'deny') onWaiting?.(card, true);
          resolve(d);
        }
      };
      const timer = setTimeout(
        () =>
          finish(
            new Refusal(
              'approval_timeout',
              `no decision within ${Math.round(timeoutMs / 1000)} s; ask the human at the approver, then retry`,
            ),
            `it expired: no decision within ${formatDuration(timeoutMs)} (daemon.approval_timeout)`,
          ),
        timeoutMs,
      );
      const onAbort = (): void => finish(withdrawn(), 'withdrawn by the requester');
      if (signal?.aborted) {
        clearTimeout(timer);
        reject(withdrawn());
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(card.id, { card, processKey: key, settle: finish });
      for (const a of this.approvers.values()) a.push({ push: 'pending', card });
      onWaiting?.(card, false);
    });
  }

  // A human's decision; the first one for a card wins. Returns false when
  // the card is no longer pending (decided elsewhere, withdrawn, expired).
  decide(id: string, decision: Decision): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    if (decision.kind === 'session') {
      const roots = [p.card.process.key, ...p.card.ancestors.map((a) => a.key)];
      if (!roots.includes(decision.rootKey)) {
        throw new Refusal(
          'bad_request',
          'a session may be rooted only at the requesting process or one of the ancestors shown on its card',
        );
      }
      if (p.card.approve === 'each-use') {
        throw new Refusal(
          'bad_request',
          `credential ${p.card.credential} asks every time (each-use): allow once or deny`,
        );
      }
    }
    p.settle(decision, DECIDED);
    return true;
  }

  // Lock: every pending approval is refused with `refusal`, and every
  // approver is told `why` (e.g. "the daemon was locked").
  cancelAll(refusal: Refusal, why: string): void {
    for (const p of [...this.pending.values()]) p.settle(refusal, why);
  }

  // A credential removed, or its definition changed: its pending approvals
  // are refused (a decision would judge a request checked against what is
  // gone); the requester may send it again.
  credentialGone(credential: string, how: 'removed' | 'changed'): void {
    const refusal =
      how === 'removed'
        ? new Refusal(
            'unknown_credential',
            `credential "${credential}" was removed while this request waited for approval (postern cred rm); nothing was sent`,
          )
        : new Refusal(
            'busy',
            `credential "${credential}" was changed while this request waited for approval (postern cred update); nothing was sent: send it again, to have it checked against the new definition`,
          );
    const why = `credential ${credential} was ${how}`;
    for (const p of [...this.pending.values()]) if (p.card.credential === credential) p.settle(refusal, why);
  }
}
