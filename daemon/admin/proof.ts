// Passphrase proofs for admin actions, all through the one guard (one check
// at a time, growing delay after failures; SPEC §7).
import { Refusal } from '../../shared/errors';
import { parseHeader, readVaultFile, VaultHeader } from '../../shared/vault-format';
import { UnlockedVault, unlockVaultFile } from '../vault/unlocked-vault';
import { prewarmKdf } from '../../shared/kdf';
import type { AdminContext } from './context';

// The vault file and its header, read but not yet authenticated.
export function readHeader(path: string): { file: Buffer; header: VaultHeader } {
  const file = readVaultFile(path);
  return { file, header: parseHeader(file).header };
}

// Open the vault file with a passphrase. Used by unlock and by actions
// proved while locked.
export async function openWithPassphrase(ctx: AdminContext, passphrase: Buffer): Promise<UnlockedVault> {
  const path = ctx.config.paths.vault;
  const { file, header } = readHeader(path);
  return guarded(ctx, ctx.state.locked ? 'unlock' : 'proof', () =>
    unlockVaultFile(path, file, header, passphrase).catch((e: unknown) => {
      if (e instanceof Refusal && e.code === 'wrong_passphrase') return false as const;
      throw e;
    }),
  );
}

// A widening action: prove the passphrase against the unlocked vault.
export async function prove(ctx: AdminContext, passphrase: Buffer): Promise<UnlockedVault> {
  const vault = ctx.state.requireUnlocked();
  const epoch = ctx.state.epoch;
  const lockedMeanwhile = (): Refusal =>
    new Refusal('vault_locked', 'the vault was locked while the passphrase was checked; unlock and try again');
  await guarded(ctx, 'proof', async () => {
    const right = await vault.verifyPassphrase(passphrase);
    // Locked meanwhile, the key compared against was wiped: not a wrong
    // passphrase, and not counted as one.
    if (ctx.state.epoch !== epoch) throw lockedMeanwhile();
    return right || false;
  });
  if (ctx.state.epoch !== epoch) throw lockedMeanwhile();
  return vault;
}

async function guarded<T>(ctx: AdminContext, what: string, check: () => Promise<T | false>): Promise<T> {
  try {
    return await ctx.guard.run(check);
  } catch (e) {
    if (e instanceof Refusal && e.code === 'wrong_passphrase') {
      ctx.recorder.bestEffort({
        kind: 'passphrase_refused',
        during: what,
        consecutive: ctx.guard.consecutiveFailures,
      });
    }
    throw e;
  } finally {
    // A worker ready for the next passphrase, unlocked as locked: loading
    // libsodium in a new one is ≈0.2 s of each check (cred add, rm, …).
    // It holds no secret until its job, and ≈4 MiB.
    prewarmKdf();
  }
}
