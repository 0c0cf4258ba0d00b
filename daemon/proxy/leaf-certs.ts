// The certificates the proxy front door presents when it terminates TLS for
// a CONNECT (SPEC §11): one leaf per host, signed by the vault's local CA
// (made here at first use for a vault that has none), cached until 90 % of
// its life and forgotten at lock. The CA key is opened from the vault only
// for each signature.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import { Refusal } from '../../shared/errors';
import type { UnlockedVault } from '../vault/unlocked-vault';
import { lockedWhileNeeded } from '../vault/sealed-secrets';
import type { VaultWrites } from '../vault-writes';
import { LEAF_BACKDATE_MS, NewCa, createLocalCa, signLeaf, writeCaPem } from './local-ca';

// Hosts an agent can make the daemon sign for are bounded: the oldest leaf
// is dropped first.
export const MAX_CACHED_HOSTS = 1024;
const RENEW_AT = 0.9;

export interface LeafDeps {
  // The unlocked vault, or the refusal that says what lifts the lock.
  vault(): UnlockedVault;
  // Changes at every lock and unlock.
  lockEpoch(): number;
  // proxy.leaf_validity, read at each signature.
  leafValidity(): number;
  // Stores a CA made at first use (a journaled vault write) and writes ca.pem.
  storeCa(vault: UnlockedVault, ca: NewCa): Promise<void>;
  now?(): number;
}

interface Cached {
  context: tls.SecureContext;
  certPem: string;
  // Valid from (its notBefore) until renewed: a leaf signed while the clock
  // ran ahead is not yet valid once it is set back ("certificate is not yet
  // valid" for as long as the step), so it is signed again.
  validFrom: number;
  renewAt: number;
}

const DNS_NAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)*$/;

// The cache key and the name put in the certificate: DNS names in lower
// case, IP literals as written (without brackets).
function leafName(host: string): string {
  if (isIP(host)) return host;
  const name = host.toLowerCase();
  if (!DNS_NAME.test(name))
    throw new Refusal('bad_request', `${JSON.stringify(host.slice(0, 80))} is not a host name or an IP address`);
  return name;
}

export class LeafCertificates {
  // Map order is insertion order: the first entry is the oldest.
  private readonly cache = new Map<string, Cached>();
  private readonly signing = new Map<string, Promise<Cached>>();
  private creatingCa: Promise<void> | null = null;

  constructor(private readonly deps: LeafDeps) {}

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  // A TLS context holding the leaf for `host` and its key (ALPN is the
  // server's to set).
  async secureContextFor(host: string): Promise<tls.SecureContext> {
    return (await this.leafFor(host)).context;
  }

  // The leaf certificate (PEM) that secureContextFor(host) presents.
  async certificateFor(host: string): Promise<string> {
    return (await this.leafFor(host)).certPem;
  }

  private leafFor(host: string): Promise<Cached> {
    const name = leafName(host);
    const hit = this.cache.get(name);
    const now = this.now();
    if (hit && now < hit.renewAt && now >= hit.validFrom) return Promise.resolve(hit);
    const inFlight = this.signing.get(name);
    if (inFlight) return inFlight;
    const made = this.sign(name).finally(() => this.signing.delete(name));
    this.signing.set(name, made);
    return made;
  }

  private async sign(name: string): Promise<Cached> {
    const epoch = this.deps.lockEpoch();
    const vault = this.deps.vault();
    await this.ensureCa(vault);
    const certPem = vault.proxyCaCert as string;
    const validity = this.deps.leafValidity();
    const now = this.now();
    const leaf = await vault.withProxyCaKey((key) => signLeaf({ certPem, key }, name, validity, new Date(now)));
    let context: tls.SecureContext;
    try {
      context = tls.createSecureContext({ cert: leaf.certPem, key: leaf.keyPem });
    } finally {
      leaf.keyPem.fill(0);
    }
    // Signed under a lock that has since been lifted and put back: nothing
    // made before a lock outlives it.
    if (this.deps.lockEpoch() !== epoch) throw lockedWhileNeeded();
    const entry = {
      context,
      certPem: leaf.certPem,
      validFrom: now - LEAF_BACKDATE_MS,
      renewAt: now + RENEW_AT * validity,
    };
    this.cache.delete(name);
    this.cache.set(name, entry);
    while (this.cache.size > MAX_CACHED_HOSTS) this.cache.delete(this.cache.keys().next().value as string);
    return entry;
  }

  // The vault's CA, made now if it has none (one creation at a time; a
  // vault opened again meanwhile gets its own).
  async ensureCa(vault: UnlockedVault = this.deps.vault()): Promise<void> {
    while (!vault.proxyCaCert) {
      this.creatingCa ??= (async () => {
        const ca = await createLocalCa();
        try {
          await this.deps.storeCa(vault, ca);
        } finally {
          ca.key.fill(0);
        }
      })().finally(() => (this.creatingCa = null));
      await this.creatingCa;
    }
  }

  // At lock: every leaf and its key go.
  purge(): void {
    this.cache.clear();
  }
}

// How the daemon stores a CA made at first use: the vault write, journaled
// as proxy_ca_created, then ca.pem.
export async function storeCaAtFirstUse(
  writes: VaultWrites,
  caPemPath: string,
  vault: UnlockedVault,
  ca: NewCa,
): Promise<void> {
  await writes.write(vault, { kind: 'proxy_ca_created', fingerprint: ca.fingerprint }, () => undefined, {
    proxyCa: { certPem: ca.certPem, key: ca.key },
  });
  writeCaPem(caPemPath, ca.certPem);
}

// ca.pem is a copy of what the vault holds: put back at unlock when it is
// missing or says something else. Returns whether it was written.
export function syncCaPem(caPemPath: string, certPem: string | null): boolean {
  if (certPem === null) return false;
  let onDisk: string | null = null;
  try {
    onDisk = readFileSync(caPemPath, 'utf8');
  } catch {
    // missing or unreadable: written below
  }
  if (onDisk === certPem) return false;
  writeCaPem(caPemPath, certPem);
  return true;
}
