// What the vault's encrypted body holds, above the binary container of
// vault-format.ts: a JSON document (`meta`) whose secret parts live in
// blobs referenced by index, so secrets never become JavaScript strings.
import { z } from 'zod';
import { Refusal } from './errors';
import type { VaultContents } from './vault-format';

const blobIndex = z.number().int().min(0);

const credentialEntry = z
  .object({
    name: z.string(),
    kind: z.enum(['http', 'ssh']),
    definition: z.record(z.string(), z.unknown()),
    definition_hash: z.string(),
    secret: blobIndex,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .strict();

export const vaultMetaSchema = z
  .object({
    format: z.literal(1),
    created_at: z.string(),
    audit: z
      .object({
        sign_public: z.string(),
        box_public: z.string(),
        sign_secret: blobIndex,
        box_secret: blobIndex,
        // A new signing key during its rotation (written before the journal
        // names it, removed once the journal has taken it over).
        sign_next: z.object({ public: z.string(), secret: blobIndex }).strict().optional(),
      })
      .strict(),
    credentials: z.array(credentialEntry),
    // The journal this vault belongs to, and its head at the vault's last
    // write (SEQ:HASH): checked at unlock to detect a rolled-back vault or a
    // cut-back or swapped journal (SPEC §8).
    journal_id: z.string().regex(/^[0-9a-f]{32}$/),
    journal_head: z.string(),
    // The proxy front door's local CA (SPEC §11): its certificate (PEM,
    // public, also written to ca.pem) and the PKCS#8 DER of its private
    // key. Absent from vaults made before it existed, until first use.
    proxy_ca: z.object({ cert_pem: z.string(), key: blobIndex }).strict().optional(),
  })
  .strict();

export type VaultMeta = z.infer<typeof vaultMetaSchema>;
export type CredentialEntry = z.infer<typeof credentialEntry>;

export function readMeta(contents: VaultContents): VaultMeta {
  const parsed = vaultMetaSchema.safeParse(contents.meta);
  if (!parsed.success) {
    throw new Refusal(
      'vault_corrupt',
      'the vault decrypted but its contents are not understood (written by another version?); restore it from a backup',
    );
  }
  const meta = parsed.data;
  const indexes = [
    meta.audit.sign_secret,
    meta.audit.box_secret,
    ...(meta.audit.sign_next ? [meta.audit.sign_next.secret] : []),
    ...meta.credentials.map((c) => c.secret),
    ...(meta.proxy_ca ? [meta.proxy_ca.key] : []),
  ];
  if (indexes.some((i) => i >= contents.blobs.length) || new Set(indexes).size !== indexes.length) {
    throw new Refusal(
      'vault_corrupt',
      'the vault decrypted but refers to secrets it does not contain; restore it from a backup',
    );
  }
  return meta;
}
