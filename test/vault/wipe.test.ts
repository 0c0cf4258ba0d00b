// Locking wipes the unlocked vault (SPEC §8): the key derived from the
// passphrase and the per-unlock memory key are zeroed in place, and no
// secret can be opened afterwards. A real vault file, opened as the daemon
// opens it.
import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Refusal } from '../../shared/errors';
import { randomBytes, sodiumReady, wipe } from '../../shared/crypto';
import { createVaultFile, parseHeader, readVaultFile, VaultContents } from '../../shared/vault-format';
import { UnlockedVault, unlockVaultFile } from '../../daemon/vault/unlocked-vault';

const PASS = Buffer.from('a long enough passphrase');
const SECRET = 'ghp_wipe_test_0123456789';
const LOCKED = {
  constructor: Refusal,
  code: 'vault_locked',
  message: 'the vault was locked while this secret was needed; run `postern unlock` and retry',
};

function contents(): VaultContents {
  const now = new Date().toISOString();
  return {
    meta: {
      format: 1,
      created_at: now,
      audit: { sign_public: 'sign-public', box_public: 'box-public', sign_secret: 0, box_secret: 1 },
      credentials: [
        {
          name: 'gh',
          kind: 'http',
          definition: {
            name: 'gh',
            kind: 'http',
            inject: { header: 'Authorization', template: 'Bearer {secret}' },
            allow: [{ host: 'api.github.com' }],
          },
          definition_hash: 'sha256:00',
          secret: 2,
          created_at: now,
          updated_at: now,
        },
      ],
      journal_id: '0123456789abcdef0123456789abcdef',
      journal_head: '1:' + '0'.repeat(64),
    },
    blobs: [randomBytes(64), randomBytes(32), Buffer.from(SECRET)],
  };
}

// The key buffers an UnlockedVault holds (private fields).
function keysOf(v: UnlockedVault): { derived: Buffer; memory: Buffer | null } {
  const inside = v as unknown as { key: Buffer; sealer: { key: Buffer | null } };
  return { derived: inside.key, memory: inside.sealer.key };
}

const zero = (b: Buffer): boolean => b.every((x) => x === 0);

t.before(async () => {
  await sodiumReady();
});

t.test('wipe() zeroes both keys; no secret opens afterwards', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-wipe-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'vault');
  const created = await createVaultFile(file, PASS, 'interactive', '{}', contents());
  wipe(created.key);
  const bytes = readVaultFile(file);
  const v = await unlockVaultFile(file, bytes, parseHeader(bytes).header, PASS);
  const gh = v.credential('gh')!.definition!;

  t.equal(await v.withCredentialSecret(gh, async (s) => s.bytes.toString()), SECRET, 'open before the lock');
  const { derived, memory } = keysOf(v);
  t.equal(derived.length, 32);
  t.equal(memory?.length, 32);
  t.notOk(zero(derived), 'the derived key is live');
  t.notOk(zero(memory!), 'the memory key is live');

  // A use in progress keeps its bytes until it settles, then they are zeroed.
  let held: Buffer | null = null;
  let release!: () => void;
  const inUse = v.withCredentialSecret(gh, async (s) => {
    held = s.bytes;
    await new Promise<void>((r) => (release = r));
    return s.bytes.toString();
  });
  await new Promise((r) => setImmediate(r));

  v.wipe();
  t.ok(zero(derived), 'the derived key buffer is all zeros');
  t.ok(zero(memory!), 'the memory key buffer is all zeros');
  t.equal(keysOf(v).memory, null, 'and the memory key is dropped');
  t.same(v.credentials(), [], 'no credential is listed');

  let called = false;
  await t.rejects(
    v.withCredentialSecret(gh, async () => {
      called = true;
      return 'opened';
    }),
    LOCKED,
  );
  t.notOk(called, 'the callback never ran');
  await t.rejects(
    v.withAuditSigningKey(async () => 'opened'),
    LOCKED,
    'nor does the audit signing key open',
  );
  t.throws(() => v.sealSecret(Buffer.from('new')), LOCKED, 'nothing new can be sealed');
  t.equal(await v.verifyPassphrase(PASS), false, 'the right passphrase no longer matches the wiped key');

  release();
  t.equal(await inUse, SECRET, 'the use in progress finished with its copy');
  t.ok(zero(held!), 'and its copy was zeroed when it settled');
});
