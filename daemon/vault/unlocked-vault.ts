// The vault while the daemon is unlocked: the derived key (needed to write),
// the header, the credential definitions, and every secret sealed under a
// per-unlock memory key (SealedSecrets) until the moment of use.
import { timingSafeEqual } from 'node:crypto';
import { deriveKey } from '../../shared/kdf';
import { wipe } from '../../shared/crypto';
import { VaultContents, VaultHeader, decryptVault, rewriteVaultFile, wipeContents } from '../../shared/vault-format';
import { CredentialEntry, VaultMeta, readMeta } from '../../shared/vault-meta';
import { SealedSecret, SealedSecrets } from './sealed-secrets';

export interface StoredCredential {
  entry: Omit<CredentialEntry, 'secret'>;
  secret: SealedSecret;
}

export class UnlockedVault {
  private key: Buffer;
  private sealer = new SealedSecrets();
  private creds = new Map<string, StoredCredential>();
  private auditSign: SealedSecret;
  private auditBox: SealedSecret;
  private meta: Omit<VaultMeta, 'credentials'>;
  header: VaultHeader;

  // Takes ownership of `key` and wipes `contents` once sealed.
  constructor(private readonly path: string, key: Buffer, header: VaultHeader, contents: VaultContents) {
    try {
      const meta = readMeta(contents);
      const blob = (i: number): Buffer => contents.blobs[i] as Buffer;
      this.key = key;
      this.header = header;
      this.auditSign = this.sealer.seal(blob(meta.audit.sign_secret));
      this.auditBox = this.sealer.seal(blob(meta.audit.box_secret));
      for (const c of meta.credentials) {
        const { secret, ...entry } = c;
        this.creds.set(c.name, { entry, secret: this.sealer.seal(blob(secret)) });
      }
      const { credentials: _ignored, ...rest } = meta;
      void _ignored;
      this.meta = rest;
    } catch (e) {
      wipe(key);
      this.sealer.wipe();
      throw e;
    } finally {
      wipeContents(contents);
    }
  }

  get generation(): number {
    return this.header.generation;
  }

  get auditPublicKey(): string {
    return this.meta.audit.sign_public;
  }

  get journalId(): string {
    return this.meta.journal_id;
  }

  // SEQ:HASH of the journal's head when the vault was last written.
  get journalHead(): string {
    return this.meta.journal_head;
  }

  // The audit signing key, opened only for the duration of `fn`.
  withAuditSigningKey<T>(fn: (privateKey: Buffer) => T): T {
    return this.sealer.withOpen(this.auditSign, fn);
  }

  credentials(): StoredCredential[] {
    return [...this.creds.values()].sort((a, b) => a.entry.name.localeCompare(b.entry.name));
  }

  credential(name: string): StoredCredential | undefined {
    return this.creds.get(name);
  }

  // Proof of the passphrase for a widening action: derive with the vault's own
  // salt and limits, and compare with the key in hand in constant time.
  async verifyPassphrase(passphrase: Buffer): Promise<boolean> {
    const candidate = await deriveKey(passphrase, this.header.salt, this.header.opslimit, this.header.memlimit);
    try {
      return candidate.length === this.key.length && timingSafeEqual(candidate, this.key);
    } finally {
      wipe(candidate);
    }
  }

  // The one door to a credential's secret: opened only for `fn`, wiped after.
  withCredentialSecret<T>(name: string, fn: (secret: Buffer) => Promise<T>): Promise<T> {
    const c = this.creds.get(name);
    if (!c) return Promise.reject(new Error(`no credential ${name}`));
    return this.sealer.withOpenAsync(c.secret, fn);
  }

  sealSecret(secret: Buffer): SealedSecret {
    return this.sealer.seal(secret);
  }

  // Apply a change to the credential map and write the vault durably. The
  // in-memory state changes only once the new file is on disk.
  // `journalHead` is the journal's head after the entry describing this
  // change, recorded in the vault for rollback detection.
  commit(journalHead: string, change: (next: Map<string, StoredCredential>) => void, opts: { approvedConfig?: string; newKey?: { key: Buffer; header: VaultHeader } } = {}): void {
    const next = new Map(this.creds);
    change(next);
    const blobs: Buffer[] = [this.sealer.open(this.auditSign), this.sealer.open(this.auditBox)];
    const credentials: CredentialEntry[] = [];
    for (const c of next.values()) {
      blobs.push(this.sealer.open(c.secret));
      credentials.push({ ...c.entry, secret: blobs.length - 1 });
    }
    const meta: VaultMeta = { ...this.meta, journal_head: journalHead, audit: { ...this.meta.audit, sign_secret: 0, box_secret: 1 }, credentials };
    const contents: VaultContents = { meta, blobs };
    const baseHeader = opts.newKey ? opts.newKey.header : this.header;
    const header: VaultHeader = { ...baseHeader, generation: this.header.generation, approvedConfig: opts.approvedConfig ?? this.header.approvedConfig };
    const key = opts.newKey ? opts.newKey.key : this.key;
    try {
      this.header = rewriteVaultFile(this.path, key, header, contents);
    } finally {
      wipeContents(contents);
    }
    this.creds = next;
    this.meta = { ...this.meta, journal_head: journalHead };
    if (opts.newKey) {
      wipe(this.key);
      this.key = opts.newKey.key;
    }
  }

  wipe(): void {
    wipe(this.key);
    this.sealer.wipe();
    this.creds.clear();
  }
}

// Derive the key from the passphrase with the header's own limits, then
// decrypt. A wrong passphrase surfaces as Refusal('wrong_passphrase').
export async function unlockVaultFile(path: string, file: Buffer, header: VaultHeader, passphrase: Buffer): Promise<UnlockedVault> {
  const key = await deriveKey(passphrase, header.salt, header.opslimit, header.memlimit);
  let opened: { header: VaultHeader; contents: VaultContents };
  try {
    opened = decryptVault(file, key);
  } catch (e) {
    wipe(key);
    throw e;
  }
  return new UnlockedVault(path, key, opened.header, opened.contents);
}
