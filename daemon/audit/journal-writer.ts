// The journal's write loop (SPEC §9). Appends are queued and written by one
// loop: every queued line in one write and one fdatasync, then all of them
// resolve (group commit). Seq order is line order because only the loop
// assigns seqs. A failed write is cut back to the last complete line, or
// else the journal refuses everything from then on: never a half line
// followed by new lines.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FileHandle } from 'node:fs/promises';
import { EventPayload, segmentPath } from '../../shared/audit-format';
import { wipe } from '../../shared/crypto';
import { Refusal } from '../../shared/errors';
import { openSegment } from '../../shared/journal-read';
import {
  Cursor,
  Draft as DraftOf,
  Encoded,
  Head,
  accept,
  acceptKey,
  acceptVault,
  encode,
  encodeEvent,
  isItemError,
} from './journal-entries';
import { Genesis } from './journal-open';
import { CHECKPOINT_AFTER, CHECKPOINT_LINE_MAX, acceptCheckpoint } from './journal-signing';
import * as refuse from './refusals';
import { SYNC_WRITE_MAX, assertStillNamed, fsyncDirectory, writeAllAt, writeAllAtSync } from './segment-io';

export interface JournalOptions {
  path: string; // segment 0
  segmentSize: number; // bytes
  now?: () => Date;
}

// Counters for tests and the benchmark: `syncs` fdatasyncs for `entries` lines.
export interface JournalStats {
  entries: number;
  batches: number;
  syncs: number;
}

// Bounds one write (and the memory it takes) under a flood of appends.
const MAX_BATCH = 4096;
// How long written-but-unsynced entries may wait for a sync when nothing
// else syncs them.
const LAZY_SYNC_MS = 50;

export type Job =
  | { type: 'event'; payload: EventPayload }
  | { type: 'vault'; generation: number; vaultHash: string }
  | { type: 'checkpoint' }
  | { type: 'sync' }
  | { type: 'signer'; secret: Buffer; pub: string };

interface Pending {
  job: Job;
  resolve(head: Head | null): void;
  reject(e: unknown): void;
  // Told the entry's seq and hash as soon as it has its place in a batch,
  // before the batch is written.
  assigned?(head: Head): void;
  // Written at once but synced with the next batch that syncs (or by a
  // short timer): for records nothing waits on (a request's outcome).
  lazy?: boolean;
  // Refused if the segment's path no longer names the open file when its
  // batch is written (appends from outside; not the writer's own entries).
  guarded?: boolean;
}

class Draft extends DraftOf<Pending> {}

export class JournalWriter {
  readonly journalId: string;
  readonly boxPublic: string;

  protected readonly file: string;
  private readonly segmentSize: number;
  private readonly now: () => Date;
  private readonly boxKey: Buffer;
  // The signing key in force at the journal's end: from the genesis entry,
  // the last checkpoint or the last signer entry; null until known (the last
  // segment did not show it and earlier ones were not read yet).
  protected signer: string | null;
  protected fh: FileHandle;
  private nextFh: FileHandle | null = null; // a segment being started, until its first lines are durable
  protected cur: Cursor;
  protected signKey: Buffer | null = null;
  private queue: Pending[] = [];
  // Lazy entries written but not yet synced, and the timer that syncs them.
  private unsynced: Array<[Pending, Head | null]> = [];
  private lazyTimer: NodeJS.Timeout | null = null;
  private running = false;
  private idleWaiters: Array<() => void> = [];
  private broken: Refusal | null = null;
  protected shut = false;
  protected readonly counters: JournalStats = { entries: 0, batches: 0, syncs: 0 };

  protected constructor(opts: JournalOptions, genesis: Genesis, fh: FileHandle, cur: Cursor, signer: string | null) {
    this.file = opts.path;
    this.segmentSize = opts.segmentSize;
    this.now = opts.now ?? ((): Date => new Date());
    this.journalId = genesis.journalId;
    this.boxPublic = genesis.boxPublic;
    this.boxKey = Buffer.from(genesis.boxPublic, 'base64');
    this.signer = signer;
    this.fh = fh;
    this.cur = cur;
  }

