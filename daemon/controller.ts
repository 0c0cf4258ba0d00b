// The daemon's state and every admin action on it: locked or unlocked, the
// running config, credentials, timers. Admin and agent servers call in here;
// nothing here knows about sockets or framing.
import { Refusal } from '../shared/errors';
import { ConfigChange, LoadedConfig, diffCanonical, loadConfig } from '../shared/config';
import { changeLines, describeChanges } from '../shared/config-changes';
import { formatDuration } from '../shared/units';
import { LockCause, configNotApproved, lockedBecause, rolledBack } from './lock-cause';
import { parseHeader, readVaultFile, newVaultHeader, VaultHeader } from '../shared/vault-format';
import { deriveKey, prewarmKdf } from '../shared/kdf';
import {
  CredentialDef,
  validateDefinition,
  definitionHash,
  diffDefinitions,
  checkHttpSecret,
  prepareSshSecret,
  summariseTargets,
} from '../shared/credential';
import { formatHead } from '../shared/audit-format';
import type { JournalEvent, VaultWriteEvent } from '../shared/events';
import { ed25519Keypair, sha256hex, wipe } from '../shared/crypto';
import { readFileSync } from 'node:fs';
import { canonicalJson } from '../shared/canonical-json';
import { SigningChange, StoredCredential, UnlockedVault, unlockVaultFile } from './vault/unlocked-vault';
import { checkRollback } from './vault/rollback';
import { PassphraseGuard } from './passphrase-guard';
import type { Journal } from './audit/journal';
import { SessionStore, Session } from './sessions/sessions';
import { ApprovalBroker, ApproverLink, Decision } from './sessions/approvals';
import type { DecideArgs } from '../shared/admin-protocol';
import type { Logger } from './logger';

export interface ControllerOptions {
  config: LoadedConfig;
  configFlag: string | undefined;
  env: NodeJS.ProcessEnv;
  log: Logger;
  journal: Journal;
}

// Settings that name files or sockets the running daemon already holds; a
// change to them needs a restart rather than a reload.
function sameBytes(a: Buffer | null, b: Buffer | null): boolean {
  return a === b || (a !== null && b !== null && a.equals(b));
}

// How soon an entry written while locked is followed by a checkpoint.
const LOCKED_CHECKPOINT_MS = 1000;
const RESTART_KEYS = [
  'daemon.home',
  'daemon.agent_socket',
  'daemon.admin_socket',
  'daemon.vault',
  'daemon.audit_log',
  'daemon.agent_socket_mode',
  'daemon.agent_socket_group',
  'daemon.log_level',
  'daemon.log_format',
];

export class Controller {
  config: LoadedConfig;
  private vault: UnlockedVault | null = null;
  private lockCause: LockCause = lockedBecause('started locked');
  private readonly guard = new PassphraseGuard();
  private readonly startedAt = new Date();
  private unlockedAt: Date | null = null;
  private autoLockTimer: NodeJS.Timeout | null = null;
  private maxUnlockTimer: NodeJS.Timeout | null = null;
  // When those timers fire (ms since the epoch), for `postern status`.
  private autoLockAt: number | null = null;
  private maxUnlockAt: number | null = null;
  private readonly counters = { agent_requests: 0, refusals: 0, unlocks: 0, unlock_failures: 0, locks: 0 };
  private readonly log: Logger;
  private readonly journal: Journal;
  readonly sessions: SessionStore;
  readonly approvals = new ApprovalBroker(() => this.config.config.daemon.max_pending);
  // Vault writes one at a time, each with its journal entries around it.
  private vaultWrites: Promise<unknown> = Promise.resolve();
  private rotatingAuditKey = false;
  // Set while an unlock journals its success, so a second one waits for it.
  private unlockJournaling: Promise<void> | null = null;

  constructor(private readonly opts: ControllerOptions) {
    this.config = opts.config;
    this.log = opts.log;
    this.journal = opts.journal;
    this.sessions = new SessionStore((s, reason) => {
      for (const f of this.sessionEndListeners) f(s);
      this.recordBestEffort({ kind: 'session_end', session: s.id, credential: s.credential, reason });
    });
    this.lockCause = this.causeAtStart();
    prewarmKdf();
  }

