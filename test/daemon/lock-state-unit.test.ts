// The lock state (daemon/lock-state.ts) around a real vault file: the epoch
// changes at every unlock and every lock, so a holder of the vault across an
// await can tell it was locked meanwhile even when it was unlocked again;
// locking wipes the vault, tells the listeners once, and a second lock is a
// no-op; while locked, use is refused with the lock's cause.
import t from 'tap';
import type { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes, sodiumReady, wipe } from '../../shared/crypto';
import { createVaultFile, parseHeader, readVaultFile } from '../../shared/vault-format';
import { UnlockedVault, unlockVaultFile } from '../../daemon/vault/unlocked-vault';
import { LockState } from '../../daemon/lock-state';

const PASS = Buffer.from('lock state passphrase');

async function openVault(t: Test): Promise<() => Promise<UnlockedVault>> {
  await sodiumReady();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-lock-state-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'vault');
  const created = await createVaultFile(file, PASS, 'interactive', '{}', {
    meta: {
      format: 1,
      created_at: new Date().toISOString(),
      audit: { sign_public: 'sign', box_public: 'box', sign_secret: 0, box_secret: 1 },
      credentials: [],
      journal_id: 'f'.repeat(32),
      journal_head: '1:' + 'a'.repeat(64),
    },
    blobs: [randomBytes(64), randomBytes(32)],
  });
  wipe(created.key);
  return async () => {
    const bytes = readVaultFile(file);
    return unlockVaultFile(file, bytes, parseHeader(bytes).header, PASS);
  };
}

t.test('epoch, wipe at lock, listeners, refusal while locked', async (t) => {
  const open = await openVault(t);
  const s = new LockState();
  let told = 0;
  s.onLock(() => {
    told += 1;
    t.equal(s.locked, true, 'listeners run once the vault is closed');
  });

  t.equal(s.locked, true, 'starts locked');
  t.equal(s.current, null);
  t.equal(s.unlockedAt, null);
  t.throws(() => s.requireUnlocked(), {
    code: 'vault_locked',
    message: 'the vault is locked (started locked); a human must run `postern unlock`',
  });
  t.equal(s.close('again'), false, 'locking a locked daemon does nothing');
  t.equal(told, 0, 'and tells no one');
  const e0 = s.epoch;

  const first = await open();
  s.open(first);
  const e1 = s.epoch;
  t.not(e1, e0, 'unlocking changes the epoch');
  t.equal(s.requireUnlocked(), first);
  t.ok(s.unlockedAt instanceof Date);

  t.equal(s.close('locked by `postern lock`'), true);
  const e2 = s.epoch;
  t.not(e2, e1, 'locking changes the epoch');
  t.equal(told, 1, 'the lock listeners are told once');
  t.equal(s.cause.text, 'locked by `postern lock`');
  await t.rejects(
    first.withAuditSigningKey(async () => 'opened'),
    { code: 'vault_locked' },
    'the vault is wiped at lock',
  );
  t.throws(() => s.requireUnlocked(), {
    code: 'vault_locked',
    message: 'the vault is locked (locked by `postern lock`); a human must run `postern unlock`',
  });

  // Locked and unlocked again while someone awaited: the vault is another,
  // and the epoch says so without comparing vaults.
  const second = await open();
  s.open(second);
  t.not(s.epoch, e1, 'a later unlock has an epoch of its own');
  t.not(s.epoch, e2);
  t.equal(new Set([e0, e1, e2, s.epoch]).size, 4, 'no epoch repeats');
  s.close('done');
});
