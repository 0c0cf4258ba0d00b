// Reading a private key into a node KeyObject (decrypting it), the key types
// postern accepts, and the check that a prepared key works as the original.
import { createPrivateKey, createPublicKey, randomBytes, verify, KeyObject } from 'node:crypto';
import type { ParsedKey } from 'ssh2';
import { ssh2 } from '../ssh2-module';
import { Refusal } from '../errors';
import { PrivateKeyFormat } from './key-format';
import { secretRefusal } from './secret-refusal';

const EC_NODE_CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1']);
export const MIN_RSA_BITS = 2048;

export function checkKeyType(key: KeyObject): void {
  const type = key.asymmetricKeyType;
  const details = key.asymmetricKeyDetails ?? {};
  if (type === 'ed25519') return;
  if (type === 'rsa') {
    if ((details.modulusLength ?? 0) < MIN_RSA_BITS) {
      throw secretRefusal(
        `the RSA key has ${details.modulusLength} bits; use at least ${MIN_RSA_BITS} (or an ed25519 key: ssh-keygen -t ed25519)`,
      );
    }
    return;
  }
  if (type === 'ec' && EC_NODE_CURVES.has(details.namedCurve ?? '')) return;
  if (type === 'dsa')
    throw secretRefusal(
      'DSA (ssh-dss) keys are obsolete and not supported; use an ed25519 key (ssh-keygen -t ed25519)',
    );
  throw secretRefusal(
    `${type ?? 'this'} keys are not supported; use ed25519, RSA (2048 bits or more) or ECDSA (P-256, P-384, P-521)`,
  );
}

// ---- the import ----

function wrongPassphrase(): Refusal {
  return secretRefusal(
    'could not decrypt the private key: the key passphrase is wrong (or the key file is damaged); try again with the right passphrase',
  );
}

function unreadableKey(): Refusal {
  return secretRefusal(
    'the private key could not be read (damaged or incomplete); give the whole key file, from its BEGIN line to its END line',
  );
}

// Read the key (decrypting it with the passphrase) into a node KeyObject,
// with the SSH public key blob when ssh2 parsed it.
export function readKey(
  secret: Buffer,
  format: PrivateKeyFormat,
  passphrase: Buffer | undefined,
): { key: KeyObject; publicBlob: Buffer | null } {
  if (format.kind === 'pkcs8') {
    try {
      return {
        key: createPrivateKey({ key: secret, format: 'pem', passphrase: format.encrypted ? passphrase : undefined }),
        publicBlob: null,
      };
    } catch {
      throw format.encrypted ? wrongPassphrase() : unreadableKey();
    }
  }
  const parsed = ssh2().utils.parseKey(secret, format.encrypted ? passphrase : undefined);
  if (parsed instanceof Error || Array.isArray(parsed)) throw format.encrypted ? wrongPassphrase() : unreadableKey();
  if (!parsed.isPrivateKey()) throw publicKeyGiven();
  let key: KeyObject;
  try {
    key = createPrivateKey(parsed.getPrivatePEM());
  } catch {
    throw parsed.type === ('ssh-dss' as string)
      ? secretRefusal('DSA (ssh-dss) keys are obsolete and not supported; use an ed25519 key (ssh-keygen -t ed25519)')
      : unreadableKey();
  }
  return { key, publicBlob: parsed.getPublicSSH() };
}

export function publicKeyGiven(): Refusal {
  return secretRefusal('this is a public key; give the private key file (e.g. ~/.ssh/id_ed25519, not the .pub file)');
}

function signingAlgorithm(type: string): string | undefined {
  return type === 'ssh-ed25519' ? undefined : 'sha256';
}

// The stored key must work without a passphrase: parse it back as the
// daemon will, compare the public key, and check that a signature made
// with it verifies under the original public key.
export function verifyPrepared(
  pem: Buffer,
  type: string,
  publicBlob: Buffer,
  original: KeyObject,
  parsedBlob: Buffer | null,
): void {
  const failed = (): Refusal =>
    new Refusal(
      'internal_error',
      'the private key was read but could not be prepared for storage; nothing was stored; report this with the key type',
    );
  const again: ParsedKey | Error = ssh2().utils.parseKey(pem);
  if (again instanceof Error || Array.isArray(again) || !again.isPrivateKey() || again.type !== type) throw failed();
  const pub = again.getPublicSSH();
  if (!pub.equals(publicBlob) || (parsedBlob !== null && !pub.equals(parsedBlob))) throw failed();
  const challenge = randomBytes(32);
  const algorithm = signingAlgorithm(type);
  const signature = again.sign(challenge, algorithm) as Buffer | Error;
  if (signature instanceof Error || !verify(algorithm ?? null, challenge, createPublicKey(original), signature))
    throw failed();
}