  // A config already not approved at start is said at once, before anyone
  // tries to unlock. The header read here is not yet authenticated (unlock
  // checks again); it only chooses what a locked daemon says.
  private causeAtStart(): LockCause {
    try {
      const changes = diffCanonical(this.readHeader().header.approvedConfig, this.config.canonical);
      if (changes.length > 0) return configNotApproved(changes);
    } catch {
      // an unreadable vault is reported by unlock
    }
    return this.lockCause;
  }

  private lockListeners: (() => void)[] = [];
  private sessionEndListeners: ((s: Session) => void)[] = [];
  private credentialListeners: ((name: string) => void)[] = [];
  private trustListeners: ((what: { ca: boolean; dns: boolean }) => void)[] = [];

  // Called at every lock: no connection or record outlives the authority
  // behind it.
  onLock(f: () => void): void {
    this.lockListeners.push(f);
  }

  // Called when a session ends, whatever the reason (expiry, root exit,
  // revoke, lock).
  onSessionEnd(f: (s: Session) => void): void {
    this.sessionEndListeners.push(f);
  }

  // Called after a credential was updated or removed.
  onCredentialChange(f: (name: string) => void): void {
    this.credentialListeners.push(f);
  }

  // Every decision goes to the journal (durable before this resolves) and to
  // the log. Payloads carry names, codes, counts and hashes, never secrets.
  // If the journal cannot take it, the action it describes is refused.
  async record(payload: JournalEvent): Promise<{ seq: number; hash: string }> {
    this.log.info(payload, payload.kind);
    const head = await this.journal.append(payload);
    this.checkpointSoonIfLocked();
    return head;
  }

  // While locked nothing else brings the next checkpoint (no request is
  // served), so an entry written then is signed within a second: `postern
  // lock` followed by refused requests still leaves a journal that `audit
  // verify` accepts (SPEC §9). Without the signing key (not yet unlocked
  // since start) the journal writes none, and the tail stays unsigned.
  private lockedCheckpoint: NodeJS.Timeout | null = null;
  private checkpointSoonIfLocked(): void {
    if (this.vault !== null || this.lockedCheckpoint !== null) return;
    this.lockedCheckpoint = setTimeout(() => {
      this.lockedCheckpoint = null;
      this.journal.checkpoint().catch(() => undefined);
    }, LOCKED_CHECKPOINT_MS);
  }

  // A request's outcome: the reply waits only for the entry's place in the
  // journal (its seq), not for its fdatasync, which the next group commit
  // does. The intent before it was durable before anything was sent; a
  // crash in between leaves an intent without its outcome, as a crash
  // during the request would.
  async recordOutcome(payload: JournalEvent): Promise<{ seq: number; hash: string }> {
    this.log.info(payload, payload.kind);
    const { assigned, durable } = this.journal.appendSoon(payload);
    void assigned.then(
      () => this.checkpointSoonIfLocked(),
      () => undefined,
    );
    durable.catch((e: unknown) => {
      this.log.error(
        { event: 'audit_write_failed', kind: payload.kind, code: e instanceof Refusal ? e.code : (e as Error)?.name },
        'could not journal an outcome',
      );
    });
    return assigned;
  }

  // For events that must not block what they describe (lock, stop): a
  // journal failure is logged, and the action goes ahead.
  private recordBestEffort(payload: JournalEvent): void {
    this.record(payload).catch((e: unknown) => {
      this.log.error(
        { event: 'audit_write_failed', kind: payload.kind, code: e instanceof Refusal ? e.code : (e as Error)?.name },
        'could not journal an event',
      );
    });
  }

  // A vault write: the event describing it is journaled first (its head is
  // stored in the vault), then the vault is written, then the write itself
  // is journaled with the new generation and the file's hash.
  private writeVault(
    vault: UnlockedVault,
    payload: VaultWriteEvent,
    change: Parameters<UnlockedVault['commit']>[1],
    opts?: Parameters<UnlockedVault['commit']>[2],
  ): Promise<void> {
    const run = this.vaultWrites.then(async () => {
      const head = await this.record({ ...payload, generation: vault.generation + 1 });
      try {
        vault.commit(formatHead(head.seq, head.hash), change, opts);
      } catch (e) {
        // The journal holds the intent without a vault entry after it, which
        // is what a write that did not happen looks like at the next unlock.
        const errno = e instanceof Refusal ? e.detail?.['errno'] : (e as NodeJS.ErrnoException)?.code;
        this.log.error(
          {
            event: 'vault_write_failed',
            kind: payload.kind,
            path: this.config.paths.vault,
            errno,
            code: e instanceof Refusal ? e.code : (e as Error)?.name,
          },
          'the vault could not be written',
        );
        throw e;
      }
      await this.journalVaultWrite(vault.generation);
    });
    this.vaultWrites = run.catch(() => undefined);
    return run;
  }

