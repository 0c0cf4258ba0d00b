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
import { createPrivateKey, createPublicKey, createHash, randomBytes, verify, KeyObject } from 'node:crypto';
import { utils, ParsedKey } from 'ssh2';
import { Refusal } from '../errors';
import { SshCredentialDef } from './types';

function secretRefusal(message: string, detail: Record<string, unknown> = {}): Refusal {
  return new Refusal('invalid_definition', message, { problems: [{ path: 'secret', message }], ...detail });
}

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

// An HTTP secret goes into a header, a query parameter or Basic auth: it
// must be one non-empty line with no control characters.
export function checkHttpSecret(secret: Buffer): void {
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

// ---- recognising the input ----

type PrivateKeyFormat = { kind: 'openssh' | 'legacy-pem' | 'pkcs8'; encrypted: boolean };
type KeyFormat = PrivateKeyFormat | { kind: 'public' } | { kind: 'putty' } | { kind: 'unknown' };

const OPENSSH_BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';
const OPENSSH_END = '-----END OPENSSH PRIVATE KEY-----';
const OPENSSH_MAGIC = Buffer.from('openssh-key-v1\0', 'latin1');

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

function detectFormat(secret: Buffer): KeyFormat {
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

// ---- encoding an unencrypted OpenSSH private key ----

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function sshString(data: Buffer | string): Buffer {
  const b = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
  return Buffer.concat([u32(b.length), b]);
}

// SSH mpint: big-endian, minimal, with a zero byte in front when the high
// bit is set (the value is positive). Built in one buffer, nothing to wipe.
function mpint(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i += 1;
  const body = b.subarray(i);
  const lead = (body[0] as number) & 0x80 ? 1 : 0;
  const out = Buffer.alloc(4 + lead + body.length);
  out.writeUInt32BE(lead + body.length);
  body.copy(out, 4 + lead);
  return out;
}

function b64u(s: string | undefined): Buffer {
  if (typeof s !== 'string') throw new TypeError('missing JWK member');
  return Buffer.from(s, 'base64url');
}

const EC_CURVES: Readonly<Record<string, string>> = { 'P-256': 'nistp256', 'P-384': 'nistp384', 'P-521': 'nistp521' };

interface Encoded {
  type: string;
  publicBlob: Buffer;
  layout: Buffer[]; // the private fields after the key type, SSH-encoded, in OpenSSH's order
  raw: Buffer[]; // decoded components, only kept to be wiped
}

function encodeKey(key: KeyObject): Encoded {
  const jwk = key.export({ format: 'jwk' });
  if (key.asymmetricKeyType === 'ed25519') {
    const pub = b64u(jwk.x);
    const seed = b64u(jwk.d);
    const type = 'ssh-ed25519';
    const both = Buffer.concat([seed, pub]);
    return {
      type,
      publicBlob: Buffer.concat([sshString(type), sshString(pub)]),
      layout: [sshString(pub), sshString(both)],
      raw: [seed, both],
    };
  }
  if (key.asymmetricKeyType === 'rsa') {
    const [n, e, d, p, q, qi, dp, dq] = [jwk.n, jwk.e, jwk.d, jwk.p, jwk.q, jwk.qi, jwk.dp, jwk.dq].map(b64u) as [
      Buffer,
      Buffer,
      Buffer,
      Buffer,
      Buffer,
      Buffer,
      Buffer,
      Buffer,
    ];
    const type = 'ssh-rsa';
    return {
      type,
      publicBlob: Buffer.concat([sshString(type), mpint(e), mpint(n)]),
      layout: [mpint(n), mpint(e), mpint(d), mpint(qi), mpint(p), mpint(q)],
      // dp and dq are not in the OpenSSH layout, but PKCS#1 and PKCS#8
      // files carry them: the daemon searches output for them too.
      raw: [d, p, q, qi, dp, dq],
    };
  }
  // ecdsa (checkKeyType admitted only the three curves of EC_CURVES)
  const curve = EC_CURVES[jwk.crv ?? ''] as string;
  const q = Buffer.concat([Buffer.from([4]), b64u(jwk.x), b64u(jwk.y)]);
  const d = b64u(jwk.d);
  const type = `ecdsa-sha2-${curve}`;
  return {
    type,
    publicBlob: Buffer.concat([sshString(type), sshString(curve), sshString(q)]),
    layout: [sshString(curve), sshString(q), mpint(d)],
    raw: [d],
  };
}

// openssh-key-v1 with cipher and KDF "none": magic, cipher, kdf, kdf
// options, key count, public key, then the private section (a repeated
// check word, the key, its comment, padding 1, 2, 3... to 8 bytes).
function toOpenSshPem(key: KeyObject): { pem: Buffer; publicBlob: Buffer; type: string } {
  const enc = encodeKey(key);
  // The check word only detects a wrong passphrase, and there is none: derive
  // it from the public key so preparing a key twice gives the same bytes.
  const check = createHash('sha256').update(enc.publicBlob).digest().subarray(0, 4);
  const unpadded = Buffer.concat([check, check, sshString(enc.type), ...enc.layout, sshString('')]);
  const padding = Buffer.from(Array.from({ length: (8 - (unpadded.length % 8)) % 8 }, (_, i) => i + 1));
  const section = Buffer.concat([unpadded, padding]);
  const blob = Buffer.concat([
    OPENSSH_MAGIC,
    sshString('none'),
    sshString('none'),
    sshString(''),
    u32(1),
    sshString(enc.publicBlob),
    sshString(section),
  ]);
  const lines = blob.toString('base64').match(/.{1,70}/g) ?? [];
  const pem = Buffer.from(`${OPENSSH_BEGIN}\n${lines.join('\n')}\n${OPENSSH_END}\n`, 'latin1');
  for (const b of [...enc.layout, ...enc.raw, unpadded, section, blob]) b.fill(0);
  return { pem, publicBlob: enc.publicBlob, type: enc.type };
}

// ---- key types ----

const EC_NODE_CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1']);
export const MIN_RSA_BITS = 2048;

function checkKeyType(key: KeyObject): void {
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
function readKey(
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
  const parsed = utils.parseKey(secret, format.encrypted ? passphrase : undefined);
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

function publicKeyGiven(): Refusal {
  return secretRefusal('this is a public key; give the private key file (e.g. ~/.ssh/id_ed25519, not the .pub file)');
}

function signingAlgorithm(type: string): string | undefined {
  return type === 'ssh-ed25519' ? undefined : 'sha256';
}

// The stored key must work without a passphrase: parse it back as the
// daemon will, compare the public key, and check that a signature made
// with it verifies under the original public key.
function verifyPrepared(
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
  const again: ParsedKey | Error = utils.parseKey(pem);
  if (again instanceof Error || Array.isArray(again) || !again.isPrivateKey() || again.type !== type) throw failed();
  const pub = again.getPublicSSH();
  if (!pub.equals(publicBlob) || (parsedBlob !== null && !pub.equals(parsedBlob))) throw failed();
  const challenge = randomBytes(32);
  const algorithm = signingAlgorithm(type);
  const signature = again.sign(challenge, algorithm) as Buffer | Error;
  if (signature instanceof Error || !verify(algorithm ?? null, challenge, createPublicKey(original), signature))
    throw failed();
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
  const parsed = utils.parseKey(secret);
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
