// Vault writes, one at a time, each bracketed by the journal: the event
// describing it is journaled first (its head is stored in the vault), then
// the vault is written, then the write itself is journaled with the new
// generation and the file's hash.
import { readFileSync } from 'node:fs';
import { Refusal } from '../shared/errors';
import { formatHead } from '../shared/audit-format';
import type { JournalEvent, VaultWriteEvent } from '../shared/events';
import { sha256hex } from '../shared/crypto';
import type { UnlockedVault } from './vault/unlocked-vault';
import type { Journal } from './audit/journal';
import type { Logger } from './logger';
import { errorCode } from './recorder';

type Commit = UnlockedVault['commit'];

export interface VaultWriteDeps {
  record(payload: JournalEvent): Promise<{ seq: number; hash: string }>;
  journal: Journal;
  log: Logger;
  vaultPath(): string;
}

export class VaultWrites {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: VaultWriteDeps) {}

  write(
    vault: UnlockedVault,
    payload: VaultWriteEvent,
    change: Parameters<Commit>[1],
    opts?: Parameters<Commit>[2],
  ): Promise<void> {
    const run = this.queue.then(async () => {
      const head = await this.deps.record({
        ...payload,
        generation: Math.max(vault.generation + 1, opts?.generationAtLeast ?? 0),
      });
      try {
        vault.commit(formatHead(head.seq, head.hash), change, opts);
      } catch (e) {
        // The journal holds the intent without a vault entry after it, which
        // is what a write that did not happen looks like at the next unlock.
        const errno = e instanceof Refusal ? e.detail?.['errno'] : (e as NodeJS.ErrnoException)?.code;
        this.deps.log.error(
          { event: 'vault_write_failed', kind: payload.kind, path: this.deps.vaultPath(), errno, code: errorCode(e) },
          'the vault could not be written',
        );
        throw e;
      }
      await this.journalWrite(vault.generation);
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  // The journal's record of a vault write that happened: its generation and
  // the file's hash.
  async journalWrite(generation: number): Promise<void> {
    const hash = sha256hex(readFileSync(this.deps.vaultPath()));
    try {
      await this.deps.journal.appendVault(generation, hash);
    } catch (e) {
      // The vault was written; at the next unlock the missing record is
      // recognised (vault one generation ahead of its journal) and restored.
      this.deps.log.error(
        { event: 'audit_write_failed', kind: 'vault', generation, code: errorCode(e) },
        'vault written but not journaled',
      );
    }
  }

  // Resolves once the writes queued so far are done (for shutdown).
  settled(): Promise<unknown> {
    return this.queue;
  }
}
