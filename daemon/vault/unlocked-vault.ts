// The vault while the daemon is unlocked: the derived key (needed to write),
// the header, the credential definitions, and every secret sealed under a
// per-unlock memory key (SealedSecrets) until the moment of use.
import { SecretBytes } from '../../shared/secret-bytes';
import { timingSafeEqual } from 'node:crypto';
import { deriveKey } from '../../shared/kdf';
import { wipe } from '../../shared/crypto';
import {
  VaultContents,
  VaultHeader,
  decryptVault,
  parseHeader,
  readVaultFile,
  rewriteVaultFile,
  wipeContents,
} from '../../shared/vault-format';
import { CredentialEntry, VaultMeta, readMeta } from '../../shared/vault-meta';
import { SealedSecret, SealedSecrets, lockedWhileNeeded } from './sealed-secrets';
import { isErrnoError, vaultWriteFailed } from './write-failure';
import { didYouMean } from '../../shared/suggest';
import { checkDefinition } from '../../shared/credential/schema';
import { definitionHash } from '../../shared/credential/compare';
import type { CredentialDef } from '../../shared/credential/types';
import { Refusal, formatProblems } from '../../shared/errors';

export interface StoredCredential {
  entry: Omit<CredentialEntry, 'secret'>;
  secret: SealedSecret;
  // The stored definition checked again at unlock, typed: what the policy
  // engine reads. null when it no longer validates (a vault written by
  // another version, or edited): `problem` says why, and requests with it
  // are refused naming the credential, while the others keep working.
  definition: CredentialDef | null;
  problem: string | null;
}

// A credential updated or removed, told with the version it replaced.
export interface CredentialChange {
  name: string;
  former: StoredCredential;
}

// The definition a request may use, or the refusal that names what is wrong.
export function usableDefinition(stored: StoredCredential): CredentialDef {
  if (stored.definition) return stored.definition;
  throw new Refusal(
    'internal_error',
    `the stored definition of credential "${stored.entry.name}" no longer validates (${stored.problem ?? 'unknown problem'}); a human must fix it with \`postern cred update ${stored.entry.name}\``,
  );
}

function checkStored(definition: unknown): { definition: CredentialDef | null; problem: string | null } {
  const r = checkDefinition(definition);
  return r.ok ? { definition: r.def, problem: null } : { definition: null, problem: formatProblems(r.problems) };
}

export type SigningChange =
  { kind: 'prepare'; secret: Buffer; public: string } | { kind: 'promote' } | { kind: 'abandon' };

export class UnlockedVault {
  private key: Buffer;
  private sealer = new SealedSecrets();
  private creds = new Map<string, StoredCredential>();
  // Every definition this unlock has held: a request checked against one
  // it never held began before a lock (and the unlock since).
  private held = new WeakSet<CredentialDef>();
  private auditSign: SealedSecret;
  private auditBox: SealedSecret;
  private auditNext: SealedSecret | null = null;
  private proxyCaKey: SealedSecret | null = null;
  private meta: Omit<VaultMeta, 'credentials'>;
  header: VaultHeader;

