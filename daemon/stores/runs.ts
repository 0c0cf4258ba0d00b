// Runs (SPEC §11): placeholders for the proxy front door, bound to the
// process instance that asked. A placeholder `postern-<name>-<16 hex>` is
// random per run and stands for one credential's secret; it is honoured
// only on connections from the run's root instance or its descendants, so
// one that leaks elsewhere is worthless. A run ends when its root exits,
// at lock, and when every credential it held was removed; a removed
// credential's placeholder stops resolving at once.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Refusal } from '../../shared/errors';
import type { Identity, ProcessInfo } from '../identity/identify';
import { stillRunning } from '../identity/identify';

export interface Run {
  id: string;
  root: ProcessInfo;
  createdAt: number;
  // credential name → its placeholder, in the order the caller named them.
  placeholders: Map<string, string>;
}

export type RunEndReason = 'root_exited' | 'locked' | 'revoked';

// A live run per process instance is cheap, but each is checked at every
// lookup and by the sweeper: bounded, so one process cannot fill memory.
export const RUN_LIMITS = { perInstance: 64, total: 1024 } as const;

const PLACEHOLDER = /^postern-([a-z0-9][a-z0-9._-]{0,63})-([0-9a-f]{16})$/;
// The same shape inside a longer text (a header, a body), for the proxy to
// refuse a placeholder carried where postern does not put secrets.
export const PLACEHOLDER_IN_TEXT = /postern-[a-z0-9][a-z0-9._-]{0,63}-[0-9a-f]{16}(?![0-9a-f])/;

// Has `value` the shape of a placeholder (honoured or not)? The proxy
// refuses one that is not honoured rather than send it upstream.
export function looksLikePlaceholder(value: string): boolean {
  return PLACEHOLDER.test(value);
}

function newPlaceholder(credential: string): string {
  return `postern-${credential}-${randomBytes(8).toString('hex')}`;
}

// Constant time over the bytes of two values of equal length. Every
// placeholder of one credential has the same length, so comparing lengths
// first tells nothing a caller does not know.
function sameValue(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

// Is `key` the instance of the identity's process or of one of its ancestors?
function inTree(identity: Identity, key: string): boolean {
  return identity.process.key === key || identity.ancestors.some((a) => a.key === key);
}

export class Runs {
  private runs = new Map<string, Run>();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(
    private readonly onEnd: (run: Run, reason: RunEndReason) => void,
    private readonly now: () => number = Date.now,
  ) {}

  // A run rooted at the caller's process instance, with a fresh placeholder
  // for each credential; `busy` beyond the limits.
  create(identity: Identity, credentials: readonly { name: string; env: readonly string[] }[]): Run {
    this.sweep();
    const root = identity.process;
    if (this.runs.size >= RUN_LIMITS.total)
      throw new Refusal(
        'busy',
        `the daemon holds ${RUN_LIMITS.total} live runs, the most it keeps; retry when some have ended (a run ends when the process that asked for it exits)`,
      );
    const mine = [...this.runs.values()].filter((r) => r.root.key === root.key).length;
    if (mine >= RUN_LIMITS.perInstance)
      throw new Refusal(
        'busy',
        `this process (pid ${root.pid}) already has ${RUN_LIMITS.perInstance} live runs, the limit per process; reuse one, or start the work from a new process`,
      );
    const run: Run = {
      id: randomBytes(8).toString('hex'),
      root,
      createdAt: this.now(),
      placeholders: new Map(credentials.map((c) => [c.name, newPlaceholder(c.name)])),
    };
    this.runs.set(run.id, run);
    this.startSweeper();
    return run;
  }

  // A run whose start could not be journaled: gone without a `run_end`,
  // its placeholders never handed out.
  discard(runId: string): void {
    this.runs.delete(runId);
    if (this.runs.size === 0) this.stopSweeper();
  }

  // The run and credential a placeholder stands for, when the identity's
  // process or one of its ancestors is the run's root instance and that
  // root still runs; null otherwise (another run's, ended, another tree).
  resolvePlaceholder(value: string, identity: Identity): { run: Run; credential: string } | null {
    const m = PLACEHOLDER.exec(value);
    if (!m) return null;
    const credential = m[1] as string;
    // Ending a run while iterating deletes only the entry at hand, which a
    // Map's iteration allows.
    for (const run of this.runs.values()) {
      if (!inTree(identity, run.root.key)) continue;
      const mine = run.placeholders.get(credential);
      if (mine === undefined || !sameValue(mine, value)) continue;
      // The identity's own process was just checked to still run (every
      // request is, once it is whole); an ancestor's standing is as old as
      // the connection, so it is read again.
      if (run.root.key !== identity.process.key && this.endIfRootExited(run)) return null;
      return { run, credential };
    }
    return null;
  }

  // Is some live run rooted at this process instance (a `postern run`)?
  rootedAt(key: string): boolean {
    for (const run of this.runs.values()) if (run.root.key === key) return true;
    return false;
  }

  get(runId: string): Run | null {
    const run = this.runs.get(runId);
    if (!run || this.endIfRootExited(run)) return null;
    return run;
  }

  list(): Run[] {
    this.sweep();
    return [...this.runs.values()];
  }

  end(runId: string, reason: RunEndReason): void {
    const run = this.runs.get(runId);
    if (!run) return;
    this.runs.delete(runId);
    if (this.runs.size === 0) this.stopSweeper();
    this.onEnd(run, reason);
  }

  endAll(reason: RunEndReason): number {
    const all = [...this.runs.keys()];
    for (const id of all) this.end(id, reason);
    return all.length;
  }

  // A credential removed: its placeholders stop resolving, so one added
  // later under the same name is not reached through an old run. A run left
  // with no credential at all ends as `revoked`.
  forgetCredential(credential: string): void {
    for (const run of [...this.runs.values()]) {
      if (!run.placeholders.delete(credential)) continue;
      if (run.placeholders.size === 0) this.end(run.id, 'revoked');
    }
  }

  private endIfRootExited(run: Run): boolean {
    if (stillRunning(run.root)) return false;
    this.end(run.id, 'root_exited');
    return true;
  }

  private sweep(): void {
    for (const run of [...this.runs.values()]) this.endIfRootExited(run);
  }

  // Ends runs whose root exited even when no request comes, so the journal
  // says when each run ended.
  private startSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.sweep(), 1000);
    this.sweeper.unref();
  }

  private stopSweeper(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}
