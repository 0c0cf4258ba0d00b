// What a request may reach while the steps run, and nothing more: the
// running settings, the unlocked vault, the journal, sessions, the approval
// broker, the stores that outlive a request. Every front door (the agent
// socket, the proxy, the ssh-agent) builds one of these for each request
// from the daemon (daemon/request-services.ts); no step sees the daemon's
// state, its admin actions or its timers.
import type { WaitingListener } from '../../shared/protocol';
import type { Config } from '../../shared/config';
import type { JournalEvent } from '../../shared/events';
import type { HttpReply } from '../../shared/protocol';
import type { SealedSecret } from '../vault/sealed-secrets';
import type { Identity } from '../identity/identify';
import type { UnlockedVault } from '../vault/unlocked-vault';
import type { SessionStore } from '../sessions/sessions';
import type { ApprovalBroker, Card } from '../sessions/approvals';
import type { RefusalSummaries } from '../audit/refusal-summary';
import type { PinnedPools } from '../stores/pinned-pools';
import type { SshConnections } from '../stores/ssh-connections';
import type { IdempotencyStore } from '../stores/idempotency';
import type { InFlight, RateBudgets, Slot } from '../stores/budgets';
import type { Runs } from '../stores/runs';
import type { RedactorCache } from '../stores/redactors';
import type { FormerValues } from '../stores/former-values';
import type { TokenCache } from './computed/github-app';

export interface JournalHead {
  seq: number;
  hash: string;
}

// Typed events only (shared/events.ts): nothing else can be journaled.
export interface Recorder {
  // Durable before it resolves: what an intent or a grant needs.
  record(event: JournalEvent): Promise<JournalHead>;
  // Resolves once the entry has its place; durable at the next group commit.
  recordOutcome(event: JournalEvent): Promise<JournalHead>;
}

// What outlives one request.
export interface RequestStores {
  pools: PinnedPools;
  ssh: SshConnections;
  idempotency: IdempotencyStore<HttpReply>;
  budgets: RateBudgets;
  inFlight: InFlight;
  // Placeholders of the proxy front door, bound to process instances.
  runs: Runs;
  // GitHub App installation tokens, until shortly before they expire.
  tokens: TokenCache;
  // Response redactors, one per credential, shared while its needles hold.
  redactors: RedactorCache;
  // The versions credentials held before a change, searched for until lock.
  former: FormerValues;
}

// A credential's secret replaced by the daemon itself (a refresh token the
// authorization server rotated): durable, journaled, before it resolves.
export interface SecretRotation {
  // Replaces the stored secret only while it is still `spent`, the one the
  // rotation was obtained with (refused as busy when it changed meanwhile).
  replace(credential: string, secret: Buffer, spent: SealedSecret): Promise<void>;
}

export interface PipelineServices {
  // Read at each use: a config approved meanwhile applies to the next step.
  config(): Config;
  // The unlocked vault, or the refusal that says what lifts the lock.
  vault(): UnlockedVault;
  // Changes at every lock and unlock: a step that waited compares it.
  lockEpoch(): number;
  // `p`'s result, unless the vault is locked first: then the lock's
  // refusal at once (a wait the lock would not otherwise end, such as DNS).
  untilLocked<T>(p: Promise<T>): Promise<T>;
  journal: Recorder;
  refusals: RefusalSummaries;
  sessions: SessionStore;
  approvals: ApprovalBroker;
  stores: RequestStores;
  secrets: SecretRotation;
}

export interface RequestContext {
  services: PipelineServices;
  identity: Identity;
  // Aborted when the requester goes away: a pending card is withdrawn.
  signal: AbortSignal;
  // Whether the requester has gone already (its connection closed): a
  // request not yet sent is then not sent (refuseIfRequesterLeft).
  requesterLeft?: () => boolean;
  // The request's http.max_concurrent slot, given back while it waits for
  // a human (pending approvals have their own budget, daemon.max_pending).
  slot?: Slot;
  // Told when the request starts to wait for a human and when one approved
  // it (the waiting notice).
  onWaiting?: WaitingListener<Card>;
  // The requester was checked to still run once the request was whole (its
  // body read), and nothing it sends is read after: a session rooted at the
  // requester itself is not checked a second time (sessions.ts, covering).
  requesterConfirmed?: true;
}
