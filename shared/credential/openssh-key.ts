// Encoding a key as an unencrypted OpenSSH private key ("openssh-key-v1",
// cipher none). Every buffer holding key material made here is wiped.
import { createHash, KeyObject } from 'node:crypto';
import { OPENSSH_BEGIN, OPENSSH_END, OPENSSH_MAGIC } from './key-format';

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
export function mpint(b: Buffer): Buffer {
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

export function encodeKey(key: KeyObject): Encoded {
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
export function toOpenSshPem(key: KeyObject): { pem: Buffer; publicBlob: Buffer; type: string } {
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
