// The two timers that lock an unlocked daemon: auto_lock (idle since the
// last agent request) and unlock_max (unlocked this long, whatever the
// traffic). SPEC §3.
import type { Config } from '../shared/config';
import { formatDuration } from '../shared/units';

// setTimeout holds at most 2^31-1 ms (~24.8 days); longer waits fire at once.
function clampTimer(ms: number): number {
  return Math.min(ms, 2 ** 31 - 1);
}

// The timers run on the monotonic clock, which stops while the machine is
// suspended: a laptop that slept past unlock_max woke unlocked. So the
// wall-clock deadlines are looked at this often too (two-clocks.ts); a wall
// clock stepped back cannot delay the timers themselves.
const WALL_CHECK_MS = 5000;

export class LockTimers {
  private autoLockTimer: NodeJS.Timeout | null = null;
  private maxUnlockTimer: NodeJS.Timeout | null = null;
  private wallCheck: NodeJS.Timeout | null = null;
  // When those timers fire (ms since the epoch), for `postern status`.
  private autoLockAt: number | null = null;
  private maxUnlockAt: number | null = null;

  constructor(
    private readonly settings: () => Config['daemon'],
    private readonly lock: (reason: string) => void,
  ) {}

  clear(): void {
    if (this.autoLockTimer) clearTimeout(this.autoLockTimer);
    if (this.maxUnlockTimer) clearTimeout(this.maxUnlockTimer);
    if (this.wallCheck) clearInterval(this.wallCheck);
    this.autoLockTimer = null;
    this.maxUnlockTimer = null;
    this.wallCheck = null;
    this.autoLockAt = null;
    this.maxUnlockAt = null;
  }

  // (Re)starts the idle timer.
  armAutoLock(): void {
    if (this.autoLockTimer) clearTimeout(this.autoLockTimer);
    const ms = clampTimer(this.settings().auto_lock);
    this.autoLockTimer = setTimeout(() => this.lock(`auto_lock: no agent request for ${ms} ms`), ms);
    this.autoLockTimer.unref();
    this.autoLockAt = Date.now() + ms;
    this.checkWallClock();
  }

  armMaxUnlock(): void {
    const ms = clampTimer(this.settings().unlock_max);
    this.maxUnlockTimer = setTimeout(() => this.lock(`unlock_max: unlocked for ${ms} ms`), ms);
    this.maxUnlockTimer.unref();
    this.maxUnlockAt = Date.now() + ms;
    this.checkWallClock();
  }

  private checkWallClock(): void {
    if (this.wallCheck) return;
    this.wallCheck = setInterval(() => {
      const now = Date.now();
      if (this.maxUnlockAt !== null && now >= this.maxUnlockAt)
        this.lock(
          `unlock_max: unlocked for ${this.settings().unlock_max} ms by the wall clock (the machine was suspended, or its clock set forward)`,
        );
      else if (this.autoLockAt !== null && now >= this.autoLockAt)
        this.lock(
          `auto_lock: no agent request for ${this.settings().auto_lock} ms by the wall clock (the machine was suspended, or its clock set forward)`,
        );
    }, WALL_CHECK_MS);
    this.wallCheck.unref();
  }

  // The timers as `postern status` shows them: the setting and when it fires.
  describe(): { auto_lock: Record<string, string> | null; unlock_max: Record<string, string> | null } {
    const d = this.settings();
    return {
      auto_lock:
        this.autoLockAt === null
          ? null
          : { after: formatDuration(d.auto_lock), at: new Date(this.autoLockAt).toISOString() },
      unlock_max:
        this.maxUnlockAt === null
          ? null
          : { after: formatDuration(d.unlock_max), at: new Date(this.maxUnlockAt).toISOString() },
    };
  }
}