  // The opening entries, written before anything else: the segment entry of
  // an unstarted segment, the repair, a new event key, the restated vault.
  protected async start(
    unstarted: boolean,
    repair: { cut_bytes: number; at_offset: number } | null,
    restate: boolean,
  ): Promise<void> {
    const d = new Draft(this.cur);
    try {
      if (unstarted)
        accept(
          d,
          encode(d.work, this.now(), () => ({ type: 'segment', segment: d.work.segment })),
        );
      if (repair)
        accept(
          d,
          encode(d.work, this.now(), () => ({ type: 'repair', ...repair })),
        );
      acceptKey(d, this.now(), this.boxKey, this.cur.key);
      if (restate) acceptVault(d, this.now());
      if (unstarted) d.work.headerEnd = d.work.offset;
      await this.flush(d);
    } catch (e) {
      wipe(d.work.key);
      throw e;
    }
  }

  // Is the file at the current segment's path still the one being written?
  assertSameFile(): void {
    this.assertOpen();
    assertStillNamed(segmentPath(this.file, this.cur.segment), this.fh);
  }

  private assertOpen(): void {
    if (this.broken) throw this.broken;
    if (this.shut) throw refuse.closed(this.file);
  }

  protected async shutDown(): Promise<void> {
    // The final checkpoint queues behind everything already accepted.
    const last = this.broken ? Promise.resolve(null) : this.push({ type: 'checkpoint' });
    this.shut = true;
    let failure: unknown = null;
    await last.catch((e: unknown) => {
      failure = e;
    });
    await this.idle();
    if (this.lazyTimer) clearTimeout(this.lazyTimer);
    this.lazyTimer = null;
    try {
      await this.fh.sync();
      for (const [p, head] of this.unsynced.splice(0)) p.resolve(head);
    } catch (e) {
      failure ??= refuse.writeFailed(segmentPath(this.file, this.cur.segment), e);
      for (const [p] of this.unsynced.splice(0)) p.reject(failure);
    }
    await this.fh.close().catch(() => undefined);
    wipe(this.signKey);
    wipe(this.cur.key);
    this.signKey = null;
    if (failure) throw failure;
  }

