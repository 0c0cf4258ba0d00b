// Idempotency records (SPEC §6.5), in daemon memory only: they do not
// survive a restart, and are purged on lock, on revoke and at session end.
// A record is keyed by (scope, credential, key), where the scope is the
// session that approved the request or, for an allow-once decision, the
// requesting process instance. It holds a hash of the normalised request and,
// once the request is over, what the agent was told.
import { Refusal } from '../../shared/errors';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
export const IDEMPOTENCY_MAX_RECORDS = 10_000;

// What a finished request left: a reply, or a refusal given after the
// request may have reached the target.
export type Outcome<R = unknown> =
  { kind: 'reply'; reply: R; auditSeq: number } | { kind: 'refusal'; refusal: Refusal; auditSeq: number };

interface Entry<R> {
  scope: string;
  credential: string;
  requestHash: string;
  createdAt: number;
  outcome: Outcome<R> | null; // null while the first request is in flight
}

export type Lookup<R = unknown> = { kind: 'new'; ticket: Ticket<R> } | { kind: 'replay'; outcome: Outcome<R> };

export interface Ticket<R = unknown> {
  // The request finished: record what the agent was told.
  finish(outcome: Outcome<R>): void;
  // The request never left (or certainly did not execute): forget the key,
  // so a retry with it runs.
  abandon(): void;
}

// R: the reply a request with a key gets again.
export class IdempotencyStore<R = unknown> {
  // Insertion order is age order: the first entry is the oldest.
  private entries = new Map<string, Entry<R>>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly max = IDEMPOTENCY_MAX_RECORDS,
    private readonly ttl = IDEMPOTENCY_TTL_MS,
  ) {}

  lookup(scope: string, credential: string, key: string, requestHash: string): Lookup<R> {
    this.expire();
    const id = `${scope}\n${credential}\n${key}`;
    const e = this.entries.get(id);
    if (e) {
      if (e.requestHash !== requestHash) {
        throw new Refusal(
          'idempotency_conflict',
          `idempotency_key ${JSON.stringify(key)} was used for a different request; use a new key for a new request`,
        );
      }
      if (e.outcome === null) {
        throw new Refusal(
          'in_progress',
          `the request with idempotency_key ${JSON.stringify(key)} is still in flight; wait for it and retry to get its outcome`,
        );
      }
      return { kind: 'replay', outcome: e.outcome };
    }
    const entry: Entry<R> = { scope, credential, requestHash, createdAt: this.now(), outcome: null };
    this.entries.set(id, entry);
    while (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as string);
    return {
      kind: 'new',
      ticket: {
        finish: (outcome) => {
          if (this.entries.get(id) === entry) entry.outcome = outcome;
        },
        abandon: () => {
          if (this.entries.get(id) === entry) this.entries.delete(id);
        },
      },
    };
  }

  // Session end or revoke: that session's records go.
  purgeScope(scope: string): void {
    for (const [id, e] of this.entries) if (e.scope === scope) this.entries.delete(id);
  }

  // A credential removed: what was recorded under it goes.
  purgeCredential(credential: string): void {
    for (const [id, e] of this.entries) if (e.credential === credential) this.entries.delete(id);
  }

  // Lock: everything goes.
  purgeAll(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private expire(): void {
    const limit = this.now() - this.ttl;
    for (const [id, e] of this.entries) {
      if (e.createdAt > limit) break;
      this.entries.delete(id);
    }
  }
}
