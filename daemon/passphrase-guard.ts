// Every passphrase check in the daemon goes through one guard: checks run one
// at a time, and a wrong passphrase is answered only after a delay that
// doubles with each consecutive failure (capped at 30 s), so guessing through
// the socket is slow however many connections an attacker opens.
import { Refusal } from '../shared/errors';

export const FIRST_DELAY_MS = 250;
export const MAX_DELAY_MS = 30_000;

export function failureDelay(consecutiveFailures: number): number {
  if (consecutiveFailures <= 0) return 0;
  return Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.min(consecutiveFailures - 1, 20));
}

export class PassphraseGuard {
  private failures = 0;
  private queue: Promise<unknown> = Promise.resolve();

  get consecutiveFailures(): number {
    return this.failures;
  }

  // Runs `check` exclusively. `check` resolves true for a right passphrase.
  run<T>(check: () => Promise<T | false>): Promise<T> {
    const next = this.queue.then(async () => {
      const result = await check();
      if (result === false) {
        this.failures += 1;
        await new Promise((r) => setTimeout(r, failureDelay(this.failures)));
        throw new Refusal('wrong_passphrase', `wrong passphrase (or the vault was modified); ${this.failures} in a row, each further attempt waits longer; check it and try again`);
      }
      this.failures = 0;
      return result;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}
