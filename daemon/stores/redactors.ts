// Response redactors by credential. Building one (every encoded form of
// every needle, the pair table) costs more than scanning a small response,
// and a credential injects the same needles request after request, so each
// credential keeps the redactor of the needles it injected last and its
// requests share it until the needles change (a token refreshed), the
// credential changes or the vault locks.
//
// A request holds a lease for as long as it scans. A redactor that is
// replaced or dropped is wiped when its last lease ends, never while a
// scan still reads its tables (a zeroed table would find nothing and let
// the secret through). The kept needles are copies, wiped with the tables.
import { timingSafeEqual } from 'node:crypto';
import type { Redactor } from '../pipeline/redact';

export interface RedactorLease {
  // Null when there is nothing to search for (needles too short).
  readonly redactor: Redactor | null;
  // The request is done scanning; the second call does nothing.
  release(): void;
}

interface Entry {
  needles: Buffer[];
  redactor: Redactor | null;
  leases: number;
  current: boolean;
}

export const NO_REDACTION: RedactorLease = { redactor: null, release: () => undefined };

function sameNeedles(a: readonly Buffer[], b: readonly Buffer[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as Buffer;
    const y = b[i] as Buffer;
    if (x.length !== y.length || !timingSafeEqual(x, y)) return false;
  }
  return true;
}

export class RedactorCache {
  private readonly entries = new Map<string, Entry>();

  // The pipeline's buildRedactor: stores do not import the pipeline.
  constructor(private readonly build: (needles: Buffer[], label: string) => Redactor | null) {}

  // The redactor for these needles (which the caller keeps and wipes).
  acquire(credential: string, needles: readonly Buffer[]): RedactorLease {
    let e = this.entries.get(credential);
    if (!e || !sameNeedles(e.needles, needles)) {
      if (e) this.retire(e);
      e = {
        needles: needles.map((n) => Buffer.from(n)),
        redactor: this.build([...needles], credential),
        leases: 0,
        current: true,
      };
      this.entries.set(credential, e);
    }
    return leaseOf(e);
  }

  // The redactor the credential's requests share now, if it has one: for a
  // response that may hold the credential's values though the request that
  // asked for it injected none (the proxy front door, without a
  // placeholder, to a host the credential covers).
  current(credential: string): RedactorLease | null {
    const e = this.entries.get(credential);
    return e ? leaseOf(e) : null;
  }

  // The credential changed or was removed.
  forget(credential: string): void {
    const e = this.entries.get(credential);
    if (e) this.retire(e);
    this.entries.delete(credential);
  }

  // At lock.
  clear(): void {
    for (const e of this.entries.values()) this.retire(e);
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private retire(e: Entry): void {
    e.current = false;
    if (e.leases === 0) wipeEntry(e);
  }
}

function leaseOf(entry: Entry): RedactorLease {
  entry.leases += 1;
  let held = true;
  return {
    redactor: entry.redactor,
    release: () => {
      if (!held) return;
      held = false;
      entry.leases -= 1;
      if (!entry.current && entry.leases === 0) wipeEntry(entry);
    },
  };
}

function wipeEntry(e: Entry): void {
  e.redactor?.wipe();
  for (const n of e.needles) n.fill(0);
}
