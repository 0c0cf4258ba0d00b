// What the admin actions work on: the daemon's state and its parts, as the
// controller holds them. Nothing here knows about sockets or framing.
import type { LoadedConfig } from '../../shared/config';
import type { Journal } from '../audit/journal';
import type { SessionStore } from '../sessions/sessions';
import type { ApprovalBroker } from '../sessions/approvals';
import type { PassphraseGuard } from '../passphrase-guard';
import type { LockState } from '../lock-state';
import type { Recorder } from '../recorder';
import type { VaultWrites } from '../vault-writes';
import type { LockTimers } from '../lock-timers';
import type { Listeners } from '../listeners';
import type { CredentialChange } from '../vault/unlocked-vault';

export interface Counters {
  agent_requests: number;
  refusals: number;
  unlocks: number;
  unlock_failures: number;
  locks: number;
}

export interface TrustChange {
  ca: boolean;
  dns: boolean;
}

// Admin actions that must not overlap.
export interface InProgress {
  // Set while an unlock journals its success, so a second one waits for it.
  unlockJournaling: Promise<void> | null;
  rotatingAuditKey: boolean;
  passwd: boolean;
}

export interface AdminContext {
  // The running config; replaced as a whole when a new one is adopted.
  config: LoadedConfig;
  readonly startedAt: Date;
  readonly state: LockState;
  readonly recorder: Recorder;
  readonly writes: VaultWrites;
  readonly timers: LockTimers;
  readonly journal: Journal;
  readonly guard: PassphraseGuard;
  readonly sessions: SessionStore;
  readonly approvals: ApprovalBroker;
  readonly counters: Counters;
  readonly inProgress: InProgress;
  // Told after a credential was updated or removed.
  readonly credentialChanges: Listeners<CredentialChange>;
  // Told when the CA list or the DNS servers of the running config change.
  readonly trustChanges: Listeners<TrustChange>;
  // The config as it is now on disk.
  reloadConfig(): LoadedConfig;
  status(): Record<string, unknown>;
}
