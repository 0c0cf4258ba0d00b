// The proxy front door's CA as tests reach it: a vault made before postern
// had one (the CA taken out of a freshly made vault, generation unchanged,
// as if an older init wrote it), and the forms of the CA private key to
// search for in bytes postern emits.
import { createPrivateKey } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { encodeVault, openVaultFile } from '../../shared/vault-format';
import { writeFileDurable } from '../../shared/durable-write';
import { wipe } from '../../shared/crypto';
import { canonicalJson, CanonicalValue } from '../../shared/canonical-json';
import { PASSPHRASE } from './postern';

// Rewrites the vault at `home` without proxy_ca (and its blob) and removes
// ca.pem; its approved config loses the [proxy] table, as one approved
// before the table existed. The generation stays the one init wrote, so the
// journal still vouches for the vault.
export async function removeProxyCa(home: string): Promise<void> {
  const path = join(home, 'vault');
  const { key, header, contents } = await openVaultFile(path, Buffer.from(PASSPHRASE));
  try {
    const meta = contents.meta as { proxy_ca?: { key: number } };
    if (!meta.proxy_ca) throw new Error('the vault has no proxy_ca to remove');
    const index = meta.proxy_ca.key;
    if (index !== contents.blobs.length - 1) throw new Error('the CA key is expected to be the last blob');
    delete meta.proxy_ca;
    wipe(contents.blobs.pop() as Buffer);
    const approved = JSON.parse(header.approvedConfig) as Record<string, CanonicalValue>;
    if (!approved['proxy']) throw new Error('the approved config has no [proxy] table to remove');
    delete approved['proxy'];
    writeFileDurable(path, encodeVault({ ...header, approvedConfig: canonicalJson(approved) }, key, contents));
  } finally {
    wipe(key);
    contents.blobs.forEach(wipe);
  }
  rmSync(join(home, 'ca.pem'), { force: true });
}

// The CA private key as the vault holds it (PKCS#8 DER), read with the
// passphrase; null when the vault has none.
export async function proxyCaKey(home: string): Promise<Buffer | null> {
  const { key, contents } = await openVaultFile(join(home, 'vault'), Buffer.from(PASSPHRASE));
  wipe(key);
  const meta = contents.meta as { proxy_ca?: { key: number } };
  return meta.proxy_ca ? Buffer.from(contents.blobs[meta.proxy_ca.key] as Buffer) : null;
}

// The key's bytes and its private scalar, raw and in the encodings a leak
// would most likely take: hex (either case), base64, base64url.
export function keyForms(pkcs8: Buffer): string[] {
  const jwk = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ format: 'jwk' });
  const scalar = Buffer.from(jwk.d as string, 'base64url');
  const forms = new Set<string>();
  for (const b of [pkcs8, scalar]) {
    forms.add(b.toString('latin1'));
    forms.add(b.toString('hex'));
    forms.add(b.toString('hex').toUpperCase());
    forms.add(b.toString('base64').replace(/=+$/, ''));
    forms.add(b.toString('base64url'));
  }
  // PEM wraps base64 at 64 characters: its first line is a form too.
  forms.add(pkcs8.toString('base64').slice(0, 64));
  return [...forms];
}

export function findKey(text: string | Buffer, forms: readonly string[]): string[] {
  const hay = typeof text === 'string' ? text : text.toString('latin1');
  return forms.filter((f) => hay.includes(f));
}
