// Locked or unlocked: the open vault (or none), why the daemon is locked,
// and an epoch that changes at every unlock and every lock. Code that awaits
// while holding the vault compares epochs afterwards: a changed epoch means
// the vault it holds was locked (and wiped) meanwhile.
import type { UnlockedVault } from './vault/unlocked-vault';
import { LockCause, lockedBecause } from './lock-cause';
import { Listeners } from './listeners';

export class LockState {
  private vault: UnlockedVault | null = null;
  private why: LockCause = lockedBecause('started locked');
  private count = 0;
  private asked = 0;
  private openedAt: Date | null = null;
  private readonly lockListeners = new Listeners<void>();

  get epoch(): number {
    return this.count;
  }

  // Locks a human asked for (`postern lock`), counted whether or not the
  // daemon was unlocked: an unlock that began deriving its key before one
  // must not open the vault after it.
  get locksAsked(): number {
    return this.asked;
  }

  lockAsked(): void {
    this.asked += 1;
  }

  get locked(): boolean {
    return this.vault === null;
  }

  // The open vault, or null while locked.
  get current(): UnlockedVault | null {
    return this.vault;
  }

  get unlockedAt(): Date | null {
    return this.openedAt;
  }

  // What a locked daemon says (meaningful only while locked).
  get cause(): LockCause {
    return this.why;
  }

  set cause(cause: LockCause) {
    this.why = cause;
  }

  // Locked: refused with what lifts the lock (vault_locked, or
  // config_not_approved / rollback_detected when unlocking alone cannot).
  requireUnlocked(): UnlockedVault {
    if (!this.vault) throw this.why.refusal;
    return this.vault;
  }

  open(vault: UnlockedVault): void {
    this.vault = vault;
    this.openedAt = new Date();
    this.count += 1;
  }

  // Wipes the vault and tells the lock listeners; false when already locked.
  close(reason: string): boolean {
    if (!this.vault) return false;
    this.vault.wipe();
    this.vault = null;
    this.openedAt = null;
    this.why = lockedBecause(reason);
    this.count += 1;
    this.lockListeners.emit();
    return true;
  }

  // Called at every lock: no connection or record outlives the authority
  // behind it.
  onLock(f: () => void): void {
    this.lockListeners.add(f);
  }
}