  // Takes ownership of `key` and wipes `contents` once sealed.
  constructor(
    private readonly path: string,
    key: Buffer,
    header: VaultHeader,
    contents: VaultContents,
  ) {
    try {
      const meta = readMeta(contents);
      const blob = (i: number): Buffer => contents.blobs[i] as Buffer;
      this.key = key;
      this.header = header;
      this.auditSign = this.sealer.seal(blob(meta.audit.sign_secret));
      this.auditBox = this.sealer.seal(blob(meta.audit.box_secret));
      if (meta.audit.sign_next) this.auditNext = this.sealer.seal(blob(meta.audit.sign_next.secret));
      if (meta.proxy_ca) this.proxyCaKey = this.sealer.seal(blob(meta.proxy_ca.key));
      for (const c of meta.credentials) {
        const { secret, ...entry } = c;
        const stored = { entry, secret: this.sealer.seal(blob(secret)), ...checkStored(entry.definition) };
        if (stored.definition) this.held.add(stored.definition);
        this.creds.set(c.name, stored);
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

  // The public key of a signing key being rotated in, if any.
  get auditNextPublicKey(): string | null {
    return this.meta.audit.sign_next?.public ?? null;
  }

  // The audit signing key (or the one being rotated in), opened only for
  // the duration of `fn`.
  withAuditSigningKey<T>(fn: (privateKey: Buffer) => Promise<T>, which: 'current' | 'next' = 'current'): Promise<T> {
    const sealed = which === 'next' ? this.auditNext : this.auditSign;
    if (!sealed) return Promise.reject(new Error('no signing key is being rotated in'));
    return this.sealer.withOpenAsync(sealed, fn);
  }

  // The proxy front door's CA certificate (PEM), or null for a vault that
  // has none yet.
  get proxyCaCert(): string | null {
    return this.meta.proxy_ca?.cert_pem ?? null;
  }

  // The CA's private key (PKCS#8 DER), opened only for the duration of `fn`
  // (a signature), wiped after it.
  withProxyCaKey<T>(fn: (key: Buffer) => Promise<T>): Promise<T> {
    if (this.sealer.wiped) return Promise.reject(lockedWhileNeeded());
    if (!this.proxyCaKey) return Promise.reject(new Error('the vault has no proxy CA'));
    return this.sealer.withOpenAsync(this.proxyCaKey, fn);
  }

  credentials(): StoredCredential[] {
    return [...this.creds.values()].sort((a, b) => a.entry.name.localeCompare(b.entry.name));
  }

  credential(name: string): StoredCredential | undefined {
    return this.creds.get(name);
  }

  // 'no credential named "githb" (did you mean "github"?)': names are not
  // secret (GET /v1/credentials lists them all), so a near miss is named.
  noSuchCredential(name: string): string {
    return `no credential named "${name}"${didYouMean(name, [...this.creds.keys()])}`;
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

  // The one door to a credential's secret: open for the duration of `fn`,
  // as a SecretBytes (it cannot be serialised), wiped after it; and only for
  // the definition the request was checked against (a request that waited
  // while its credential was removed or changed is refused, nothing sent).
  withCredentialSecret<T>(def: CredentialDef, fn: (secret: SecretBytes) => Promise<T>): Promise<T> {
    // After a lock the map is empty too; the lock is the reason to give.
    if (this.sealer.wiped) return Promise.reject(lockedWhileNeeded());
    const changed = this.changedSince(def);
    if (changed) return Promise.reject(changed);
    return this.sealer.withOpenAsync(this.creds.get(def.name)!.secret, (plain) => fn(new SecretBytes(plain)));
  }

  // A secret the vault held before a change (stores/former-values.ts), opened
  // only to search responses for it. Sealed by this instance: after a lock
  // nothing is opened.
  withReplacedSecret<T>(sealed: SealedSecret, fn: (secret: SecretBytes) => Promise<T>): Promise<T> {
    if (this.sealer.wiped) return Promise.reject(lockedWhileNeeded());
    return this.sealer.withOpenAsync(sealed, (plain) => fn(new SecretBytes(plain)));
  }

  // Why a request checked against `def` may no longer use the credential
  // stored under its name, or null: the vault locked (and unlocked again)
  // since, the credential removed (cred rm), or its definition changed
  // (cred update) while the request waited (for DNS, a human, the
  // journal). The same definition (a secret replaced alone) is the
  // credential it was checked against.
  changedSince(def: CredentialDef): Refusal | null {
    if (!this.held.has(def))
      return new Refusal(
        'vault_locked',
        `the vault was locked while this request waited; nothing was sent: once it is unlocked, send the request again`,
      );
    const stored = this.creds.get(def.name);
    if (stored === undefined)
      return new Refusal(
        'unknown_credential',
        `credential "${def.name}" was removed while this request waited (postern cred rm); nothing was sent`,
      );
    if (stored.definition === def) return null;
    if (stored.definition !== null && definitionHash(stored.definition) === definitionHash(def)) return null;
    return new Refusal(
      'busy',
      `credential "${def.name}" was changed while this request waited (postern cred update); nothing was sent: send it again, to have it checked against the new definition`,
    );
  }

  sealSecret(secret: Buffer): SealedSecret {
    return this.sealer.seal(secret);
  }

  // Apply a change to the credential map and write the vault durably. The
  // in-memory state changes only once the new file is on disk.
  // `journalHead` is the journal's head after the entry describing this
  // change, recorded in the vault for rollback detection.
  // `signing` changes the audit signing keys: `prepare` stores a new key
  // beside the current one, `promote` makes it the current one, `abandon`
  // forgets it. `proxyCa` stores the proxy front door's CA (the caller
  // still owns and wipes `key`).
  commit(
    journalHead: string,
    change: (next: Map<string, StoredCredential>) => void,
    opts: {
      approvedConfig?: string;
      newKey?: { key: Buffer; header: VaultHeader };
      signing?: SigningChange;
      proxyCa?: { certPem: string; key: Buffer };
      // The generation this write makes, if more than the next: an accepted
      // rollback goes past every generation the journal recorded, since a
      // vault's generation never goes down (docs/audit-format.md).
      generationAtLeast?: number;
    } = {},
  ): void {
    const next = new Map(this.creds);
    change(next);
    const signing = this.nextSigning(opts.signing);
    const blobs: Buffer[] = [this.sealer.open(signing.sign), this.sealer.open(this.auditBox)];
    const audit: VaultMeta['audit'] = {
      sign_public: signing.signPublic,
      box_public: this.meta.audit.box_public,
      sign_secret: 0,
      box_secret: 1,
    };
    if (signing.next) {
      blobs.push(this.sealer.open(signing.next.sealed));
      audit.sign_next = { public: signing.next.public, secret: blobs.length - 1 };
    }
    const credentials: CredentialEntry[] = [];
    for (const c of next.values()) {
      blobs.push(this.sealer.open(c.secret));
      credentials.push({ ...c.entry, secret: blobs.length - 1 });
    }
    const proxyCa = this.nextProxyCa(opts.proxyCa);
    let proxyCaMeta: VaultMeta['proxy_ca'];
    if (proxyCa) {
      blobs.push(this.sealer.open(proxyCa.sealed));
      proxyCaMeta = { cert_pem: proxyCa.certPem, key: blobs.length - 1 };
    }
    const meta: VaultMeta = {
      ...this.meta,
      journal_head: journalHead,
      audit,
      credentials,
      ...(proxyCaMeta ? { proxy_ca: proxyCaMeta } : {}),
    };
    const contents: VaultContents = { meta, blobs };
    const baseHeader = opts.newKey ? opts.newKey.header : this.header;
    const header: VaultHeader = {
      ...baseHeader,
      // The rewrite adds one.
      generation: Math.max(this.header.generation, (opts.generationAtLeast ?? 0) - 1),
      approvedConfig: opts.approvedConfig ?? this.header.approvedConfig,
    };
    const key = opts.newKey ? opts.newKey.key : this.key;
    try {
      this.header = rewriteVaultFile(this.path, key, header, contents);
    } catch (e) {
      throw this.writeFailure(e);
    } finally {
      wipeContents(contents);
    }
    this.creds = next;
    for (const c of next.values()) if (c.definition) this.held.add(c.definition);
    this.meta = { ...this.meta, journal_head: journalHead, audit, ...(proxyCaMeta ? { proxy_ca: proxyCaMeta } : {}) };
    this.proxyCaKey = proxyCa?.sealed ?? null;
    this.auditSign = signing.sign;
    this.auditNext = signing.next?.sealed ?? null;
    if (opts.newKey) {
      wipe(this.key);
      this.key = opts.newKey.key;
    }
  }

  // A filesystem error is a refusal naming the file, as long as the file on
  // disk is still this generation (the rename did not happen); anything else
  // is passed on as it is.
  private writeFailure(e: unknown): unknown {
    if (!isErrnoError(e)) return e;
    try {
      if (parseHeader(readVaultFile(this.path)).header.generation !== this.header.generation) return e;
    } catch (r) {
      // What is at the vault's path is not a vault (a directory, a device,
      // nothing): the rename, which would have put this file there, did
      // not happen. The open vault in memory is unchanged.
      if (r instanceof Refusal)
        return new Refusal(
          'bad_environment',
          `the vault ${this.path} could not be written (${e.code ?? 'error'}); nothing was changed: ${r.message}, then retry`,
          { errno: e.code ?? null, path: this.path },
        );
      return e;
    }
    return vaultWriteFailed(this.path, e);
  }

  // The CA a write stores: a new one, else the one the vault has (kept by
  // every write), else none.
  private nextProxyCa(
    fresh: { certPem: string; key: Buffer } | undefined,
  ): { sealed: SealedSecret; certPem: string } | null {
    if (fresh) return { sealed: this.sealer.seal(fresh.key), certPem: fresh.certPem };
    if (this.proxyCaKey && this.meta.proxy_ca) return { sealed: this.proxyCaKey, certPem: this.meta.proxy_ca.cert_pem };
    return null;
  }

  private nextSigning(change: SigningChange | undefined): {
    sign: SealedSecret;
    signPublic: string;
    next: { sealed: SealedSecret; public: string } | null;
  } {
    const pending =
      this.auditNext && this.meta.audit.sign_next
        ? { sealed: this.auditNext, public: this.meta.audit.sign_next.public }
        : null;
    const current = { sign: this.auditSign, signPublic: this.meta.audit.sign_public };
    if (!change) return { ...current, next: pending };
    if (change.kind === 'prepare')
      return { ...current, next: { sealed: this.sealer.seal(change.secret), public: change.public } };
    if (change.kind === 'abandon') return { ...current, next: null };
    if (!pending) throw new Error('no signing key is being rotated in');
    return { sign: pending.sealed, signPublic: pending.public, next: null };
  }

  wipe(): void {
    wipe(this.key);
    this.sealer.wipe();
    this.creds.clear();
  }
}

// Derive the key from the passphrase with the header's own limits, then
// decrypt. A wrong passphrase surfaces as Refusal('wrong_passphrase').
export async function unlockVaultFile(
  path: string,
  file: Buffer,
  header: VaultHeader,
  passphrase: Buffer,
): Promise<UnlockedVault> {
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