  private async journalVaultWrite(generation: number): Promise<void> {
    const hash = sha256hex(readFileSync(this.config.paths.vault));
    try {
      await this.journal.appendVault(generation, hash);
    } catch (e) {
      // The vault was written; at the next unlock the missing record is
      // recognised (vault one generation ahead of its journal) and restored.
      this.log.error(
        {
          event: 'audit_write_failed',
          kind: 'vault',
          generation,
          code: e instanceof Refusal ? e.code : (e as Error)?.name,
        },
        'vault written but not journaled',
      );
    }
  }

  // Changes at every unlock and every lock.
  private epoch = 0;
  get lockEpoch(): number {
    return this.epoch;
  }

  get locked(): boolean {
    return this.vault === null;
  }

  countAgentRequest(refused: boolean): void {
    this.counters.agent_requests += 1;
    if (refused) this.counters.refusals += 1;
  }

  // An agent request resets the idle timer (SPEC §3 auto_lock).
  touch(): void {
    if (this.vault) this.armAutoLock();
  }

  // Locked: refused with what lifts the lock (vault_locked, or
  // config_not_approved / rollback_detected when unlocking alone cannot).
  requireUnlocked(): UnlockedVault {
    if (!this.vault) throw this.lockCause.refusal;
    return this.vault;
  }

  status(): Record<string, unknown> {
    return {
      locked: this.locked,
      lock_reason: this.locked ? this.lockCause.text : null,
      lock_code: this.locked ? this.lockCause.refusal.code : null,
      pid: process.pid,
      started_at: this.startedAt.toISOString(),
      unlocked_at: this.unlockedAt ? this.unlockedAt.toISOString() : null,
      config_path: this.config.configPath,
      config_hash: this.config.hash,
      vault_generation: this.vault ? this.vault.generation : null,
      audit_head: formatHead(this.journal.head().seq, this.journal.head().hash),
      credentials: this.vault ? this.vault.credentials().length : null,
      sessions: this.sessions.list().map(describeSession),
      pending_approvals: this.approvals
        .list()
        .map((c) => ({ id: c.id, credential: c.credential, pid: c.process.pid, created_at: c.created_at })),
      approvers: this.approvals.approverCount,
      auto_lock:
        this.autoLockAt === null
          ? null
          : { after: formatDuration(this.config.config.daemon.auto_lock), at: new Date(this.autoLockAt).toISOString() },
      unlock_max:
        this.maxUnlockAt === null
          ? null
          : {
              after: formatDuration(this.config.config.daemon.unlock_max),
              at: new Date(this.maxUnlockAt).toISOString(),
            },
      counters: { ...this.counters },
    };
  }

  // Re-read the config from disk.
  private reloadConfig(): LoadedConfig {
    return loadConfig({ configFlag: this.opts.configFlag, env: this.opts.env });
  }

  // What the running daemon takes of `fresh`: everything but the settings
  // that cannot change while it runs (sockets, home, vault and journal
  // paths, log level), which keep their running values until the next start
  // and are named in `waiting`. The hash and canonical form are fresh's: it
  // is the approved config.
  private adoptable(fresh: LoadedConfig): { config: LoadedConfig; waiting: string[] } {
    const running = this.config;
    const waiting = diffCanonical(running.canonical, fresh.canonical)
      .map((c) => c.path)
      .filter((p) => RESTART_KEYS.includes(p));
    if (waiting.length === 0) return { config: fresh, waiting };
    const daemon = { ...fresh.config.daemon } as Record<string, unknown>;
    for (const p of waiting) {
      const key = p.slice('daemon.'.length);
      daemon[key] = (running.config.daemon as unknown as Record<string, unknown>)[key];
    }
    const config = { ...fresh.config, daemon: daemon as unknown as LoadedConfig['config']['daemon'] };
    return { config: { ...fresh, config, home: running.home, paths: running.paths }, waiting };
  }

