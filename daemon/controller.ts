// The daemon's state and what it is made of: the lock state, the journal
// recorder, the vault write bracket, the lock timers, sessions and
// approvals. The admin actions (daemon/admin/) and the agent server work on
// it; nothing here knows about sockets or framing.
import type { Refusal } from '../shared/errors';
import { LoadedConfig, diffCanonical, loadConfig } from '../shared/config';
import { prewarmKdf } from '../shared/kdf';
import type { JournalEvent } from '../shared/events';
import { LockCause, configNotApproved } from './lock-cause';
import type { CredentialChange, UnlockedVault } from './vault/unlocked-vault';
import { PassphraseGuard } from './passphrase-guard';
import type { Journal } from './audit/journal';
import { SessionStore, Session } from './sessions/sessions';
import { ApprovalBroker } from './sessions/approvals';
import type { Logger } from './logger';
import { LockState } from './lock-state';
import { Recorder } from './recorder';
import { VaultWrites } from './vault-writes';
import { LockTimers } from './lock-timers';
import { Listeners } from './listeners';
import type { AdminContext, Counters, InProgress, TrustChange } from './admin/context';
import { readHeader } from './admin/proof';
import { lock } from './admin/unlock';
import { credList } from './admin/credentials';
import { daemonStatus } from './admin/status';

export interface ControllerOptions {
  config: LoadedConfig;
  configFlag: string | undefined;
  env: NodeJS.ProcessEnv;
  log: Logger;
  journal: Journal;
}

export class Controller implements AdminContext {
  config: LoadedConfig;
  readonly startedAt = new Date();
  readonly state = new LockState();
  readonly journal: Journal;
  readonly recorder: Recorder;
  readonly writes: VaultWrites;
  readonly timers: LockTimers;
  readonly guard = new PassphraseGuard();
  readonly sessions: SessionStore;
  readonly approvals = new ApprovalBroker(() => this.config.config.daemon.max_pending);
  readonly counters: Counters = { agent_requests: 0, refusals: 0, unlocks: 0, unlock_failures: 0, locks: 0 };
  readonly inProgress: InProgress = { unlockJournaling: null, rotatingAuditKey: false, passwd: false };
  readonly credentialChanges = new Listeners<CredentialChange>();
  readonly trustChanges = new Listeners<TrustChange>();
  private readonly sessionEnds = new Listeners<Session>();

  constructor(private readonly opts: ControllerOptions) {
    this.config = opts.config;
    this.journal = opts.journal;
    this.recorder = new Recorder(opts.journal, opts.log, () => this.state.locked);
    this.writes = new VaultWrites({
      record: (p) => this.record(p),
      journal: opts.journal,
      log: opts.log,
      vaultPath: () => this.config.paths.vault,
    });
    this.timers = new LockTimers(
      () => this.config.config.daemon,
      (reason) => lock(this, reason),
    );
    this.sessions = new SessionStore((s, reason) => {
      this.sessionEnds.emit(s);
      this.recorder.bestEffort({ kind: 'session_end', session: s.id, credential: s.credential, reason });
    });
    // The first thing a lock does after wiping the vault: sessions end
    // (journaled) before the other lock listeners run.
    this.state.onLock(() => {
      this.counters.locks += 1;
      this.sessions.endAll('locked');
    });
    const cause = this.causeAtStart();
    if (cause) this.state.cause = cause;
    prewarmKdf();
  }

  // A config already not approved at start is said at once, before anyone
  // tries to unlock. The header read here is not yet authenticated (unlock
  // checks again); it only chooses what a locked daemon says.
  private causeAtStart(): LockCause | null {
    try {
      const changes = diffCanonical(readHeader(this.config.paths.vault).header.approvedConfig, this.config.canonical);
      if (changes.length > 0) return configNotApproved(changes);
    } catch {
      // an unreadable vault is reported by unlock
    }
    return null;
  }

  // Called at every lock: no connection or record outlives the authority
  // behind it.
  onLock(f: () => void): void {
    this.state.onLock(f);
  }

  // Called when a session ends, whatever the reason (expiry, root exit,
  // revoke, lock).
  onSessionEnd(f: (s: Session) => void): void {
    this.sessionEnds.add(f);
  }

  // Called after a credential was updated or removed.
  onCredentialChange(f: (change: CredentialChange) => void): void {
    this.credentialChanges.add(f);
  }

  // Called when the CA list or the DNS servers of the running config change.
  onTrustChange(f: (what: TrustChange) => void): void {
    this.trustChanges.add(f);
  }

  // Journaled (durable before this resolves) and logged; if the journal
  // cannot take it, the action it describes is refused.
  record(payload: JournalEvent): Promise<{ seq: number; hash: string }> {
    return this.recorder.record(payload);
  }

  // Journaled without waiting for its fdatasync (see Recorder).
  recordOutcome(payload: JournalEvent): Promise<{ seq: number; hash: string }> {
    return this.recorder.recordOutcome(payload);
  }

  get locked(): boolean {
    return this.state.locked;
  }

  // Changes at every unlock and every lock: equal epochs before and after an
  // await mean the vault held across it was not locked meanwhile.
  get lockEpoch(): number {
    return this.state.epoch;
  }

  // What a locked daemon refuses with (meaningful only while locked).
  get lockRefusal(): Refusal {
    return this.state.cause.refusal;
  }

  requireUnlocked(): UnlockedVault {
    return this.state.requireUnlocked();
  }

  countAgentRequest(refused: boolean): void {
    this.counters.agent_requests += 1;
    if (refused) this.counters.refusals += 1;
  }

  // An agent request resets the idle timer (SPEC §3 auto_lock).
  touch(): void {
    if (!this.state.locked) this.timers.armAutoLock();
  }

  status(): Record<string, unknown> {
    return daemonStatus(this);
  }

  // The credential list, as `GET /v1/credentials` shows it.
  credList(): Record<string, unknown> {
    return credList(this);
  }

  reloadConfig(): LoadedConfig {
    return loadConfig({ configFlag: this.opts.configFlag, env: this.opts.env });
  }

  // Lock, record the stop, and close the journal (a final checkpoint when
  // the signing key was ever loaded).
  // `drained`: resolves once the requests in flight have been answered
  // (the lock ends their approvals and connections) or a short wait passed.
  async shutdown(reason: string, drained: () => Promise<void> = async () => undefined): Promise<void> {
    lock(this, 'daemon stopped');
    await drained();
    await this.writes.settled();
    try {
      await this.record({ kind: 'daemon_stop', reason });
    } catch {
      // already logged by the journal's failure; stopping goes ahead
    }
    // close() writes the final checkpoint itself.
    this.recorder.cancelCheckpoint();
    await this.journal.close().catch(() => undefined);
  }
}