  // Every entry is refused when the journal file was replaced: what it
  // records would go to a file nobody will read. The file's identity costs
  // two stat calls, so it is checked once per batch, just before the batch
  // is encoded and written (commit), not once per entry.
  protected enqueue(job: Job, assigned?: (head: Head) => void, lazy = false): Promise<Head | null> {
    try {
      this.assertOpen();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.push(job, assigned, lazy, true);
  }

  protected push(job: Job, assigned?: (head: Head) => void, lazy = false, guarded = false): Promise<Head | null> {
    return new Promise((resolve, reject) => {
      this.queue.push({
        job,
        resolve,
        reject,
        ...(assigned ? { assigned } : {}),
        ...(lazy ? { lazy } : {}),
        ...(guarded ? { guarded } : {}),
      });
      if (!this.running) {
        this.running = true;
        // After the current turn, so appends made together share one batch.
        queueMicrotask(() => void this.run());
      }
    });
  }

  private idle(): Promise<void> {
    if (!this.running && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0) {
      if (this.broken) {
        for (const p of this.queue.splice(0)) p.reject(this.broken);
        break;
      }
      await this.commit(this.queue.splice(0, MAX_BATCH));
    }
    this.running = false;
    for (const wake of this.idleWaiters.splice(0)) wake();
  }

  // One batch: encode every job in order, write, fdatasync, resolve. Never throws.
  private async commit(batch: Pending[]): Promise<void> {
    batch = this.refuseIfReplaced(batch);
    if (batch.length === 0) return;
    const d = new Draft(this.cur);
    try {
      for (const p of batch) {
        if (p.job.type === 'checkpoint') {
          d.settled.push([p, this.signKey && d.work.sinceCheckpoint > 0 ? this.checkpointInto(d) : null]);
          continue;
        }
        if (p.job.type === 'sync') {
          d.settled.push([p, null]);
          continue;
        }
        if (p.job.type === 'signer') {
          if (!this.signKey) {
            p.reject(refuse.noSigningKey(this.file));
            continue;
          }
          d.settled.push([p, await this.signerInto(d, p.job.secret, p.job.pub)]);
          continue;
        }
        const job = p.job;
        let enc: Encoded;
        try {
          enc = this.encodeJob(d.work, job);
          if (this.mustRotate(d.work, enc.line.length + 1)) {
            await this.rotate(d);
            enc = this.encodeJob(d.work, job);
          }
        } catch (e) {
          if (!isItemError(e)) throw e;
          p.reject(e);
          continue;
        }
        const head = accept(d, enc);
        d.settled.push([p, head]);
        if (this.signKey && d.work.sinceCheckpoint >= CHECKPOINT_AFTER) this.checkpointInto(d);
      }
      await this.flush(d, !batch.every((p) => p.lazy === true));
    } catch (e) {
      const refusal = await this.rollBack(d, e);
      // Entries already flushed stay resolved; rejecting them again is a no-op.
      for (const p of batch) p.reject(refusal);
      // Written but never synced: their durability is unknown.
      for (const [p] of this.unsynced.splice(0)) p.reject(refusal);
    }
  }

  // The batch's appends are refused, before any of its bytes exist, when the
  // segment's path no longer names the open file; the writer's own entries
  // (the final checkpoint, a lazy sync) go on as before.
  private refuseIfReplaced(batch: Pending[]): Pending[] {
    if (!batch.some((p) => p.guarded === true)) return batch;
    try {
      assertStillNamed(segmentPath(this.file, this.cur.segment), this.fh);
      return batch;
    } catch (e) {
      for (const p of batch) if (p.guarded === true) p.reject(e);
      return batch.filter((p) => p.guarded !== true);
    }
  }

  private encodeJob(w: Cursor, job: Extract<Job, { type: 'event' } | { type: 'vault' }>): Encoded {
    if (job.type === 'vault')
      return encode(w, this.now(), () => ({ type: 'vault', generation: job.generation, vault_hash: job.vaultHash }));
    return encodeEvent(w, this.now(), job.payload);
  }

  private checkpointInto(d: Draft): Head {
    return acceptCheckpoint(d, this.now(), this.journalId, this.signer as string, this.signKey as Buffer);
  }

  // The signer entry and its checkpoint, in one segment, written and synced
  // at once; only then does the new key take over.
  private async signerInto(d: Draft, secret: Buffer, pub: string): Promise<Head> {
    const signerEntry = (): Encoded => encode(d.work, this.now(), () => ({ type: 'signer', sign_pub: pub }));
    let enc = signerEntry();
    if (this.mustRotate(d.work, enc.line.length + 1 + CHECKPOINT_LINE_MAX)) {
      await this.rotate(d);
      enc = signerEntry();
    }
    accept(d, enc);
    const head = this.checkpointInto(d);
    await this.flush(d);
    (this.signKey as Buffer).set(secret);
    this.signer = pub;
    return head;
  }

  private mustRotate(w: Cursor, bytes: number): boolean {
    return w.offset + bytes > this.segmentSize && w.offset > w.headerEnd;
  }

  // Ends the current segment (checkpoint, durable) and starts the next one:
  // created exclusively, directory fsynced, then its opening entries.
  private async rotate(d: Draft): Promise<void> {
    if (this.signKey && d.work.sinceCheckpoint > 0) this.checkpointInto(d);
    await this.flush(d);
    const n = d.work.segment + 1;
    const file = segmentPath(this.file, n);
    try {
      this.nextFh = await openSegment(file, 'create');
      await fsyncDirectory(path.dirname(file));
    } catch (e) {
      throw refuse.writeFailed(file, e);
    }
    d.work.segment = n;
    d.work.offset = 0;
    accept(
      d,
      encode(d.work, this.now(), () => ({ type: 'segment', segment: n })),
    );
    acceptKey(d, this.now(), this.boxKey, this.cur.key);
    if (d.work.vault) acceptVault(d, this.now());
    d.work.headerEnd = d.work.offset;
  }

  // Writes the draft's lines with one write and, unless the whole batch is
  // lazy, one fdatasync (which also covers lazy entries written before);
  // commits its cursor and resolves whoever waited. A batch that starts a
  // segment always syncs.
  private async flush(d: Draft, sync = true): Promise<void> {
    const fresh = d.work.segment !== this.cur.segment;
    if (fresh) sync = true;
    if (d.lines.length > 0) {
      const fh = fresh ? (this.nextFh as FileHandle) : this.fh;
      const data = Buffer.concat(d.lines);
      if (data.length <= SYNC_WRITE_MAX) writeAllAtSync(fh.fd, data, fresh ? 0 : this.cur.offset);
      else await writeAllAt(fh, data, fresh ? 0 : this.cur.offset);
      // Lazy entries already written to the segment being left: synced
      // before it is closed.
      if (fresh && this.unsynced.length > 0) await this.fh.datasync();
      if (sync) await fh.datasync();
      this.counters.batches += 1;
      if (sync) this.counters.syncs += 1;
      this.counters.entries += d.lines.length / 2;
      const retiredKey = this.cur.key;
      this.cur = { ...d.work };
      if (retiredKey !== this.cur.key) wipe(retiredKey);
      if (fresh) {
        const old = this.fh;
        this.fh = fh;
        this.nextFh = null;
        await old.close().catch(() => undefined);
      }
      d.lines = [];
      // An entry's seq is told once its bytes are written: a write that
      // fails is cut back and its seq given to the next entry, so a seq
      // told before would name another entry.
      for (const [p, head] of d.settled) if (head) p.assigned?.(head);
    } else if (sync && this.unsynced.length > 0) {
      await this.fh.datasync();
      this.counters.syncs += 1;
    }
    if (!sync) {
      this.unsynced.push(...d.settled.splice(0));
      this.armLazySync();
      return;
    }
    for (const [p, head] of this.unsynced.splice(0)) p.resolve(head);
    for (const [p, head] of d.settled.splice(0)) p.resolve(head);
  }

  private armLazySync(): void {
    if (this.lazyTimer) return;
    this.lazyTimer = setTimeout(() => {
      this.lazyTimer = null;
      if (this.unsynced.length > 0 && !this.shut && !this.broken) this.push({ type: 'sync' }).catch(() => undefined);
    }, LAZY_SYNC_MS);
  }

  // Undoes what a failed batch left: a segment it was starting is removed,
  // the current one cut back to its last durable line. If that fails too,
  // the journal refuses every further append.
  private async rollBack(d: Draft, e: unknown): Promise<Refusal> {
    const file = segmentPath(this.file, d.work.segment);
    const refusal = e instanceof Refusal ? e : refuse.writeFailed(file, e);
    if (d.work.key !== this.cur.key) wipe(d.work.key);
    try {
      if (this.nextFh) {
        const next = this.nextFh;
        this.nextFh = null;
        await next.close().catch(() => undefined);
        const nextFile = segmentPath(this.file, this.cur.segment + 1);
        await fs.promises.unlink(nextFile);
        await fsyncDirectory(path.dirname(nextFile));
      }
      await this.fh.truncate(this.cur.offset);
      await this.fh.datasync();
    } catch (e2) {
      this.broken = refuse.failedClosed(file, refusal, e2);
    }
    return refusal;
  }
}
