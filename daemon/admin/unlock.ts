// Unlock, lock, passwd and the audit key rotation: the actions that open,
// close or re-key the vault.
import { Refusal } from '../../shared/errors';
import type { ConfigChange } from '../../shared/config';
import { newVaultHeader } from '../../shared/vault-format';
import { deriveKey, prewarmKdf } from '../../shared/kdf';
import { formatHead } from '../../shared/audit-format';
import { ed25519Keypair, wipe } from '../../shared/crypto';
import { configNotApproved, lockedBecause, rolledBack } from '../lock-cause';
import type { SigningChange, UnlockedVault } from '../vault/unlocked-vault';
import { checkRollback } from '../vault/rollback';
import type { AdminContext } from './context';
import { openWithPassphrase, prove } from './proof';
import { adoptable, configMismatch, install } from './config';
import { syncCaPem } from '../proxy/leaf-certs';

export async function unlock(
  ctx: AdminContext,
  passphrase: Buffer,
  acceptRollback = false,
): Promise<Record<string, unknown>> {
  try {
    return await unlockOnce(ctx, passphrase, acceptRollback);
  } catch (e) {
    // A wrong passphrase is already recorded by the guard.
    if (e instanceof Refusal && e.code !== 'wrong_passphrase')
      ctx.recorder.bestEffort({ kind: 'unlock', outcome: e.code });
    throw e;
  } finally {
    // While locked, keep a derivation worker ready for the next attempt.
    if (ctx.state.locked) prewarmKdf();
  }
}

async function unlockOnce(
  ctx: AdminContext,
  passphrase: Buffer,
  acceptRollback: boolean,
): Promise<Record<string, unknown>> {
  const { state } = ctx;
  if (!state.locked) return { already_unlocked: true, ...ctx.status() };
  const locksAsked = state.locksAsked;
  const fresh = ctx.reloadConfig();
  let opened: UnlockedVault;
  try {
    opened = await openWithPassphrase(ctx, passphrase);
  } catch (e) {
    if (e instanceof Refusal && e.code === 'wrong_passphrase') ctx.counters.unlock_failures += 1;
    throw e;
  }
  // Re-check the header the vault actually decrypted with (it is
  // authenticated), not the one read before derivation.
  const mismatch = configMismatch(opened.header, fresh);
  if (mismatch) {
    opened.wipe();
    state.cause = configNotApproved(mismatch.detail?.['changes'] as ConfigChange[]);
    throw mismatch;
  }
  const verdict = await checkRollback(opened, ctx.journal);
  if (!verdict.ok && !acceptRollback) {
    opened.wipe();
    state.cause = rolledBack(verdict.problem);
    throw new Refusal(
      'rollback_detected',
      `${verdict.problem}; restore the matching vault and journal, or, if this state is what you want, run \`postern unlock --accept-rollback\``,
    );
  }
  let signing: SigningChange | null;
  try {
    signing = await loadSigningKey(ctx, opened);
  } catch (e) {
    opened.wipe();
    state.cause = lockedBecause('audit signing key does not match the journal');
    throw e;
  }
  // Another unlock may be journaling its success: wait for it.
  while (ctx.inProgress.unlockJournaling) await ctx.inProgress.unlockJournaling;
  if (state.locksAsked !== locksAsked) {
    // `postern lock` came while the key was derived: the later word wins.
    opened.wipe();
    throw new Refusal(
      'vault_locked',
      'a lock was asked (`postern lock`) while this unlock checked the passphrase, so the vault stays locked; run `postern unlock` again if that lock was not meant',
    );
  }
  if (!state.locked) {
    // Another unlock won the race while this one derived its key.
    opened.wipe();
    return { already_unlocked: true, ...ctx.status() };
  }
  // The unlock is journaled before the vault is open to anyone: a journal
  // that cannot take the entry keeps the daemon locked.
  let journaled!: () => void;
  ctx.inProgress.unlockJournaling = new Promise<void>((resolve) => (journaled = resolve));
  try {
    await ctx.recorder.record({ kind: 'unlock', outcome: 'ok', generation: opened.generation });
  } catch (e) {
    opened.wipe();
    state.cause = lockedBecause('the audit journal could not record the unlock');
    throw e;
  } finally {
    ctx.inProgress.unlockJournaling = null;
    journaled();
  }
  install(ctx, adoptable(ctx.config, fresh).config);
  state.open(opened);
  ctx.counters.unlocks += 1;
  ctx.timers.armAutoLock();
  ctx.timers.armMaxUnlock();
  if (verdict.ok && verdict.missingVaultEntry) await ctx.writes.journalWrite(opened.generation);
  if (signing) {
    // A key rotation was cut short: finish it, or forget a key the journal never took.
    const step = signing.kind === 'promote' ? 'completed at unlock' : 'abandoned at unlock';
    await ctx.writes.write(
      opened,
      { kind: 'audit_key_rotation', step, sign_pub: await ctx.journal.keyInForce() },
      () => undefined,
      { signing },
    );
  }
  if (!verdict.ok) {
    // Accepted by a human: record what was accepted, then write the vault
    // again so the vault and the journal vouch for each other from here on.
    // Past the highest generation the journal recorded, which the
    // restored vault may be below: generations never go down.
    const recorded = ctx.journal.latestVault()?.generation ?? 0;
    await ctx.writes.write(opened, { kind: 'rollback_accepted', problem: verdict.problem }, () => undefined, {
      generationAtLeast: recorded + 1,
    });
  }
  try {
    syncCaPem(ctx.config.paths.caPem, opened.proxyCaCert);
  } catch (e) {
    // ca.pem is only a copy of the vault's certificate: a home that cannot
    // take it does not keep the vault locked; the log says why, and
    // `postern ca` names the missing file.
    ctx.recorder.warn(
      { event: 'ca_pem_write_failed', path: ctx.config.paths.caPem, errno: (e as NodeJS.ErrnoException)?.code ?? null },
      'ca.pem could not be written; programs under `postern run` cannot trust the proxy until it is',
    );
  }
  return ctx.status();
}

