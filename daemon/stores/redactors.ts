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
//
// A host several credentials cover has its responses searched with the
// join of their redactors; building one takes longer (≈0.2 ms) than a small
// response takes to scan, and such a host asks for the same join at every
// request, so joins of the cache's redactors are kept here too, and wiped
// with the first of their parts to be wiped (a part is wiped only when no
// lease holds it, and a request holding a join holds every part's lease).
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
  joins: Join[];
}

interface Join {
  parts: Entry[];
  redactor: Redactor;
}

// Which entry a lease the cache gave out holds: only those can be joined
// and kept; any other lease (a redactor made for one request) is not.
const leased = new WeakMap<RedactorLease, Entry>();

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

  // The pipeline's buildRedactor and joinRedactors: stores do not import
  // the pipeline.
  constructor(
    private readonly build: (needles: Buffer[], label: string) => Redactor | null,
    private readonly joinParts: (parts: Redactor[], label: string) => Redactor,
  ) {}

  // The redactor for these needles (which the caller keeps and wipes).
  // `label`: what an occurrence is marked with, when the key is not the
  // credential's name (a former version's: stores/former-values.ts).
  acquire(credential: string, needles: readonly Buffer[], label = credential): RedactorLease {
    let e = this.entries.get(credential);
    if (!e || !sameNeedles(e.needles, needles)) {
      if (e) this.retire(e);
      e = {
        needles: needles.map((n) => Buffer.from(n)),
        redactor: this.build([...needles], label),
        leases: 0,
        current: true,
        joins: [],
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

  // The join of these leases' redactors, kept while its parts live, when
  // every lease is one of the cache's and holds a redactor; null otherwise
  // (the caller then joins them for its request alone).
  joined(leases: readonly RedactorLease[], label: string): Redactor | null {
    const parts: Entry[] = [];
    for (const l of leases) {
      const e = leased.get(l);
      if (!e?.redactor) return null;
      parts.push(e);
    }
    const [first] = parts;
    if (!first || parts.length < 2) return null;
    const hit = first.joins.find(
      (j) => j.redactor.label === label && j.parts.length === parts.length && j.parts.every((p, i) => p === parts[i]),
    );
    if (hit) return hit.redactor;
    const join: Join = {
      parts,
      redactor: this.joinParts(
        parts.map((p) => p.redactor as Redactor),
        label,
      ),
    };
    for (const p of new Set(parts)) p.joins.push(join);
    return join.redactor;
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
  const lease: RedactorLease = {
    redactor: entry.redactor,
    release: () => {
      if (!held) return;
      held = false;
      entry.leases -= 1;
      if (!entry.current && entry.leases === 0) wipeEntry(entry);
    },
  };
  leased.set(lease, entry);
  return lease;
}

function wipeEntry(e: Entry): void {
  for (const j of e.joins) {
    j.redactor.wipe();
    for (const p of j.parts) if (p !== e) p.joins = p.joins.filter((k) => k !== j);
  }
  e.joins = [];
  e.redactor?.wipe();
  for (const n of e.needles) n.fill(0);
}
