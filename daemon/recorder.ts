// Every decision goes to the journal and to the log. Payloads carry names,
// codes, counts and hashes, never secrets. While locked, an entry is
// followed by a checkpoint within a second.
import { Refusal } from '../shared/errors';
import type { JournalEvent } from '../shared/events';
import type { Journal } from './audit/journal';
import { logFields, type Logger } from './logger';

// How soon an entry written while locked is followed by a checkpoint.
const LOCKED_CHECKPOINT_MS = 1000;

type Head = { seq: number; hash: string };

// What a failure is called in the log: a refusal's code, else the error's
// class (a library message could quote input).
export function errorCode(e: unknown): string | undefined {
  return e instanceof Refusal ? e.code : (e as Error)?.name;
}

const MAX_KEPT_INTENTS = 4096;

function isIntent(e: JournalEvent): boolean {
  return e.kind === 'http_intent' || e.kind === 'ssh_intent';
}

export class Recorder {
  private lockedCheckpoint: NodeJS.Timeout | null = null;
  private readonly intents = new Map<number, JournalEvent>();

  constructor(
    private readonly journal: Journal,
    private readonly log: Logger,
    private readonly isLocked: () => boolean,
  ) {}

  // A problem that refuses nothing but that a human should see: the log only.
  warn(fields: Record<string, string | number | null>, message: string): void {
    this.log.warn(fields, message);
  }

  // Durable before this resolves. If the journal cannot take it, the action
  // it describes is refused.
  async record(payload: JournalEvent): Promise<Head> {
    const intent = isIntent(payload);
    if (intent) this.log.debug(payload, payload.kind);
    else this.log.info(this.withIntent(payload), payload.kind);
    const head = await this.journal.append(payload);
    if (intent) this.keepIntent(head.seq, payload);
    this.checkpointSoonIfLocked();
    return head;
  }

  // A request's outcome: the reply waits only for the entry's place in the
  // journal (its seq), not for its fdatasync, which the next group commit
  // does. The intent before it was durable before anything was sent; a
  // crash in between leaves an intent without its outcome, as a crash
  // during the request would.
  async recordOutcome(payload: JournalEvent): Promise<Head> {
    this.log.info(this.withIntent(payload), payload.kind);
    const { assigned, durable } = this.journal.appendSoon(payload);
    void assigned.then(
      () => this.checkpointSoonIfLocked(),
      () => undefined,
    );
    durable.catch((e: unknown) => {
      this.log.error(
        { event: 'audit_write_failed', kind: payload.kind, code: errorCode(e) },
        'could not journal an outcome',
      );
    });
    return assigned;
  }

  // For events that must not block what they describe (lock, stop): a
  // journal failure is logged, and the action goes ahead.
  bestEffort(payload: JournalEvent): void {
    this.record(payload).catch((e: unknown) => {
      this.log.error(
        { event: 'audit_write_failed', kind: payload.kind, code: errorCode(e) },
        'could not journal an event',
      );
    });
  }

  // One line per request at info: the outcome, carrying what its intent
  // said (the intent itself is logged at debug). Bounded: an intent whose
  // outcome never comes (a crash of the request) is dropped in time.
  private keepIntent(seq: number, payload: JournalEvent): void {
    if (this.intents.size >= MAX_KEPT_INTENTS) {
      const oldest = this.intents.keys().next();
      if (!oldest.done) this.intents.delete(oldest.value);
    }
    this.intents.set(seq, payload);
  }

  private withIntent(payload: JournalEvent): object {
    if (!('intent_seq' in payload)) return payload;
    const intent = this.intents.get(payload.intent_seq);
    if (!intent) return payload;
    this.intents.delete(payload.intent_seq);
    return logFields(intent, payload);
  }

  // At shutdown the journal's close writes the final checkpoint itself.
  cancelCheckpoint(): void {
    if (this.lockedCheckpoint) clearTimeout(this.lockedCheckpoint);
    this.lockedCheckpoint = null;
  }

  // While locked nothing else brings the next checkpoint (no request is
  // served), so an entry written then is signed within a second: `postern
  // lock` followed by refused requests still leaves a journal that `audit
  // verify` accepts (SPEC §9). Without the signing key (not yet unlocked
  // since start) the journal writes none, and the tail stays unsigned.
  private checkpointSoonIfLocked(): void {
    if (!this.isLocked() || this.lockedCheckpoint !== null) return;
    this.lockedCheckpoint = setTimeout(() => {
      this.lockedCheckpoint = null;
      this.journal.checkpoint().catch(() => undefined);
    }, LOCKED_CHECKPOINT_MS);
  }
}