  // Installs an adopted config. Connections made under another CA list or
  // other DNS servers are retired, so a removed CA is never trusted again.
  private install(next: LoadedConfig): void {
    const before = this.config;
    this.config = next;
    const ca = !sameBytes(before.caFileContents, next.caFileContents);
    const dns = canonicalJson(before.config.http.dns_servers) !== canonicalJson(next.config.http.dns_servers);
    if (ca || dns) for (const f of this.trustListeners) f({ ca, dns });
  }

  // Called when the CA list or the DNS servers of the running config change.
  onTrustChange(f: (what: { ca: boolean; dns: boolean }) => void): void {
    this.trustListeners.push(f);
  }

  private readHeader(): { file: Buffer; header: VaultHeader } {
    const file = readVaultFile(this.config.paths.vault);
    return { file, header: parseHeader(file).header };
  }

  private configMismatch(header: VaultHeader, fresh: LoadedConfig): Refusal | null {
    if (header.approvedConfig === fresh.canonical) return null;
    const changes = diffCanonical(header.approvedConfig, fresh.canonical);
    // Only settings added since the approval, at their defaults: the same config.
    if (changes.length === 0) return null;
    return new Refusal(
      'config_not_approved',
      `the config changed since it was approved (${describeChanges(changes)}); review it and run \`postern config approve\`, then \`postern unlock\``,
      { changes },
    );
  }

  async unlock(passphrase: Buffer, acceptRollback = false): Promise<Record<string, unknown>> {
    try {
      return await this.unlockOnce(passphrase, acceptRollback);
    } catch (e) {
      // A wrong passphrase is already recorded by the guard.
      if (e instanceof Refusal && e.code !== 'wrong_passphrase')
        this.recordBestEffort({ kind: 'unlock', outcome: e.code });
      throw e;
    } finally {
      // While locked, keep a derivation worker ready for the next attempt.
      if (!this.vault) prewarmKdf();
    }
  }

  private async unlockOnce(passphrase: Buffer, acceptRollback: boolean): Promise<Record<string, unknown>> {
    if (this.vault) return { already_unlocked: true, ...this.status() };
    const fresh = this.reloadConfig();
    let opened: UnlockedVault;
    try {
      opened = await this.openWithPassphrase(passphrase);
    } catch (e) {
      if (e instanceof Refusal && e.code === 'wrong_passphrase') this.counters.unlock_failures += 1;
      throw e;
    }
    // Re-check the header the vault actually decrypted with (it is
    // authenticated), not the one read before derivation.
    const mismatch = this.configMismatch(opened.header, fresh);
    if (mismatch) {
      opened.wipe();
      this.lockCause = configNotApproved(mismatch.detail?.['changes'] as ConfigChange[]);
      throw mismatch;
    }
    const verdict = await checkRollback(opened, this.journal);
    if (!verdict.ok && !acceptRollback) {
      opened.wipe();
      this.lockCause = rolledBack(verdict.problem);
      throw new Refusal(
        'rollback_detected',
        `${verdict.problem}; restore the matching vault and journal, or, if this state is what you want, run \`postern unlock --accept-rollback\``,
      );
    }
    let signing: SigningChange | null;
    try {
      signing = await this.loadSigningKey(opened);
    } catch (e) {
      opened.wipe();
      this.lockCause = lockedBecause('audit signing key does not match the journal');
      throw e;
    }
    // Another unlock may be journaling its success: wait for it.
    while (this.unlockJournaling) await this.unlockJournaling;
    if (this.vault) {
      // Another unlock won the race while this one derived its key.
      opened.wipe();
      return { already_unlocked: true, ...this.status() };
    }
    // The unlock is journaled before the vault is open to anyone: a journal
    // that cannot take the entry keeps the daemon locked.
    let journaled!: () => void;
    this.unlockJournaling = new Promise<void>((resolve) => (journaled = resolve));
    try {
      await this.record({ kind: 'unlock', outcome: 'ok', generation: opened.generation });
    } catch (e) {
      opened.wipe();
      this.lockCause = lockedBecause('the audit journal could not record the unlock');
      throw e;
    } finally {
      this.unlockJournaling = null;
      journaled();
    }
    const adopted = this.adoptable(fresh);
    this.install(adopted.config);
    this.vault = opened;
    this.epoch += 1;
    this.unlockedAt = new Date();
    this.counters.unlocks += 1;
    this.armAutoLock();
    this.armMaxUnlock();
    if (verdict.ok && verdict.missingVaultEntry) await this.journalVaultWrite(opened.generation);
    if (signing) {
      // A key rotation was cut short: finish it, or forget a key the journal never took.
      const step = signing.kind === 'promote' ? 'completed at unlock' : 'abandoned at unlock';
      await this.writeVault(
        opened,
        { kind: 'audit_key_rotation', step, sign_pub: await this.journal.keyInForce() },
        () => undefined,
        { signing },
      );
    }
    if (!verdict.ok) {
      // Accepted by a human: record what was accepted, then write the vault
      // again so the vault and the journal vouch for each other from here on.
      await this.writeVault(opened, { kind: 'rollback_accepted', problem: verdict.problem }, () => undefined);
    }
    return this.status();
  }

