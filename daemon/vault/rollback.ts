// Rollback detection (SPEC §8): the vault and the journal vouch for each
// other. The vault records its journal's id and the journal head at its last
// write; the journal records every vault write with its generation. At
// unlock both directions are checked.
import { parseHead } from '../../shared/audit-format';

export interface VaultSide {
  journalId: string;
  journalHead: string;
  generation: number;
}

export interface JournalSide {
  journalId: string;
  latestVault(): { generation: number; seq: number } | null;
  contains(seq: number, hash: string): Promise<boolean>;
}

export type RollbackVerdict = { ok: true; missingVaultEntry: boolean } | { ok: false; problem: string };

export async function checkRollback(vault: VaultSide, journal: JournalSide): Promise<RollbackVerdict> {
  if (vault.journalId !== journal.journalId) {
    return {
      ok: false,
      problem: `the audit journal belongs to another vault (journal ${journal.journalId}, the vault expects ${vault.journalId}): it was replaced`,
    };
  }
  const head = parseHead(vault.journalHead);
  if (!head || !(await journal.contains(head.seq, head.hash))) {
    return {
      ok: false,
      problem: `the vault was last written when the journal's head was entry ${head?.seq ?? '?'}, which the journal does not contain: the journal was cut back or replaced`,
    };
  }
  const latest = journal.latestVault();
  const recorded = latest ? latest.generation : 1; // init writes generation 1 before any vault entry
  if (recorded === vault.generation) return { ok: true, missingVaultEntry: false };
  // A crash between writing the vault and journaling the write leaves the
  // vault one generation ahead, with its recorded head after the journal's
  // last vault entry: the write happened and only its record is missing.
  if (vault.generation === recorded + 1 && head.seq > (latest?.seq ?? 0)) return { ok: true, missingVaultEntry: true };
  if (recorded > vault.generation) {
    return {
      ok: false,
      problem: `the vault is at generation ${vault.generation} but the journal records generation ${recorded}: this is an older copy of the vault`,
    };
  }
  return {
    ok: false,
    problem: `the journal records vault generation ${recorded} but the vault is at generation ${vault.generation}: the journal was cut back`,
  };
}
