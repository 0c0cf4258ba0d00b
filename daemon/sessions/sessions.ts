// Approved sessions (SPEC §7): a grant of one credential to a process
// instance and its descendants, for at most session_ttl. A session ends at
// expiry, when its root process exits, on revoke, and on lock.
import { randomBytes } from 'node:crypto';
import type { Identity, ProcessInfo } from '../identity/identify';
import { stillRunning } from '../identity/identify';
import { deadlineIn, passed, SYSTEM_CLOCKS, type Clocks, type TwoClockDeadline } from '../two-clocks';

export interface Session {
  id: string;
  credential: string;
  root: ProcessInfo;
  createdAt: number;
  expiresAt: number; // by the wall clock, as shown
  // session_ttl by both clocks (two-clocks.ts): a wall clock stepped back
  // does not stretch it.
  ends: TwoClockDeadline;
}

export type EndReason = 'expired' | 'root_exited' | 'revoked' | 'locked' | 'credential_removed';

export class SessionStore {
  private sessions = new Map<string, Session>();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(
    private readonly onEnd: (s: Session, reason: EndReason) => void,
    private readonly clocks: Clocks = SYSTEM_CLOCKS,
  ) {}

  // A grant is made, journaled, and only then added: a session the journal
  // does not know of never covers a request.
  make(credential: string, root: ProcessInfo, ttlMs: number): Session {
    const ends = deadlineIn(ttlMs, this.clocks);
    const at = ends.wallAt - ttlMs;
    return { id: randomBytes(8).toString('hex'), credential, root, createdAt: at, expiresAt: ends.wallAt, ends };
  }

  add(s: Session): void {
    this.sessions.set(s.id, s);
    this.startSweeper();
  }

  // The session covering this requester for this credential, if any: rooted
  // at the requester itself or at one of its ancestors, unexpired, and with
  // its root still the same running instance. `requesterRuns`: the caller
  // checked that the requester still runs once its request was whole
  // (nothing it sends is read after); a session rooted at the requester is
  // not checked again (the same files for the same instance, about a
  // request already settled: docs/design-notes.md).
  covering(identity: Identity, credential: string, requesterRuns = false): Session | null {
    const keys = new Set([identity.process.key, ...identity.ancestors.map((a) => a.key)]);
    for (const s of this.sessions.values()) {
      if (s.credential !== credential || !keys.has(s.root.key)) continue;
      if (this.endIfOver(s, requesterRuns && s.root.key === identity.process.key)) continue;
      return s;
    }
    return null;
  }

  list(): Session[] {
    for (const s of [...this.sessions.values()]) this.endIfOver(s);
    return [...this.sessions.values()];
  }

  revoke(id: string): Session | null {
    const s = this.sessions.get(id);
    if (!s) return null;
    this.end(s, 'revoked');
    return s;
  }

  // A credential removed: its sessions end, so one added later under the
  // same name starts without any.
  endForCredential(credential: string, reason: EndReason): number {
    const mine = [...this.sessions.values()].filter((s) => s.credential === credential);
    for (const s of mine) this.end(s, reason);
    return mine.length;
  }

  endAll(reason: EndReason): number {
    const all = [...this.sessions.values()];
    for (const s of all) this.end(s, reason);
    return all.length;
  }

  // `rootRuns`: the root was checked to run by the caller (covering).
  private endIfOver(s: Session, rootRuns = false): boolean {
    if (passed(s.ends, this.clocks)) {
      this.end(s, 'expired');
      return true;
    }
    if (!rootRuns && !stillRunning(s.root)) {
      this.end(s, 'root_exited');
      return true;
    }
    return false;
  }

  private end(s: Session, reason: EndReason): void {
    if (!this.sessions.delete(s.id)) return;
    if (this.sessions.size === 0) this.stopSweeper();
    this.onEnd(s, reason);
  }

  // Ends sessions whose root exited or whose time ran out even when no
  // request comes, so `postern sessions` and the journal stay truthful.
  private startSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.list(), 1000);
    this.sweeper.unref();
  }

  private stopSweeper(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}
