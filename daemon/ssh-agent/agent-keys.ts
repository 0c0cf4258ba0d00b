// The keys of the ssh-agent front door: the public blob and agent-protocol
// signatures of a stored SSH key (kept in the vault as an unencrypted
// OpenSSH private key), and the check of a server host key's signature on a
// session-bind. Public key blobs and signature blobs are RFC 4253 §6.6
// (RSA: RFC 8332; ECDSA: RFC 5656 §3.1; Ed25519: RFC 8709).
import { createPrivateKey, createPublicKey, sign, verify, KeyObject } from 'node:crypto';
import type { ParsedKey } from 'ssh2';
import { ssh2 } from '../../shared/ssh2-module';
import { mpint } from '../../shared/credential/openssh-key';
import { SIGN_FLAGS } from './messages';
import { WireError, WireReader, str } from './wire';

export { fingerprintOf } from '../pipeline/connect-ssh';

// A stored key that cannot be used for the signature asked for. The message
// names what and never contains key material.
export class AgentKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AgentKeyError';
  }
}

interface Curve {
  jwk: string; // the JWK curve name
  hash: string; // the hash RFC 5656 §6.2.1 assigns to the curve
  size: number; // bytes of a coordinate or scalar
}

const CURVES: Readonly<Record<string, Curve>> = {
  nistp256: { jwk: 'P-256', hash: 'sha256', size: 32 },
  nistp384: { jwk: 'P-384', hash: 'sha384', size: 48 },
  nistp521: { jwk: 'P-521', hash: 'sha512', size: 66 },
};

// OpenSSH refuses RSA keys below this size (SSH_RSA_MINIMUM_MODULUS_SIZE).
const MIN_RSA_HOST_BITS = 1024;
// A larger public exponent makes each verification as costly as a private
// key operation, for anyone who can send a session-bind; OpenSSL refuses
// more beside moduli over 3072 bits, and host keys use 65537.
const MAX_RSA_EXPONENT_BITS = 64;

const RSA_HASHES: Readonly<Record<string, string>> = { 'rsa-sha2-256': 'sha256', 'rsa-sha2-512': 'sha512' };

interface PublicKey {
  type: string; // the key type named in the blob
  key: KeyObject;
  curve?: Curve; // ECDSA
  modulusBytes?: number; // RSA
}

const b64u = (b: Buffer): string => b.toString('base64url');

// A public key blob of a supported type, read strictly; throws WireError or
// node's own error on anything else.
function readPublicBlob(blob: Buffer): PublicKey {
  const r = new WireReader(blob);
  const type = r.text('key type');
  if (type === 'ssh-ed25519') {
    const pub = r.string('ed25519 public key');
    r.end('ed25519 key blob');
    if (pub.length !== 32) throw new WireError(`ed25519 public key has ${pub.length} bytes, not 32`);
    return { type, key: createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64u(pub) }, format: 'jwk' }) };
  }
  if (type.startsWith('ecdsa-sha2-')) {
    const name = type.slice('ecdsa-sha2-'.length);
    const curve = CURVES[name];
    if (curve === undefined) throw new WireError(`key type ${type} is not supported`);
    if (r.text('curve name') !== name) throw new WireError(`curve name does not match key type ${type}`);
    const q = r.string('ecdsa public point');
    r.end('ecdsa key blob');
    if (q.length !== 1 + 2 * curve.size || q[0] !== 4) throw new WireError('ecdsa public point is not uncompressed');
    const x = q.subarray(1, 1 + curve.size);
    const y = q.subarray(1 + curve.size);
    const key = createPublicKey({ key: { kty: 'EC', crv: curve.jwk, x: b64u(x), y: b64u(y) }, format: 'jwk' });
    return { type, key, curve };
  }
  if (type === 'ssh-rsa') {
    const e = r.mpint('rsa exponent');
    const n = r.mpint('rsa modulus');
    r.end('rsa key blob');
    if (e.length === 0) throw new WireError('rsa exponent is 0');
    const eBits = e.length * 8 - Math.clz32(e[0] as number) + 24;
    if (eBits > MAX_RSA_EXPONENT_BITS)
      throw new WireError(`rsa exponent has ${eBits} bits, more than ${MAX_RSA_EXPONENT_BITS}`);
    const key = createPublicKey({ key: { kty: 'RSA', n: b64u(n), e: b64u(e) }, format: 'jwk' });
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_HOST_BITS) throw new WireError(`rsa modulus has ${bits} bits, fewer than ${MIN_RSA_HOST_BITS}`);
    return { type, key, modulusBytes: n.length };
  }
  throw new WireError(`key type ${type} is not supported`);
}

function parsePublicBlob(blob: Buffer): PublicKey | null {
  try {
    return readPublicBlob(blob);
  } catch {
    return null;
  }
}

// The key type of a well-formed public key blob of a type postern can use
// ("ssh-ed25519", "ecdsa-sha2-nistp256/384/521", "ssh-rsa"), else null.
export function keyTypeOf(blob: Buffer): string | null {
  return parsePublicBlob(blob)?.type ?? null;
}

