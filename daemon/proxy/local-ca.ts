// The proxy front door's local CA (SPEC §11): an ECDSA P-256 CA made once
// per vault, whose certificate is public (`ca.pem`) and whose private key
// lives in the vault; and the leaf certificates it signs for the hosts the
// proxy terminates TLS for. Node cannot make certificates, so this is the
// one module that loads @peculiar/x509 (which needs the Reflect polyfill
// loaded first). It is loaded when a certificate is first made, not with
// the daemon: with its ASN.1 schemas it holds ~10 MiB that a daemon whose
// proxy is never used would carry for nothing.
import type * as X509 from '@peculiar/x509';
import { X509Certificate, createHash, randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { writeFileDurable } from '../../shared/durable-write';

let loaded: typeof X509 | null = null;
function x509Module(): typeof X509 {
  if (loaded) return loaded;
  require('reflect-metadata');
  const m = require('@peculiar/x509') as typeof X509;
  m.cryptoProvider.set(webcrypto);
  return (loaded = m);
}

const EC_KEY = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const EC_SIGN = { ...EC_KEY, hash: 'SHA-256' } as const;
const MINUTE = 60_000;
const CA_VALIDITY_MS = 10 * 365 * 24 * 3600_000;
// Clocks of clients on the same machine can still differ a little (a VM, a
// container with its own time namespace): a leaf is valid from a minute ago.
export const LEAF_BACKDATE_MS = MINUTE;

export interface NewCa {
  certPem: string;
  // PKCS#8 DER of the private key; the caller stores it and wipes it.
  key: Buffer;
  fingerprint: string;
}

export interface Leaf {
  certPem: string;
  // PKCS#8 PEM of the leaf's private key; the caller wipes it once the TLS
  // context holds it.
  keyPem: Buffer;
  notAfter: Date;
}

// A positive serial of 16 random bytes (RFC 5280: at most 20, positive).
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] as number) & 0x7f) | 0x01;
  return bytes.toString('hex');
}

// SHA-256 of the DER certificate, lower-case hex: what the journal records.
export function caFingerprint(certPem: string): string {
  return createHash('sha256').update(new X509Certificate(certPem).raw).digest('hex');
}

// The same hash as people compare it: upper-case pairs joined by colons.
export function fingerprintWithColons(hex: string): string {
  return (hex.toUpperCase().match(/../g) ?? []).join(':');
}

async function exportPkcs8(key: webcrypto.CryptoKey): Promise<Buffer> {
  return Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
}

export async function createLocalCa(now = new Date()): Promise<NewCa> {
  const x509 = x509Module();
  const keys = (await webcrypto.subtle.generateKey(EC_KEY, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: [{ CN: [`postern local CA ${randomBytes(4).toString('hex')}`] }],
    notBefore: new Date(now.getTime() - LEAF_BACKDATE_MS),
    notAfter: new Date(now.getTime() + CA_VALIDITY_MS),
    keys,
    signingAlgorithm: EC_SIGN,
    extensions: [
      // pathlen 0: it signs leaves only, never another CA.
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const certPem = `${cert.toString('pem')}\n`;
  return { certPem, key: await exportPkcs8(keys.privateKey), fingerprint: caFingerprint(certPem) };
}

function derToPem(der: Buffer, label: string): Buffer {
  const b64 = der.toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return Buffer.from(`-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`, 'ascii');
}

// A leaf for `host` (a DNS name, or an IP literal without brackets), valid
// for `validityMs`, signed with the CA key given as PKCS#8 DER (the caller
// owns and wipes it).
export async function signLeaf(
  ca: { certPem: string; key: Buffer },
  host: string,
  validityMs: number,
  now = new Date(),
): Promise<Leaf> {
  const x509 = x509Module();
  const caCert = new x509.X509Certificate(ca.certPem);
  const signingKey = await webcrypto.subtle.importKey('pkcs8', ca.key, EC_KEY, false, ['sign']);
  const keys = (await webcrypto.subtle.generateKey(EC_KEY, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const notAfter = new Date(now.getTime() + validityMs);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: [{ CN: [host] }],
    issuer: caCert.subjectName,
    notBefore: new Date(now.getTime() - LEAF_BACKDATE_MS),
    notAfter,
    publicKey: keys.publicKey,
    signingKey,
    signingAlgorithm: EC_SIGN,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      new x509.SubjectAlternativeNameExtension([{ type: isIP(host) ? 'ip' : 'dns', value: host }], false),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
    ],
  });
  const der = await exportPkcs8(keys.privateKey);
  try {
    return { certPem: `${cert.toString('pem')}\n`, keyPem: derToPem(der, 'PRIVATE KEY'), notAfter };
  } finally {
    der.fill(0);
  }
}

// ca.pem is public: mode 0644, replaced atomically so a client never reads
// half a certificate.
export function writeCaPem(path: string, certPem: string): void {
  writeFileDurable(path, Buffer.from(certPem, 'utf8'), 0o644);
}