  // The signing key stays with the journal until the daemon exits, so that
  // checkpoints can be signed while locked (SPEC §9). It is the key the
  // journal has in force: the vault's current key or, after a rotation cut
  // short once the journal had taken the new key, the key being rotated in.
  // Returns what the vault must do about a rotation left pending.
  private async loadSigningKey(vault: UnlockedVault): Promise<SigningChange | null> {
    const next = vault.auditNextPublicKey;
    const useNext = next !== null && next === (await this.journal.keyInForce());
    await vault.withAuditSigningKey((key) => this.journal.setSigningKey(key), useNext ? 'next' : 'current');
    if (next === null) return null;
    return useNext ? { kind: 'promote' } : { kind: 'abandon' };
  }

  // A new audit signing key. Three durable steps, each safe to be cut short
  // (the next unlock completes or abandons the change): the vault stores the
  // new key beside the current one; the journal names the new key in a
  // signer entry vouched for by a checkpoint of the current key; the vault
  // makes the new key the current one and forgets the old.
  async rotateAuditKey(passphrase: Buffer): Promise<Record<string, unknown>> {
    const vault = await this.prove(passphrase);
    if (this.rotatingAuditKey)
      throw new Refusal('busy', 'an audit key rotation is already running; wait for it to finish');
    this.rotatingAuditKey = true;
    const fresh = ed25519Keypair();
    try {
      const previous = await this.journal.keyInForce();
      const key = fresh.publicKey.toString('base64');
      await this.writeVault(vault, { kind: 'audit_key_rotation', step: 'prepared', sign_pub: key }, () => undefined, {
        signing: { kind: 'prepare', secret: fresh.privateKey, public: key },
      });
      const checkpoint = await this.journal.changeSigner(fresh.privateKey);
      await this.writeVault(
        vault,
        {
          kind: 'audit_key_rotation',
          step: 'completed',
          previous_sign_pub: previous,
          sign_pub: key,
          signer_seq: checkpoint.seq - 1,
        },
        () => undefined,
        { signing: { kind: 'promote' } },
      );
      return {
        audit_public_key: key,
        previous_audit_public_key: previous,
        signer_seq: checkpoint.seq - 1,
        checkpoint: formatHead(checkpoint.seq, checkpoint.hash),
      };
    } finally {
      wipe(fresh.privateKey);
      this.rotatingAuditKey = false;
    }
  }

  lock(reason: string): { was_locked: boolean } {
    const was = this.vault === null;
    this.clearTimers();
    if (this.vault) {
      this.vault.wipe();
      this.vault = null;
      this.epoch += 1;
      this.unlockedAt = null;
      this.counters.locks += 1;
      this.lockCause = lockedBecause(reason);
      this.sessions.endAll('locked');
      for (const f of this.lockListeners) f();
      this.approvals.cancelAll(
        new Refusal(
          'vault_locked',
          'the vault was locked while this request waited for approval; a human must run `postern unlock`',
        ),
        `the vault was locked (${reason})`,
      );
      this.recordBestEffort({ kind: 'lock', reason });
      this.journal.checkpoint().catch(() => undefined);
      prewarmKdf();
    }
    return { was_locked: was };
  }

  private clearTimers(): void {
    if (this.autoLockTimer) clearTimeout(this.autoLockTimer);
    if (this.maxUnlockTimer) clearTimeout(this.maxUnlockTimer);
    this.autoLockTimer = null;
    this.maxUnlockTimer = null;
    this.autoLockAt = null;
    this.maxUnlockAt = null;
  }

