// Refusal summaries (SPEC §9): a process instance's refusals are journaled in
// full up to audit.refusal_burst per second; beyond that, its refusals of
// the same second are counted (per kind, code and credential, with the
// first and last time) and journaled as one `refusals_summarised` entry
// when the second ends, or at lock or shutdown, so a flood can neither
// fill the disk at the rate it sends nor hide: nothing is dropped
// uncounted. A summarised refusal's reply carries `summarised: true` and,
// as its audit_seq, the seq of that process's last refusal journaled in
// full.
import type { JournalEvent, RefusalCount } from '../../shared/events';

export type RefusalEvent = Extract<
  JournalEvent,
  { kind: 'http_refused' | 'ssh_refused' | 'agent_refused' | 'ssh_agent_refused' }
>;
type SummaryEvent = Extract<JournalEvent, { kind: 'refusals_summarised' }>;

// Who refusals are counted for: the process instance when it is known.
export interface Refuser {
  key: string;
  pid: number | null;
  uid: number | null;
  exe: string | null;
}

interface Window {
  second: number;
  full: number;
  // The seq of the last refusal journaled in full (resolves null if the
  // journal did not take it).
  lastFull: Promise<number | null>;
  summary: { first: number; last: number; total: number; counts: Map<string, RefusalCount> } | null;
  timer: NodeJS.Timeout | null;
  who: Refuser;
}

export type Admission =
  { full: true; done(seq: number | null): void } | { full: false; auditSeq: Promise<number | null> };

export class RefusalSummaries {
  private windows = new Map<string, Window>();
  private writes = new Set<Promise<unknown>>();

  constructor(
    private readonly write: (event: SummaryEvent) => Promise<{ seq: number }>,
    private readonly burst: () => number,
    private readonly onError: (e: unknown) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {}

  // Called for every refusal before it is journaled: in full (the caller
  // journals it and reports its seq through done), or counted here.
  admit(who: Refuser, kind: string, code: string, credential: string | null): Admission {
    const t = this.now();
    const second = Math.floor(t / 1000);
    this.forgetOld(second);
    let w = this.windows.get(who.key);
    if (w && w.second !== second) {
      this.flush(w);
      w.second = second;
      w.full = 0;
    }
    if (!w) {
      w = { second, full: 0, lastFull: Promise.resolve(null), summary: null, timer: null, who };
      this.windows.set(who.key, w);
    }
    if (w.full < this.burst()) {
      w.full += 1;
      let done: (seq: number | null) => void = () => undefined;
      const previous = w.lastFull;
      // A full entry the journal refused leaves the previous one as the last.
      w.lastFull = new Promise<number | null>((resolve) => (done = resolve)).then((seq) =>
        seq === null ? previous : seq,
      );
      return { full: true, done };
    }
    if (!w.summary) w.summary = { first: t, last: t, total: 0, counts: new Map() };
    const s = w.summary;
    s.last = t;
    s.total += 1;
    const k = `${kind}\0${code}\0${credential ?? ''}`;
    const c = s.counts.get(k);
    if (c) c.count += 1;
    else s.counts.set(k, { kind, code, credential, count: 1 });
    if (!w.timer) {
      const win = w;
      w.timer = setTimeout(
        () => {
          win.timer = null;
          this.flush(win);
          if (!win.summary) this.windows.delete(win.who.key);
        },
        (second + 1) * 1000 - t + 5,
      );
    }
    return { full: false, auditSeq: w.lastFull };
  }

  // Processes whose refusals all belong to past seconds and were all
  // journaled in full need no window any more: at most once a second.
  private swept = 0;
  private forgetOld(second: number): void {
    if (second === this.swept) return;
    this.swept = second;
    for (const [key, w] of this.windows) if (w.second < second && !w.summary) this.windows.delete(key);
  }

  // Process instances with a window (for tests).
  get tracked(): number {
    return this.windows.size;
  }

  private flush(w: Window): void {
    if (w.timer) {
      clearTimeout(w.timer);
      w.timer = null;
    }
    const s = w.summary;
    if (!s) return;
    w.summary = null;
    const payload: SummaryEvent = {
      kind: 'refusals_summarised',
      instance: w.who.key,
      pid: w.who.pid,
      uid: w.who.uid,
      exe: w.who.exe,
      first_at: new Date(s.first).toISOString(),
      last_at: new Date(s.last).toISOString(),
      total: s.total,
      journaled_in_full: w.full,
      counts: [...s.counts.values()],
    };
    const p = this.write(payload).catch(this.onError);
    this.writes.add(p);
    void p.finally(() => this.writes.delete(p));
  }

  // Lock and shutdown: every summary still open is journaled now.
  async flushAll(): Promise<void> {
    for (const w of this.windows.values()) this.flush(w);
    this.windows.clear();
    await Promise.all([...this.writes]);
  }
}

// Journals a refusal in full, or counts it; returns the detail its reply
// carries (audit_seq, and summarised: true when counted), or null when the
// journal did not take it.
export async function journalRefusal(
  to: { refusals: RefusalSummaries; journal: { record(event: JournalEvent): Promise<{ seq: number }> } },
  who: Refuser,
  event: RefusalEvent,
  credential: string | null,
): Promise<Record<string, unknown> | null> {
  const a = to.refusals.admit(who, event.kind, event.code, credential);
  if (!a.full) {
    const seq = await a.auditSeq;
    return seq === null ? { summarised: true } : { summarised: true, audit_seq: seq };
  }
  try {
    const head = await to.journal.record(event);
    a.done(head.seq);
    return { audit_seq: head.seq };
  } catch {
    a.done(null);
    return null;
  }
}
