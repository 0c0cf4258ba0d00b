// Every passphrase check in the daemon goes through one guard: checks run one
// at a time, and a wrong passphrase is answered only after a delay that
// doubles with each consecutive failure (capped at 30 s), so guessing through
// the socket is slow however many connections an attacker opens. At most
// MAX_WAITING checks wait for their turn (SPEC §7); one arriving beyond that
// is refused at once as busy, so guesses queued on admin.sock delay a human's
// right passphrase by at most MAX_WAITING of the growing delays, never hours.
import { Refusal } from '../shared/errors';

export const FIRST_DELAY_MS = 250;
export const MAX_DELAY_MS = 30_000;
export const MAX_WAITING = 4;

export function failureDelay(consecutiveFailures: number): number {
  if (consecutiveFailures <= 0) return 0;
  return Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.min(consecutiveFailures - 1, 20));
}

export class PassphraseGuard {
  private failures = 0;
  private queue: Promise<unknown> = Promise.resolve();
  // Checks in the guard: the one running (its delay included) and those
  // queued behind it.
  private inside = 0;

  get consecutiveFailures(): number {
    return this.failures;
  }

  // Runs `check` exclusively. `check` resolves true for a right passphrase.
  run<T>(check: () => Promise<T | false>): Promise<T> {
    if (this.inside > MAX_WAITING) {
      return Promise.reject(
        new Refusal(
          'busy',
          `${MAX_WAITING} passphrase checks are already waiting (each wrong one is answered after a growing delay); try again in a moment`,
          { waiting: MAX_WAITING },
        ),
      );
    }
    this.inside += 1;
    const next = this.queue.then(async () => {
      const result = await check();
      if (result === false) {
        this.failures += 1;
        await new Promise((r) => setTimeout(r, failureDelay(this.failures)));
        throw new Refusal(
          'wrong_passphrase',
          `wrong passphrase (or the vault was modified); ${this.failures} in a row, each further attempt waits longer; check it and try again`,
        );
      }
      this.failures = 0;
      return result;
    });
    const done = (): void => {
      this.inside -= 1;
    };
    next.then(done, done);
    this.queue = next.catch(() => undefined);
    return next;
  }
}