  private armAutoLock(): void {
    if (this.autoLockTimer) clearTimeout(this.autoLockTimer);
    const ms = clampTimer(this.config.config.daemon.auto_lock);
    this.autoLockTimer = setTimeout(() => this.lock(`auto_lock: no agent request for ${ms} ms`), ms);
    this.autoLockTimer.unref();
    this.autoLockAt = Date.now() + ms;
  }

  private armMaxUnlock(): void {
    const ms = clampTimer(this.config.config.daemon.unlock_max);
    this.maxUnlockTimer = setTimeout(() => this.lock(`unlock_max: unlocked for ${ms} ms`), ms);
    this.maxUnlockTimer.unref();
    this.maxUnlockAt = Date.now() + ms;
  }

  // Open the vault file with a passphrase, through the guard (one check at a
  // time, growing delay after failures). Used by unlock and by approvals
  // made while locked.
  private async openWithPassphrase(passphrase: Buffer): Promise<UnlockedVault> {
    const { file, header } = this.readHeader();
    return this.guarded(this.vault ? 'proof' : 'unlock', () =>
      unlockVaultFile(this.config.paths.vault, file, header, passphrase).catch((e: unknown) => {
        if (e instanceof Refusal && e.code === 'wrong_passphrase') return false as const;
        throw e;
      }),
    );
  }

  private async guarded<T>(what: string, check: () => Promise<T | false>): Promise<T> {
    try {
      return await this.guard.run(check);
    } catch (e) {
      if (e instanceof Refusal && e.code === 'wrong_passphrase') {
        this.recordBestEffort({
          kind: 'passphrase_refused',
          during: what,
          consecutive: this.guard.consecutiveFailures,
        });
      }
      throw e;
    }
  }

  // A widening action: prove the passphrase against the unlocked vault.
  private async prove(passphrase: Buffer): Promise<UnlockedVault> {
    const vault = this.requireUnlocked();
    await this.guarded('proof', async () => (await vault.verifyPassphrase(passphrase)) || false);
    if (this.vault !== vault)
      throw new Refusal('vault_locked', 'the vault was locked while the passphrase was checked; unlock and try again');
    return vault;
  }

  configDiff(): Record<string, unknown> {
    const current = loadConfig({ configFlag: this.opts.configFlag, env: this.opts.env });
    const { header } = this.readHeader();
    const changes = diffCanonical(header.approvedConfig, current.canonical);
    return {
      config_path: current.configPath,
      current_hash: current.hash,
      approved: changes.length === 0,
      changes,
      lines: changeLines(changes),
      summary: describeChanges(changes),
    };
  }

  // Approve the config now on disk. `expectedHash` is what the human was
  // shown, so a file changed between showing and approving is not approved.
  async configApprove(passphrase: Buffer, expectedHash: string): Promise<Record<string, unknown>> {
    const current = loadConfig({ configFlag: this.opts.configFlag, env: this.opts.env });
    if (current.hash !== expectedHash) {
      throw new Refusal(
        'conflict',
        'the config changed while it was being reviewed; run `postern config approve` again',
      );
    }
    const approve = (vault: UnlockedVault): Promise<void> =>
      this.writeVault(vault, { kind: 'config_approve', config_hash: current.hash }, () => undefined, {
        approvedConfig: current.canonical,
      });
    // On an unlocked daemon the approved config takes effect at once, in
    // full, except what waits for the next start (named in the reply).
    let waiting: string[] = [];
    if (this.vault) {
      const vault = await this.prove(passphrase);
      const adopted = this.adoptable(current);
      await approve(vault);
      this.install(adopted.config);
      waiting = adopted.waiting;
      this.armAutoLock();
    } else {
      const opened = await this.openWithPassphrase(passphrase);
      try {
        await approve(opened);
      } finally {
        opened.wipe();
      }
      // What kept the daemon locked is lifted; the vault itself is not open.
      if (this.lockCause.refusal.code === 'config_not_approved')
        this.lockCause = lockedBecause('the config was approved; waiting for `postern unlock`');
      waiting = this.adoptable(current).waiting;
    }
    return {
      approved_hash: current.hash,
      locked: this.locked,
      applied: this.locked ? 'at unlock' : 'now',
      restart_required: waiting,
    };
  }

