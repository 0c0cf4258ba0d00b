// Recognising what was given as an SSH private key: its format and whether
// it is encrypted, from its armour alone.

export type PrivateKeyFormat = { kind: 'openssh' | 'legacy-pem' | 'pkcs8'; encrypted: boolean };
type KeyFormat = PrivateKeyFormat | { kind: 'public' } | { kind: 'putty' } | { kind: 'unknown' };

export const OPENSSH_BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';
export const OPENSSH_END = '-----END OPENSSH PRIVATE KEY-----';
export const OPENSSH_MAGIC = Buffer.from('openssh-key-v1\0', 'latin1');

// The cipher named in an OpenSSH private key ("none" when unencrypted), or
// null when the block cannot be read that far.
function opensshCipher(secret: Buffer): string | null {
  const begin = secret.indexOf(OPENSSH_BEGIN);
  const end = secret.indexOf(OPENSSH_END);
  if (begin === -1 || end < begin) return null;
  const blob = Buffer.from(secret.subarray(begin + OPENSSH_BEGIN.length, end).toString('latin1'), 'base64');
  try {
    if (!blob.subarray(0, OPENSSH_MAGIC.length).equals(OPENSSH_MAGIC)) return null;
    const len = blob.readUInt32BE(OPENSSH_MAGIC.length);
    const start = OPENSSH_MAGIC.length + 4;
    if (start + len > blob.length) return null;
    return blob.subarray(start, start + len).toString('latin1');
  } catch {
    return null;
  } finally {
    blob.fill(0);
  }
}

export function detectFormat(secret: Buffer): KeyFormat {
  if (secret.includes(OPENSSH_BEGIN)) {
    const cipher = opensshCipher(secret);
    return { kind: 'openssh', encrypted: cipher !== null && cipher !== 'none' };
  }
  if (/-----BEGIN (?:RSA|EC|DSA) PRIVATE KEY-----/.test(secret.toString('latin1', 0, Math.min(secret.length, 100)))) {
    return { kind: 'legacy-pem', encrypted: secret.includes('Proc-Type: 4,ENCRYPTED') };
  }
  if (secret.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----')) return { kind: 'pkcs8', encrypted: true };
  if (secret.includes('-----BEGIN PRIVATE KEY-----')) return { kind: 'pkcs8', encrypted: false };
  if (secret.includes('PuTTY-User-Key-File-')) return { kind: 'putty' };
  const head = secret.toString('latin1', 0, Math.min(secret.length, 40)).trimStart();
  if (
    /^(?:ssh-|ecdsa-sha2-|sk-)/.test(head) ||
    head.startsWith('-----BEGIN PUBLIC KEY') ||
    head.startsWith('---- BEGIN SSH2 PUBLIC KEY')
  ) {
    return { kind: 'public' };
  }
  return { kind: 'unknown' };
}