function parseStored(privateKeyText: Buffer): ParsedKey {
  const parsed = ssh2().utils.parseKey(privateKeyText);
  if (parsed instanceof Error || Array.isArray(parsed) || !parsed.isPrivateKey()) {
    throw new AgentKeyError('the stored SSH key could not be read as an unencrypted OpenSSH private key');
  }
  return parsed;
}

// The SSH public key blob of a stored key, as in its .pub file (base64 decoded).
export function publicBlobOf(privateKeyText: Buffer): Buffer {
  return parseStored(privateKeyText).getPublicSSH();
}

// The signature algorithm an agent uses for this key type and these flags;
// RSA without a SHA-2 flag would be ssh-rsa (SHA-1), which is refused.
function signatureAlgorithm(type: string, flags: number): string {
  if (type !== 'ssh-rsa') return type;
  if (flags & SIGN_FLAGS.RSA_SHA2_256) return 'rsa-sha2-256';
  if (flags & SIGN_FLAGS.RSA_SHA2_512) return 'rsa-sha2-512';
  throw new AgentKeyError(
    'an RSA signature was asked for without the SHA-2 flags (rsa-sha2-256 or rsa-sha2-512); ssh-rsa (SHA-1) signatures are refused',
  );
}

// The signature algorithm a sign request with this public key and these
// flags gets, known before any secret is opened.
export function signatureAlgorithmFor(keyBlob: Buffer, flags: number): string {
  const type = keyTypeOf(keyBlob);
  if (type === null) throw new AgentKeyError('the key asked to sign with is not a key type postern can use');
  return signatureAlgorithm(type, flags);
}

// The signature blob an agent answers with: string algorithm, string signature.
export function signAsAgent(privateKeyText: Buffer, data: Buffer, flags: number): Buffer {
  const parsed = parseStored(privateKeyText);
  const type = parsed.type as string;
  const algorithm = signatureAlgorithm(type, flags);
  const key = createPrivateKey(parsed.getPrivatePEM());
  if (type === 'ssh-ed25519') return Buffer.concat([str(algorithm), str(sign(null, data, key))]);
  const rsaHash = RSA_HASHES[algorithm];
  if (rsaHash !== undefined) return Buffer.concat([str(algorithm), str(sign(rsaHash, data, key))]);
  const curve = CURVES[type.slice('ecdsa-sha2-'.length)];
  if (!type.startsWith('ecdsa-sha2-') || curve === undefined) {
    throw new AgentKeyError(`stored SSH keys of type ${type} cannot sign here`);
  }
  const rs = sign(curve.hash, data, { key, dsaEncoding: 'ieee-p1363' });
  const inner = Buffer.concat([mpint(rs.subarray(0, curve.size)), mpint(rs.subarray(curve.size))]);
  return Buffer.concat([str(algorithm), str(inner)]);
}

// A big-endian magnitude left-padded with zeros to size bytes; throws when longer.
function padTo(b: Buffer, size: number, what: string): Buffer {
  if (b.length > size) throw new WireError(`${what} has ${b.length} bytes, more than ${size}`);
  return Buffer.concat([Buffer.alloc(size - b.length), b]);
}

function verifyWith(pk: PublicKey, data: Buffer, signatureBlob: Buffer): boolean {
  const r = new WireReader(signatureBlob);
  const algorithm = r.text('signature algorithm');
  const sig = r.string('signature');
  r.end('signature blob');
  if (pk.type === 'ssh-ed25519') {
    return algorithm === pk.type && sig.length === 64 && verify(null, data, pk.key, sig);
  }
  if (pk.curve !== undefined) {
    if (algorithm !== pk.type) return false;
    const s = new WireReader(sig);
    const rPart = padTo(s.mpint('ecdsa r'), pk.curve.size, 'ecdsa r');
    const sPart = padTo(s.mpint('ecdsa s'), pk.curve.size, 'ecdsa s');
    s.end('ecdsa signature');
    return verify(pk.curve.hash, data, { key: pk.key, dsaEncoding: 'ieee-p1363' }, Buffer.concat([rPart, sPart]));
  }
  const hash = RSA_HASHES[algorithm];
  if (hash === undefined || pk.modulusBytes === undefined) return false; // ssh-rsa (SHA-1) among others
  // OpenSSH accepts a signature shorter than the modulus and pads it.
  return verify(hash, data, pk.key, padTo(sig, pk.modulusBytes, 'rsa signature'));
}

// Whether signatureBlob is the host key's valid signature of data. False for
// any key or signature type other than ed25519, ecdsa-sha2-nistp256/384/521,
// rsa-sha2-256/512, for a signature algorithm that is not the key's, and for
// anything malformed: never a throw.
export function verifyHostSignature(hostKeyBlob: Buffer, data: Buffer, signatureBlob: Buffer): boolean {
  const pk = parsePublicBlob(hostKeyBlob);
  if (pk === null) return false;
  try {
    return verifyWith(pk, data, signatureBlob);
  } catch {
    return false;
  }
}