// The signing key stays with the journal until the daemon exits, so that
// checkpoints can be signed while locked (SPEC §9). It is the key the
// journal has in force: the vault's current key or, after a rotation cut
// short once the journal had taken the new key, the key being rotated in.
// Returns what the vault must do about a rotation left pending.
async function loadSigningKey(ctx: AdminContext, vault: UnlockedVault): Promise<SigningChange | null> {
  const next = vault.auditNextPublicKey;
  const useNext = next !== null && next === (await ctx.journal.keyInForce());
  await vault.withAuditSigningKey((key) => ctx.journal.setSigningKey(key), useNext ? 'next' : 'current');
  if (next === null) return null;
  return useNext ? { kind: 'promote' } : { kind: 'abandon' };
}

export function lock(ctx: AdminContext, reason: string): { was_locked: boolean } {
  const was = ctx.state.locked;
  ctx.timers.clear();
  // Closing ends the sessions and tells the lock listeners.
  if (ctx.state.close(reason)) {
    ctx.approvals.cancelAll(
      new Refusal(
        'vault_locked',
        'the vault was locked while this request waited for approval; a human must run `postern unlock`',
      ),
      `the vault was locked (${reason})`,
    );
    ctx.recorder.bestEffort({ kind: 'lock', reason });
    ctx.journal.checkpoint().catch(() => undefined);
    prewarmKdf();
  }
  return { was_locked: was };
}

export async function passwd(
  ctx: AdminContext,
  passphrase: Buffer,
  newPassphrase: Buffer,
): Promise<Record<string, unknown>> {
  if (newPassphrase.length < 12)
    throw new Refusal('bad_request', 'the new passphrase is too short (at least 12 characters); choose a longer one');
  // One at a time: two changes proved against the same passphrase would
  // both answer "changed", and only the later passphrase would open the
  // vault.
  if (ctx.inProgress.passwd)
    throw new Refusal(
      'busy',
      'a passphrase change is already running; wait for it to finish, then (if you still want to) change it again, proving the passphrase it set',
    );
  ctx.inProgress.passwd = true;
  try {
    const vault = await prove(ctx, passphrase);
    const fresh = newVaultHeader(
      { opslimit: vault.header.opslimit, memlimit: vault.header.memlimit },
      vault.header.approvedConfig,
    );
    const key = await deriveKey(newPassphrase, fresh.salt, fresh.opslimit, fresh.memlimit);
    await ctx.writes.write(vault, { kind: 'passwd' }, () => undefined, { newKey: { key, header: fresh } });
    return { generation: vault.generation };
  } finally {
    ctx.inProgress.passwd = false;
  }
}

// A new audit signing key. Three durable steps, each safe to be cut short
// (the next unlock completes or abandons the change): the vault stores the
// new key beside the current one; the journal names the new key in a
// signer entry vouched for by a checkpoint of the current key; the vault
// makes the new key the current one and forgets the old.
export async function rotateAuditKey(ctx: AdminContext, passphrase: Buffer): Promise<Record<string, unknown>> {
  const vault = await prove(ctx, passphrase);
  if (ctx.inProgress.rotatingAuditKey)
    throw new Refusal('busy', 'an audit key rotation is already running; wait for it to finish');
  ctx.inProgress.rotatingAuditKey = true;
  const fresh = ed25519Keypair();
  try {
    const previous = await ctx.journal.keyInForce();
    const key = fresh.publicKey.toString('base64');
    await ctx.writes.write(vault, { kind: 'audit_key_rotation', step: 'prepared', sign_pub: key }, () => undefined, {
      signing: { kind: 'prepare', secret: fresh.privateKey, public: key },
    });
    const checkpoint = await ctx.journal.changeSigner(fresh.privateKey);
    await ctx.writes.write(
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
    ctx.inProgress.rotatingAuditKey = false;
  }
}
