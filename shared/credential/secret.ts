// Checks on secrets at import (SPEC §4), and the preparation of SSH private
// keys. No message here ever contains any part of a secret; library error
// messages are not passed on, since they are not promised to be free of it.
//
// An SSH key is stored decrypted inside the vault, in one form the daemon
// can always hand to ssh2 without a passphrase: an unencrypted OpenSSH
// private key ("openssh-key-v1", cipher none), whatever the input format.
// ssh2's own getPrivatePEM() is not enough: for ed25519 it returns PKCS#8,
// which ssh2 cannot parse back.
//
// JavaScript strings cannot be wiped, and both ssh2 (PEM) and node:crypto
// (JWK) hand key material over as strings; the buffers made here are wiped.
import { createPrivateKey, createHash } from 'node:crypto';
import type { ParsedKey } from 'ssh2';
import { ssh2 } from '../ssh2-module';
import { HttpInject, SshCredentialDef } from './types';
import { githubAppKeyProblem } from './github-app-key';
import { parseAwsSecret } from './aws-secret';
import { oauthSecretParts } from './oauth-secret';
import { secretRefusal } from './secret-refusal';
import { detectFormat } from './key-format';
import { encodeKey, toOpenSshPem } from './openssh-key';
import { checkKeyType, publicKeyGiven, readKey, verifyPrepared } from './key-read';

export { MIN_RSA_BITS } from './key-read';

// The one trailing newline ("\n" or "\r\n") the SPEC removes from a secret
// read from a file or stdin. Returns a view of the same memory, not a copy,
// so wiping the original wipes it.
export function stripOneTrailingNewline(buf: Buffer): Buffer {
  if (buf.length >= 2 && buf[buf.length - 2] === 0x0d && buf[buf.length - 1] === 0x0a)
    return buf.subarray(0, buf.length - 2);
  if (buf.length >= 1 && buf[buf.length - 1] === 0x0a) return buf.subarray(0, buf.length - 1);
  return buf;
}

function hasControlByte(buf: Buffer): boolean {
  for (const byte of buf) if (byte < 0x20 || byte === 0x7f) return true;
  return false;
}

// The secret of an HTTP credential, checked for its injection form: a
// GitHub App's is its PEM key, an AWS one its key id and secret key;
// every other form sends the secret itself (below).
export function checkHttpSecret(secret: Buffer, inject?: HttpInject): void {
  if (inject && 'github_app' in inject) {
    const problem = githubAppKeyProblem(secret);
    if (problem !== null) throw secretRefusal(problem);
    return;
  }
  if (inject && 'aws_sigv4' in inject) {
    const parsed = parseAwsSecret(secret);
    if (!parsed.ok) throw secretRefusal(parsed.problem);
    return;
  }
  if (inject && 'oauth2' in inject) {
    const parsed = oauthSecretParts(secret, inject.oauth2.grant);
    if (!parsed.ok) throw secretRefusal(parsed.problem);
    return;
  }
  checkSentSecret(secret);
}

// A secret that goes into a header, a query parameter or Basic auth: it
// must be one non-empty line with no control characters.
function checkSentSecret(secret: Buffer): void {
  if (secret.length === 0) {
    throw secretRefusal('the secret is empty; give the API token or password itself (one trailing newline is removed)');
  }
  if (hasControlByte(secret)) {
    throw secretRefusal(
      'the secret contains a control character (a byte below 0x20, or 0x7f: a tab, a second line, a carriage return, NUL...); ' +
        'give the secret as one line of text with at most one trailing newline',
    );
  }
}

function checkSshPassword(secret: Buffer): void {
  if (secret.length === 0) throw secretRefusal('the SSH password is empty; give the password itself');
  if (secret.includes(0x00) || secret.includes(0x0a) || secret.includes(0x0d)) {
    throw secretRefusal(
      'the SSH password contains NUL, CR or LF; give the password as one line (one trailing newline is removed)',
    );
  }
}

// The secret of an SSH credential, ready for the vault. A password is
// checked and returned as is (the same buffer). A private key (OpenSSH,
// PKCS#1/SEC1 PEM, or PKCS#8, encrypted or not; ed25519, RSA ≥ 2048 bits,
// ECDSA P-256/384/521) is decrypted with `keyPassphrase` and returned, in a
// new buffer, as an unencrypted OpenSSH private key. An encrypted key
// without a passphrase is refused with detail.needs_key_passphrase = true,
// so the caller can ask for it and call again.
export function prepareSshSecret(def: Pick<SshCredentialDef, 'auth'>, secret: Buffer, keyPassphrase?: Buffer): Buffer {
  if (def.auth === 'password') {
    checkSshPassword(secret);
    return secret;
  }
  if (secret.length === 0)
    throw secretRefusal('the private key is empty; give the private key file, e.g. ~/.ssh/id_ed25519');
  const format = detectFormat(secret);
  if (format.kind === 'public') throw publicKeyGiven();
  if (format.kind === 'putty') {
    throw secretRefusal(
      'PuTTY (.ppk) keys are not supported; convert it with `puttygen KEY.ppk -O private-openssh -o KEY` and give that file',
    );
  }
  if (format.kind === 'unknown') {
    throw secretRefusal(
      'this is not a private key in OpenSSH or PEM format; give the private key file (it starts with "-----BEGIN")',
    );
  }
  const passphrase = keyPassphrase !== undefined && keyPassphrase.length > 0 ? keyPassphrase : undefined;
  if (format.encrypted && passphrase === undefined) {
    throw secretRefusal(
      'the private key is encrypted; give its passphrase (it is used once, to store the key decrypted inside the vault)',
      {
        needs_key_passphrase: true,
      },
    );
  }
  const { key, publicBlob: parsedBlob } = readKey(secret, format, passphrase);
  checkKeyType(key);
  const { pem, publicBlob, type } = toOpenSshPem(key);
  try {
    verifyPrepared(pem, type, publicBlob, key, parsedBlob);
  } catch (e) {
    pem.fill(0);
    throw e;
  }
  return pem;
}

function parsePrepared(secret: Buffer): ParsedKey {
  const parsed = ssh2().utils.parseKey(secret);
  if (parsed instanceof Error || Array.isArray(parsed) || !parsed.isPrivateKey()) {
    throw secretRefusal('not an unencrypted private key; prepare it with prepareSshSecret first');
  }
  return parsed;
}

// The public half of a prepared (unencrypted) key, as in an authorized_keys
// line without comment: "ssh-ed25519 AAAA...".
export function sshKeyPublic(secret: Buffer): string {
  const parsed = parsePrepared(secret);
  return `${parsed.type} ${parsed.getPublicSSH().toString('base64')}`;
}

// Its fingerprint, as `ssh-keygen -lf` prints it: "SHA256:<43 base64>".
export function sshKeyFingerprint(secret: Buffer): string {
  const blob = parsePrepared(secret).getPublicSSH();
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

// The private components of a prepared key (the ed25519 seed and seed+public
// pair; RSA d, p, q, qi, dp, dq; the ECDSA scalar), for the daemon to search command
// output for them in every encoding: an echoed key file in any other format
// still carries these bytes. The caller wipes the buffers.
export function sshPrivateParts(secret: Buffer): Buffer[] {
  const parsed = parsePrepared(secret);
  const key = createPrivateKey(parsed.getPrivatePEM());
  return encodeKey(key).raw;
}