  async passwd(passphrase: Buffer, newPassphrase: Buffer): Promise<Record<string, unknown>> {
    if (newPassphrase.length < 12)
      throw new Refusal('bad_request', 'the new passphrase is too short (at least 12 characters); choose a longer one');
    const vault = await this.prove(passphrase);
    const fresh = newVaultHeader(
      { opslimit: vault.header.opslimit, memlimit: vault.header.memlimit },
      vault.header.approvedConfig,
    );
    const key = await deriveKey(newPassphrase, fresh.salt, fresh.opslimit, fresh.memlimit);
    await this.writeVault(vault, { kind: 'passwd' }, () => undefined, { newKey: { key, header: fresh } });
    return { generation: vault.generation };
  }

  private checkSecret(def: CredentialDef, secret: Buffer): void {
    if (def.kind === 'http') checkHttpSecret(secret);
    else {
      const prepared = prepareSshSecret(def, secret);
      if (prepared !== secret) prepared.fill(0);
    }
  }

  async credAdd(passphrase: Buffer, definition: unknown, secret: Buffer): Promise<Record<string, unknown>> {
    const def = validateDefinition(definition);
    this.checkSecret(def, secret);
    const vault = await this.prove(passphrase);
    if (vault.credential(def.name))
      throw new Refusal(
        'conflict',
        `a credential named "${def.name}" exists; use \`postern cred update ${def.name}\` or choose another name`,
      );
    const now = new Date().toISOString();
    const hash = definitionHash(def);
    const sealed = vault.sealSecret(secret);
    await this.writeVault(
      vault,
      { kind: 'cred_add', credential: def.name, credential_kind: def.kind, definition_hash: hash },
      (m) =>
        m.set(def.name, {
          entry: {
            name: def.name,
            kind: def.kind,
            definition: { ...def },
            definition_hash: hash,
            created_at: now,
            updated_at: now,
          },
          secret: sealed,
          definition: def,
          problem: null,
        }),
    );
    return { name: def.name, definition_hash: hash, generation: vault.generation };
  }

  async credUpdate(
    passphrase: Buffer,
    name: string,
    definition: unknown,
    secret: Buffer | undefined,
  ): Promise<Record<string, unknown>> {
    const def = validateDefinition(definition);
    if (def.name !== name)
      throw new Refusal(
        'bad_request',
        `the definition is named "${def.name}" but the command names "${name}"; renaming is not supported: add a new credential and remove the old one`,
      );
    const existing = this.requireUnlocked().credential(name);
    if (!existing)
      throw new Refusal('not_found', `${this.requireUnlocked().noSuchCredential(name)}; see \`postern cred list\``);
    if (existing.entry.kind !== def.kind)
      throw new Refusal(
        'bad_request',
        `"${name}" is an ${existing.entry.kind} credential; its kind cannot change: add a new credential instead`,
      );
    if (secret) this.checkSecret(def, secret);
    else if (def.kind === 'ssh' && (existing.entry.definition as { auth?: string }).auth !== def.auth) {
      throw new Refusal('bad_request', `changing auth of "${name}" needs a new secret; pass --secret-file`);
    }
    const vault = await this.prove(passphrase);
    const current = vault.credential(name);
    if (!current) throw new Refusal('not_found', `no credential named "${name}"; see \`postern cred list\``);
    const hash = definitionHash(def);
    const sealed = secret ? vault.sealSecret(secret) : current.secret;
    const changes = current.definition ? diffDefinitions(current.definition, def) : [];
    await this.writeVault(
      vault,
      {
        kind: 'cred_update',
        credential: name,
        definition_hash: hash,
        previous_definition_hash: current.entry.definition_hash,
        secret_replaced: Boolean(secret),
      },
      (m) =>
        m.set(name, {
          entry: {
            ...current.entry,
            definition: { ...def },
            definition_hash: hash,
            updated_at: new Date().toISOString(),
          },
          secret: sealed,
          definition: def,
          problem: null,
        }),
    );
    for (const f of this.credentialListeners) f(name);
    return { name, definition_hash: hash, secret_replaced: Boolean(secret), changes, generation: vault.generation };
  }

