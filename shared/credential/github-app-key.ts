// A GitHub App's private key (SPEC §13), checked where it is stored (`cred
// add`, and the daemon again) and read where a JWT is signed.
import { createPrivateKey, KeyObject } from 'node:crypto';

const MIN_KEY_BITS = 2048;

// The app key as a KeyObject, or an Error with a one-line message that names
// what is wrong and never quotes the key. Node's own parse errors are not
// passed on: their wording is not ours to vouch for. The key is searched as
// bytes, never copied into a string (a string cannot be wiped).
export function githubAppKey(pem: Buffer): KeyObject {
  const store = "store the .pem file from the app's settings page";
  if (!pem.includes('-----BEGIN ')) throw new Error(`the GitHub App key is not in PEM form; ${store}`);
  // Checked before parsing: an encrypted key must never reach a passphrase prompt.
  if (pem.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----') || pem.includes('Proc-Type: 4,ENCRYPTED')) {
    throw new Error('the GitHub App key is encrypted with a passphrase; store it decrypted (openssl pkey -in key.pem)');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    if (pem.includes('PUBLIC KEY-----') || pem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new Error(`the GitHub App key is a public key or certificate, not the private key; ${store}`);
    }
    throw new Error(`the GitHub App key could not be read as a PEM private key; ${store}`);
  }
  if (key.asymmetricKeyType !== 'rsa') {
    const type = (key.asymmetricKeyType ?? 'unknown').toUpperCase();
    throw new Error(`the GitHub App key is an ${type} key, not RSA; GitHub signs app JWTs with RS256 only`);
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_KEY_BITS) {
    throw new Error(`the GitHub App key is RSA of ${bits} bits; GitHub's app keys are at least ${MIN_KEY_BITS} bits`);
  }
  return key;
}

// The check made when the secret is stored (`postern cred add`): null when
// the secret is an RSA private key in PEM of at least 2048 bits.
export function githubAppKeyProblem(secret: Buffer): string | null {
  try {
    githubAppKey(secret);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}
