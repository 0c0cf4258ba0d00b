// Secrets held by the unlocked daemon stay encrypted in memory under a random
// per-instance key, and are opened only for the moment of use. Wiping the
// instance (lock) destroys the key, which makes every sealed secret unreadable.
import { Refusal } from '../../shared/errors';
import { AEAD_KEY_BYTES, AEAD_NONCE_BYTES, aeadDecrypt, aeadEncrypt, randomBytes, wipe } from '../../shared/crypto';

// Opaque to holders; only the instance that sealed it can open it.
export interface SealedSecret {
  readonly nonce: Buffer;
  readonly ciphertext: Buffer;
}

// What a secret needed after the lock gets.
export function lockedWhileNeeded(): Refusal {
  return new Refusal(
    'vault_locked',
    'the vault was locked while this secret was needed; run `postern unlock` and retry',
  );
}

export class SealedSecrets {
  private key: Buffer | null = randomBytes(AEAD_KEY_BYTES);

  private liveKey(): Buffer {
    if (!this.key) throw lockedWhileNeeded();
    return this.key;
  }

  // The caller still owns (and should wipe) `secret`.
  seal(secret: Buffer): SealedSecret {
    const nonce = randomBytes(AEAD_NONCE_BYTES);
    return Object.freeze({ nonce, ciphertext: aeadEncrypt(this.liveKey(), nonce, secret, null) });
  }

  // The caller must wipe the result after use; prefer withOpen.
  open(s: SealedSecret): Buffer {
    const plain = aeadDecrypt(this.liveKey(), s.nonce, s.ciphertext, null);
    if (!plain)
      throw new Error('a sealed secret failed authentication (sealed by another instance, or altered in memory)');
    return plain;
  }

  withOpen<T>(s: SealedSecret, fn: (secret: Buffer) => T): T {
    const plain = this.open(s);
    try {
      return fn(plain);
    } finally {
      wipe(plain);
    }
  }

  // Wipes only once the promise settles, so an async consumer keeps the bytes
  // for as long as it awaits.
  async withOpenAsync<T>(s: SealedSecret, fn: (secret: Buffer) => Promise<T>): Promise<T> {
    const plain = this.open(s);
    try {
      return await fn(plain);
    } finally {
      wipe(plain);
    }
  }

  get wiped(): boolean {
    return this.key === null;
  }

  wipe(): void {
    wipe(this.key);
    this.key = null;
  }
}