  async credRemove(passphrase: Buffer, name: string): Promise<Record<string, unknown>> {
    if (!this.requireUnlocked().credential(name))
      throw new Refusal('not_found', `${this.requireUnlocked().noSuchCredential(name)}; see \`postern cred list\``);
    const vault = await this.prove(passphrase);
    const current = vault.credential(name);
    if (!current) throw new Refusal('not_found', `no credential named "${name}"; see \`postern cred list\``);
    await this.writeVault(
      vault,
      {
        kind: 'cred_rm',
        credential: name,
        credential_kind: current.entry.kind,
        definition_hash: current.entry.definition_hash,
      },
      (m) => m.delete(name),
    );
    this.sessions.endForCredential(name, 'credential_removed');
    for (const f of this.credentialListeners) f(name);
    return { name, removed: true, generation: vault.generation };
  }

  credList(): Record<string, unknown> {
    const vault = this.requireUnlocked();
    return { credentials: vault.credentials().map((c) => describeCredential(c)) };
  }

  credShow(name: string): Record<string, unknown> {
    const c = this.requireUnlocked().credential(name);
    if (!c)
      throw new Refusal('not_found', `${this.requireUnlocked().noSuchCredential(name)}; see \`postern cred list\``);
    return { ...describeCredential(c), definition: c.entry.definition };
  }

  // The approver proves the passphrase once; its connection then receives
  // cards. Works locked too (the proof then opens the vault file briefly).
  async attachApprover(passphrase: Buffer, link: ApproverLink): Promise<Record<string, unknown>> {
    if (this.vault) await this.prove(passphrase);
    else (await this.openWithPassphrase(passphrase)).wipe();
    this.approvals.attach(link);
    this.recordBestEffort({ kind: 'approver_attach', approver: link.id });
    return { attached: true, approver: link.id, pending: this.approvals.list().length };
  }

  detachApprover(id: string): void {
    this.approvals.detach(id);
  }

  decide(args: Record<string, unknown>): Record<string, unknown> {
    const a = args as Partial<DecideArgs>;
    if (typeof a.id !== 'string') throw new Refusal('bad_request', 'approval.decide needs an id');
    let decision: Decision;
    if (a.decision === 'deny') decision = { kind: 'deny' };
    else if (a.decision === 'once') decision = { kind: 'once' };
    else if (a.decision === 'session' && typeof a.root_key === 'string')
      decision = { kind: 'session', rootKey: a.root_key };
    else throw new Refusal('bad_request', 'decision must be deny, once, or session with a root_key');
    const taken = this.approvals.decide(a.id, decision);
    return { id: a.id, taken };
  }

  sessionsList(): Record<string, unknown> {
    return { sessions: this.sessions.list().map(describeSession) };
  }

  sessionsRevoke(args: Record<string, unknown>): Record<string, unknown> {
    if (args['all'] === true) return { revoked: this.sessions.endAll('revoked') };
    const id = args['id'];
    if (typeof id !== 'string' || !this.sessions.revoke(id))
      throw new Refusal('not_found', `no session ${JSON.stringify(id)}; see \`postern sessions\``);
    return { revoked: 1 };
  }

  // Lock, record the stop, and close the journal (a final checkpoint when
  // the signing key was ever loaded).
  async shutdown(reason: string): Promise<void> {
    this.lock('daemon stopped');
    await this.vaultWrites;
    try {
      await this.record({ kind: 'daemon_stop', reason });
    } catch {
      // already logged by the journal's failure; stopping goes ahead
    }
    // close() writes the final checkpoint itself.
    if (this.lockedCheckpoint) clearTimeout(this.lockedCheckpoint);
    this.lockedCheckpoint = null;
    await this.journal.close().catch(() => undefined);
  }
}

export function describeCredential(c: StoredCredential): Record<string, unknown> {
  const { entry, definition: def } = c;
  return {
    name: entry.name,
    kind: entry.kind,
    description: def?.description ?? '',
    // A definition that no longer validates shows no targets, and says why.
    ...(def ? { targets: summariseTargets(def) } : { targets: [], problem: c.problem }),
    definition_hash: entry.definition_hash,
    created_at: entry.created_at,
    updated_at: entry.updated_at,
  };
}

// setTimeout holds at most 2^31-1 ms (~24.8 days); longer waits fire at once.
function clampTimer(ms: number): number {
  return Math.min(ms, 2 ** 31 - 1);
}

export function describeSession(s: Session): Record<string, unknown> {
  return {
    id: s.id,
    credential: s.credential,
    root: { pid: s.root.pid, exe: s.root.exe, cmdline: s.root.cmdline, key: s.root.key },
    created_at: new Date(s.createdAt).toISOString(),
    expires_at: new Date(s.expiresAt).toISOString(),
  };
}
