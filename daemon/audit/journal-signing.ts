// Checkpoints: the signed entries that vouch for the chain up to them, how
// often they come, and the signing keys that make them.
import { CHECKPOINT_EVERY, checkpointMessage } from '../../shared/audit-format';
import { ed25519Sign, ed25519Verify } from '../../shared/crypto';
import { Draft, Head, accept, encode } from './journal-entries';

export const SIGN_SECRET_BYTES = 64;
// After this many other entries a checkpoint follows, so one in every CHECKPOINT_EVERY.
export const CHECKPOINT_AFTER = CHECKPOINT_EVERY - 1;
// Longer than any checkpoint line (about 330 bytes).
export const CHECKPOINT_LINE_MAX = 512;

// The public half of an Ed25519 secret key (libsodium keeps it in the last
// 32 bytes), after checking that the two halves belong together.
export function signingPublic(secret: unknown, who: string): string {
  if (!(secret instanceof Uint8Array) || secret.length !== SIGN_SECRET_BYTES)
    throw new TypeError(`${who}: expected a 64-byte Ed25519 secret key`);
  const pub = secret.subarray(32);
  const probe = Buffer.from('postern-audit-key-probe');
  if (!ed25519Verify(ed25519Sign(probe, secret), probe, pub))
    throw new TypeError(`${who}: the two halves of the Ed25519 secret key do not belong together`);
  return Buffer.from(pub).toString('base64');
}

// A checkpoint signing the draft's last entry with `key`, whose public half is `signer`.
export function acceptCheckpoint<P>(d: Draft<P>, now: Date, journalId: string, signer: string, key: Buffer): Head {
  return accept(
    d,
    encode(d.work, now, (seq, prev) => ({
      type: 'checkpoint',
      head_seq: seq - 1,
      head: prev,
      sign_pub: signer,
      sig: ed25519Sign(checkpointMessage(journalId, seq - 1, prev), key).toString('base64'),
    })),
  );
}
