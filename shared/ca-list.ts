// The certificates of a PEM bundle (http.ca_file), named the way a person
// checks them: subject and SHA-256 fingerprint. The canonical config lists
// them, so a change to the bundle can be shown certificate by certificate
// (SPEC §3) rather than as a hash.
import { X509Certificate } from 'node:crypto';

export interface CaCertificate {
  subject: string;
  sha256: string;
}

export function pemBlocks(bytes: Buffer): string[] {
  return bytes.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
}

// In file order. A block Node cannot parse is named by its position (the
// config loader refuses such files, so this is for records written by hand).
export function caCertificates(bytes: Buffer): CaCertificate[] {
  return pemBlocks(bytes).map((block, i) => {
    try {
      const cert = new X509Certificate(block);
      return { subject: cert.subject.split('\n').join(', '), sha256: cert.fingerprint256 };
    } catch {
      return { subject: `(certificate ${i + 1} cannot be parsed)`, sha256: '' };
    }
  });
}
