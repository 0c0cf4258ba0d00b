// Request budgets (SPEC §3 http.max_concurrent, §4 rate): how many requests
// may be in flight at once, and how many a credential may send per period.
import { Refusal } from '../../shared/errors';
import { parseRate } from '../../shared/credential';
import { SYSTEM_CLOCKS, type Clocks } from '../two-clocks';

// Requests in flight across the daemon. A request waiting for a human's
// decision gives its slot back for the wait (SPEC §7: pending approvals have
// their own budget, daemon.max_pending) and takes it again once decided,
// then even when the limit is reached meanwhile, so a decision a human made
// is never thrown away as busy; the overshoot is at most max_pending.
export class InFlight {
  private count = 0;
  // Requests running, waiting for approval included, and who waits for none.
  private running = 0;
  private idle: (() => void)[] = [];

  constructor(private readonly limit: () => number) {}

  // A slot, or 429 busy. The caller releases it when the reply is sent.
  enter(): Slot {
    if (this.count >= this.limit()) {
      throw new Refusal(
        'busy',
        `postern already has ${this.count} requests in flight (http.max_concurrent); wait for some to finish and retry`,
      );
    }
    this.count += 1;
    let held = true;
    let done = false;
    const slot: Slot = {
      release: () => {
        if (done) return;
        done = true;
        if (held) this.count -= 1;
        held = false;
      },
      suspend: () => {
        if (done || !held) return;
        held = false;
        this.count -= 1;
      },
      resume: () => {
        if (done || held) return;
        held = true;
        this.count += 1;
      },
    };
    return slot;
  }

  // Runs `f` holding a slot, which `f` hands on to the approval wait.
  async run<T>(f: (slot: Slot) => Promise<T>): Promise<T> {
    const slot = this.enter();
    this.running += 1;
    try {
      return await f(slot);
    } finally {
      slot.release();
      this.running -= 1;
      if (this.running === 0) for (const wake of this.idle.splice(0)) wake();
    }
  }

  // Once no request runs, or after `ms`: what a stopping daemon waits for
  // before it closes its connections and its journal, so a request in
  // flight is answered and its outcome journaled.
  settled(ms: number): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  get current(): number {
    return this.count;
  }
}

export interface Slot {
  release(): void;
  // Gives the slot back while the request waits for approval...
  suspend(): void;
  // ...and takes it again when the wait ends.
  resume(): void;
}

interface Bucket {
  rate: string;
  tokens: number;
  wallAt: number;
  monoAt: number;
}

// A token bucket per credential: `N/period` allows a burst of N and refills
// N per period, continuously. Buckets start full and reset when the rate in
// the definition changes; they do not survive a restart.
export class RateBudgets {
  private buckets = new Map<string, Bucket>();

  // Elapsed time by both clocks, the larger (two-clocks.ts): the wall clock
  // alone, stepped back, drained the bucket by the step (an hour back: an
  // hour of rate_limited); the monotonic one alone stops while the machine
  // is suspended, and a budget spent before a night's sleep would not
  // refill for the night.
  constructor(private readonly clocks: Clocks = SYSTEM_CLOCKS) {}

  private bucket(credential: string, rate: string): { b: Bucket; count: number; perMs: number } {
    const r = parseRate(rate);
    if (!r) throw new Refusal('internal_error', `credential "${credential}" has an unreadable rate`);
    let b = this.buckets.get(credential);
    const wall = this.clocks.wall();
    const mono = this.clocks.mono();
    if (!b || b.rate !== rate) {
      b = { rate, tokens: r.count, wallAt: wall, monoAt: mono };
      this.buckets.set(credential, b);
    }
    const elapsed = Math.max(0, wall - b.wallAt, mono - b.monoAt);
    b.tokens = Math.min(r.count, b.tokens + (elapsed * r.count) / r.per_ms);
    b.wallAt = wall;
    b.monoAt = mono;
    return { b, count: r.count, perMs: r.per_ms };
  }

  private refusal(credential: string, rate: string, tokens: number, count: number, perMs: number): Refusal {
    const waitMs = Math.ceil(((1 - tokens) * perMs) / count);
    return new Refusal(
      'rate_limited',
      `credential "${credential}" allows ${rate}; its budget is spent — retry in ${Math.max(1, Math.ceil(waitMs / 1000))} s`,
      { retry_after_ms: waitMs },
    );
  }

  // Before asking a human: refuse early if the budget is already spent.
  check(credential: string, rate: string | undefined): void {
    if (rate === undefined) return;
    const { b, count, perMs } = this.bucket(credential, rate);
    if (b.tokens < 1) throw this.refusal(credential, rate, b.tokens, count, perMs);
  }

  // Just before the request is sent: spend one token, or refuse.
  take(credential: string, rate: string | undefined): void {
    if (rate === undefined) return;
    const { b, count, perMs } = this.bucket(credential, rate);
    if (b.tokens < 1) throw this.refusal(credential, rate, b.tokens, count, perMs);
    b.tokens -= 1;
  }

  forget(credential: string): void {
    this.buckets.delete(credential);
  }
}
