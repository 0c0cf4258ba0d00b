// The daemon's audit journal writer (SPEC §9, format in shared/audit-format.ts).
// Appends are queued and written by one loop: every queued line in one
// write and one fdatasync, then all of them resolve (group commit). Seq
// order is line order because only the loop assigns seqs. A failed write is
// cut back to the last complete line, or else the journal refuses
// everything from then on: never a half line followed by new lines.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FileHandle } from 'node:fs/promises';
import {
  CHECKPOINT_EVERY,
  EntryBody,
  EventPayload,
  GENESIS_PREV,
  MAX_LINE_BYTES,
  checkpointMessage,
  decodeEntry,
  encodeEntry,
  encryptEvent,
  entryHash,
  segmentPath,
} from '../../shared/audit-format';
import { ed25519Sign, ed25519Verify, randomBytes, sealTo, sodiumReady, wipe } from '../../shared/crypto';
import { Refusal } from '../../shared/errors';
import * as refuse from './refusals';
import {
  SYNC_WRITE_MAX,
  fsyncDirectory,
  openSegment,
  readFirstLine,
  readLastLine,
  walkLines,
  writeAllAt,
  writeAllAtSync,
} from './segment-io';
import { ChainPoint, VaultState, scanSegment } from './segment-scan';

export type { VaultState } from './segment-scan';

export interface Head {
  seq: number;
  hash: string;
}

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

const EVENT_KEY_BYTES = 32;
const SIGN_SECRET_BYTES = 64;
const PUBLIC_KEY_BYTES = 32;
// Longer than any checkpoint line (about 330 bytes).
const CHECKPOINT_LINE_MAX = 512;

// The public half of an Ed25519 secret key (libsodium keeps it in the last
// 32 bytes), after checking that the two halves belong together.
function signingPublic(secret: unknown, who: string): string {
  if (!(secret instanceof Uint8Array) || secret.length !== SIGN_SECRET_BYTES)
    throw new TypeError(`${who}: expected a 64-byte Ed25519 secret key`);
  const pub = secret.subarray(32);
  const probe = Buffer.from('postern-audit-key-probe');
  if (!ed25519Verify(ed25519Sign(probe, secret), probe, pub))
    throw new TypeError(`${who}: the two halves of the Ed25519 secret key do not belong together`);
  return Buffer.from(pub).toString('base64');
}
// After this many other entries a checkpoint follows, so one in every CHECKPOINT_EVERY.
const CHECKPOINT_AFTER = CHECKPOINT_EVERY - 1;
// Bounds one write (and the memory it takes) under a flood of appends.
const MAX_BATCH = 4096;
const HEX64 = /^[0-9a-f]{64}$/;
const SEQ_PREFIX = /^\{"v":1,"seq":(\d+),/;

// Where the chain stands. The committed cursor describes durable bytes only;
// a batch works on a copy and commits it after its fdatasync.
interface Cursor {
  segment: number;
  offset: number; // bytes in the current segment
  seq: number;
  hash: string;
  sinceCheckpoint: number;
  vault: VaultState | null;
  keyId: number;
  key: Buffer; // the event key named by keyId
  headerEnd: number; // a segment may rotate only once it holds more than its opening entries
}

type Job =
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
}

// How long written-but-unsynced entries may wait for a sync when nothing
// else syncs them.
const LAZY_SYNC_MS = 50;

// The lines of a batch not yet written, and whom to tell once they are durable.
class Draft {
  readonly work: Cursor;
  lines: Buffer[] = [];
  settled: Array<[Pending, Head | null]> = [];
  constructor(from: Cursor) {
    this.work = { ...from };
  }
}

type Encoded = { line: Buffer; seq: number; body: EntryBody };

function isPublicKey(b64: unknown): b64 is string {
  return (
    typeof b64 === 'string' &&
    Buffer.from(b64, 'base64').length === PUBLIC_KEY_BYTES &&
    Buffer.from(b64, 'base64').toString('base64') === b64
  );
}

function errno(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

// `postern init`: segment 0 with its genesis entry, durably, never over an existing journal.
export async function createJournal(
  file: string,
  keys: { signPublic: string; boxPublic: string },
): Promise<{ journalId: string; head: Head }> {
  if (!isPublicKey(keys.signPublic) || !isPublicKey(keys.boxPublic))
    throw new TypeError('createJournal: keys must be 32-byte public keys in base64');
  await sodiumReady();
  const next = segmentPath(file, 1);
  if (
    await fs.promises.lstat(next).then(
      () => true,
      () => false,
    )
  )
    throw refuse.alreadyExists(next);
  let fh: FileHandle;
  try {
    fh = await openSegment(file, 'create');
  } catch (e) {
    throw errno(e) === 'EEXIST' ? refuse.alreadyExists(file) : refuse.cannotCreate(file, e);
  }
  const journalId = randomBytes(16).toString('hex');
  const line = encodeEntry(1, GENESIS_PREV, new Date().toISOString(), {
    type: 'genesis',
    journal_id: journalId,
    sign_pub: keys.signPublic,
    box_pub: keys.boxPublic,
  });
  try {
    await writeAllAt(fh, Buffer.concat([line, Buffer.from('\n')]), 0);
    await fh.sync();
    await fh.close();
    await fsyncDirectory(path.dirname(file));
  } catch (e) {
    await fh.close().catch(() => undefined);
    await fs.promises.unlink(file).catch(() => undefined);
    throw refuse.cannotCreate(file, e);
  }
  return { journalId, head: { seq: 1, hash: entryHash(line) } };
}

// The highest n for which segment n exists (lstat: links count as present,
// and are refused when opened).
async function lastSegment(file: string): Promise<number> {
  let n = 0;
  for (;;) {
    try {
      await fs.promises.lstat(segmentPath(file, n + 1));
    } catch (e) {
      if (errno(e) === 'ENOENT') return n;
      throw refuse.cannotOpen(segmentPath(file, n + 1), e);
    }
    n += 1;
  }
}

async function withSegment<T>(file: string, fn: (fh: FileHandle) => Promise<T>): Promise<T> {
  let fh: FileHandle;
  try {
    fh = await openSegment(file, 'read');
  } catch (e) {
    throw refuse.cannotOpen(file, e);
  }
  try {
    return await fn(fh);
  } finally {
    await fh.close();
  }
}

async function readGenesis(file: string): Promise<{ journalId: string; signPublic: string; boxPublic: string }> {
  const line = await withSegment(file, readFirstLine);
  const d = line ? decodeEntry(line) : null;
  if (!d?.ok || d.entry.type !== 'genesis' || d.entry.seq !== 1 || d.entry.prev !== GENESIS_PREV) {
    throw refuse.damaged(file, 0, 'no valid genesis entry on the first line');
  }
  return { journalId: d.entry.journal_id, signPublic: d.entry.sign_pub, boxPublic: d.entry.box_pub };
}

// The last entry of a complete earlier segment.
async function lastEntryOf(file: string): Promise<ChainPoint> {
  return withSegment(file, async (fh) => {
    const size = (await fh.stat()).size;
    const line = await readLastLine(fh, size);
    const d = line ? decodeEntry(line) : null;
    if (!line || !d?.ok) throw refuse.damaged(file, size, 'an earlier segment does not end with a complete entry');
    return { seq: d.entry.seq, hash: entryHash(line) };
  });
}

// A whole earlier segment, which must be intact.
async function scanEarlier(file: string, n: number): ReturnType<typeof scanSegment> {
  return withSegment(file, async (fh) => {
    const scan = await scanSegment(fh, n, null);
    if (scan.damage || scan.torn || !scan.last) {
      throw refuse.damaged(
        file,
        scan.damage?.offset ?? scan.goodEnd,
        scan.damage?.why ?? 'an earlier segment does not end with a complete entry',
      );
    }
    return scan;
  });
}

export class Journal {
  readonly journalId: string;
  readonly boxPublic: string;

  private readonly file: string;
  private readonly segmentSize: number;
  private readonly now: () => Date;
  private readonly boxKey: Buffer;
  // The signing key in force at the journal's end: from the genesis entry,
  // the last checkpoint or the last signer entry; null until known (the last
  // segment did not show it and earlier ones were not read yet).
  private signer: string | null;
  private fh: FileHandle;
  private nextFh: FileHandle | null = null; // a segment being started, until its first lines are durable
  private cur: Cursor;
  private signKey: Buffer | null = null;
  private queue: Pending[] = [];
  // Lazy entries written but not yet synced, and the timer that syncs them.
  private unsynced: Array<[Pending, Head | null]> = [];
  private lazyTimer: NodeJS.Timeout | null = null;
  private running = false;
  private idleWaiters: Array<() => void> = [];
  private broken: Refusal | null = null;
  private shut = false;
  private closing: Promise<void> | null = null;
  private readonly counters: JournalStats = { entries: 0, batches: 0, syncs: 0 };

  private constructor(
    opts: JournalOptions,
    genesis: { journalId: string; signPublic: string; boxPublic: string },
    fh: FileHandle,
    cur: Cursor,
    signer: string | null,
  ) {
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

  // Opens the last segment, repairs a torn last write (recorded as a
  // `repair` entry), and starts a fresh event key.
  static async open(opts: JournalOptions): Promise<Journal> {
    if (!Number.isSafeInteger(opts.segmentSize) || opts.segmentSize <= 0)
      throw new TypeError('Journal.open: segmentSize must be a positive number of bytes');
    await sodiumReady();
    const last = await lastSegment(opts.path);
    const genesis = await readGenesis(opts.path);
    const file = segmentPath(opts.path, last);
    let fh: FileHandle;
    try {
      fh = await openSegment(file, 'append');
    } catch (e) {
      throw refuse.cannotOpen(file, e);
    }
    try {
      const from = last === 0 ? null : await lastEntryOf(segmentPath(opts.path, last - 1));
      const scan = await scanSegment(fh, last, from);
      if (scan.damage) throw refuse.damaged(file, scan.damage.offset, scan.damage.why);
      // No good line at all in segment n ≥ 1: the daemon died while starting
      // it. Its state is that of segment n-1, and it gets its opening entries now.
      const unstarted = scan.last === null;
      if (unstarted && last === 0) throw refuse.damaged(file, 0, 'no valid genesis entry on the first line');
      const base = unstarted ? await scanEarlier(segmentPath(opts.path, last - 1), last - 1) : scan;
      const head = base.last as ChainPoint;
      // The last segment always holds the latest vault state; when its
      // opening entries were cut short it is found further back and restated
      // (a journal without any vault entry looks back through every segment).
      let vault = base.vault;
      for (let k = base === scan ? last - 1 : last - 2; vault === null && k >= 0; k--) {
        vault = (await scanEarlier(segmentPath(opts.path, k), k)).vault;
      }
      const restate = vault !== null && (unstarted || scan.vault === null);

      const cut = scan.size - scan.goodEnd;
      if (cut > 0) {
        await fh.truncate(scan.goodEnd);
        await fh.datasync();
      }
      const cursor: Cursor = {
        segment: last,
        offset: scan.goodEnd,
        seq: head.seq,
        hash: head.hash,
        sinceCheckpoint: base.sinceCheckpoint,
        vault,
        keyId: 0,
        key: Buffer.alloc(0),
        headerEnd: 0,
      };
      const j = new Journal(opts, genesis, fh, cursor, base.signer);
      await j.start(unstarted, cut > 0 ? { cut_bytes: cut, at_offset: scan.goodEnd } : null, restate);
      return j;
    } catch (e) {
      await fh.close().catch(() => undefined);
      throw e instanceof Refusal ? e : refuse.cannotOpen(file, e);
    }
  }

  // The opening entries, written before anything else: the segment entry of
  // an unstarted segment, the repair, a new event key, the restated vault.
  private async start(
    unstarted: boolean,
    repair: { cut_bytes: number; at_offset: number } | null,
    restate: boolean,
  ): Promise<void> {
    const d = new Draft(this.cur);
    try {
      if (unstarted)
        this.accept(
          d,
          this.encode(d.work, () => ({ type: 'segment', segment: d.work.segment })),
        );
      if (repair)
        this.accept(
          d,
          this.encode(d.work, () => ({ type: 'repair', ...repair })),
        );
      this.acceptKey(d);
      if (restate) this.acceptVault(d);
      if (unstarted) d.work.headerEnd = d.work.offset;
      await this.flush(d);
    } catch (e) {
      wipe(d.work.key);
      throw e;
    }
  }

  head(): Head {
    return { seq: this.cur.seq, hash: this.cur.hash };
  }

  latestVault(): VaultState | null {
    return this.cur.vault ? { ...this.cur.vault } : null;
  }

  stats(): JournalStats {
    return { ...this.counters };
  }

  // Resolves with the event's own seq and hash once it is durable.
  async append(payload: EventPayload): Promise<Head> {
    if (typeof payload !== 'object' || payload === null || typeof payload.kind !== 'string')
      throw new TypeError('Journal.append: payload must be an object with a string `kind`');
    return (await this.enqueue({ type: 'event', payload })) as Head;
  }

  // For a record that must not hold up the reply it describes (a request's
  // outcome): `assigned` resolves as soon as the entry has its seq and hash
  // in a batch; the entry is written at once and synced with the next batch
  // that syncs, or within LAZY_SYNC_MS; `durable` resolves then. If writing
  // or syncing fails, both reject (the journal then refuses further appends).
  appendSoon(payload: EventPayload): { assigned: Promise<Head>; durable: Promise<Head> } {
    if (typeof payload !== 'object' || payload === null || typeof payload.kind !== 'string')
      throw new TypeError('Journal.appendSoon: payload must be an object with a string `kind`');
    let told: (h: Head) => void = () => undefined;
    let failed: (e: unknown) => void = () => undefined;
    const assigned = new Promise<Head>((resolve, reject) => {
      told = resolve;
      failed = reject;
    });
    try {
      this.assertSameFile();
    } catch (e) {
      failed(e);
      return { assigned, durable: Promise.reject(e) };
    }
    const durable = this.push({ type: 'event', payload }, told, true).catch((e: unknown) => {
      failed(e);
      throw e;
    }) as Promise<Head>;
    return { assigned, durable };
  }

  async appendVault(generation: number, vaultHash: string): Promise<Head> {
    if (!Number.isSafeInteger(generation) || generation < 0 || !HEX64.test(vaultHash))
      throw new TypeError('Journal.appendVault: generation must be a count and vaultHash 64 hex digits');
    return (await this.enqueue({ type: 'vault', generation, vaultHash })) as Head;
  }

  // The signing key in force at the end of the journal (base64). Read from
  // the segments, newest first, until one shows it; the genesis key when the
  // journal never changed it.
  async keyInForce(): Promise<string> {
    for (let k = this.cur.segment - 1; this.signer === null && k >= 0; k--) {
      this.signer = (await scanEarlier(segmentPath(this.file, k), k)).signer;
    }
    return this.signer as string;
  }

  // Keeps a copy (wiped at close). Only the key in force is accepted: a
  // checkpoint under another key would not verify.
  async setSigningKey(privateKey: Buffer): Promise<void> {
    if (this.signKey || this.shut) return;
    const pub = signingPublic(privateKey, 'Journal.setSigningKey');
    const inForce = await this.keyInForce();
    if (this.signKey || this.shut) return;
    if (pub !== inForce) throw refuse.wrongSigningKey(this.file, inForce);
    this.signKey = Buffer.alloc(SIGN_SECRET_BYTES);
    this.signKey.set(privateKey);
  }

  // Hands checkpoints over to another signing key: a signer entry naming it,
  // then a checkpoint by the key in force that vouches for the change, both
  // durable; from then on checkpoints are signed by the new key. Resolves
  // with the head of that checkpoint.
  async changeSigner(privateKey: Buffer): Promise<Head> {
    const pub = signingPublic(privateKey, 'Journal.changeSigner');
    const copy = Buffer.alloc(SIGN_SECRET_BYTES);
    copy.set(privateKey);
    try {
      return (await this.enqueue({ type: 'signer', secret: copy, pub })) as Head;
    } finally {
      wipe(copy);
    }
  }

  // The checkpoint entry's head, or null without a signing key or when the
  // last entry already is a checkpoint.
  checkpoint(): Promise<Head | null> {
    return this.enqueue({ type: 'checkpoint' });
  }

  // Is the file at the current segment's path still the one being written?
  assertSameFile(): void {
    if (this.broken) throw this.broken;
    if (this.shut) throw refuse.closed(this.file);
    const file = segmentPath(this.file, this.cur.segment);
    let open: fs.Stats;
    let named: fs.Stats;
    try {
      open = fs.fstatSync(this.fh.fd);
    } catch (e) {
      throw refuse.writeFailed(file, e);
    }
    try {
      named = fs.lstatSync(file);
    } catch (e) {
      throw refuse.notSameFile(
        file,
        errno(e) === 'ENOENT' ? 'was removed or renamed' : `cannot be checked (${String(errno(e))})`,
      );
    }
    if (named.isSymbolicLink()) throw refuse.notSameFile(file, 'was replaced by a symbolic link');
    if (!named.isFile()) throw refuse.notSameFile(file, 'was replaced by something that is not a regular file');
    if (named.dev !== open.dev || named.ino !== open.ino)
      throw refuse.notSameFile(file, 'was replaced by another file');
  }

  // Is entry `seq` in this journal with this hash? Reads the durable entries.
  async contains(seq: number, hash: string): Promise<boolean> {
    if (!Number.isSafeInteger(seq) || seq < 1 || seq > this.cur.seq || typeof hash !== 'string' || !HEX64.test(hash))
      return false;
    const segment = this.cur.segment;
    const limit = this.cur.offset;
    for (let n = segment; n >= 0; n--) {
      const file = segmentPath(this.file, n);
      const found = await withSegment(file, async (fh) => {
        if (n === this.cur.segment) this.assertSameHandle(fh, file);
        const first = await readFirstLine(fh);
        const firstSeq = first ? Number(SEQ_PREFIX.exec(first.subarray(0, 40).toString('latin1'))?.[1]) : NaN;
        if (!(firstSeq <= seq)) return null; // in an earlier segment
        let match = false;
        await walkLines(fh, 0, n === segment ? limit : (await fh.stat()).size, (line) => {
          if (Number(SEQ_PREFIX.exec(line.subarray(0, 40).toString('latin1'))?.[1]) !== seq) return true;
          match = entryHash(line) === hash;
          return false;
        });
        return match;
      });
      if (found !== null) return found;
    }
    return false;
  }

  // Writes the final checkpoint (with a key), waits for every queued entry,
  // fsyncs and closes; wipes the keys. Rejects if the final entries failed.
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
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
  // records would go to a file nobody will read.
  private enqueue(job: Job): Promise<Head | null> {
    try {
      this.assertSameFile();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.push(job);
  }

  private push(job: Job, assigned?: (head: Head) => void, lazy = false): Promise<Head | null> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject, ...(assigned ? { assigned } : {}), ...(lazy ? { lazy } : {}) });
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
    const d = new Draft(this.cur);
    try {
      for (const p of batch) {
        if (p.job.type === 'checkpoint') {
          d.settled.push([p, this.signKey && d.work.sinceCheckpoint > 0 ? this.acceptCheckpoint(d) : null]);
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
          d.settled.push([p, await this.acceptSigner(d, p.job.secret, p.job.pub)]);
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
        const head = this.accept(d, enc);
        d.settled.push([p, head]);
        p.assigned?.(head);
        if (this.signKey && d.work.sinceCheckpoint >= CHECKPOINT_AFTER) this.acceptCheckpoint(d);
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

  private encodeJob(w: Cursor, job: Extract<Job, { type: 'event' } | { type: 'vault' }>): Encoded {
    if (job.type === 'vault')
      return this.encode(w, () => ({ type: 'vault', generation: job.generation, vault_hash: job.vaultHash }));
    return this.encode(
      w,
      (seq, prev) => ({ type: 'event', key_id: w.keyId, ...encryptEvent(w.key, seq, prev, job.payload) }),
      job.payload.kind,
    );
  }

  private encode(w: Cursor, build: (seq: number, prev: string) => EntryBody, kind?: string): Encoded {
    const seq = w.seq + 1;
    const body = build(seq, w.hash);
    const line = encodeEntry(seq, w.hash, this.now().toISOString(), body);
    // Readers stop at MAX_LINE_BYTES; the "\n" counts.
    if (line.length + 1 > MAX_LINE_BYTES)
      throw itemError(refuse.tooLong(kind ?? body.type, line.length + 1, MAX_LINE_BYTES));
    return { line, seq, body };
  }

  // Adds an encoded line to the draft and moves its cursor past it.
  private accept(d: Draft, enc: Encoded): Head {
    const w = d.work;
    const hash = entryHash(enc.line);
    d.lines.push(enc.line, NEWLINE);
    w.seq = enc.seq;
    w.hash = hash;
    w.offset += enc.line.length + 1;
    w.sinceCheckpoint = enc.body.type === 'checkpoint' ? 0 : w.sinceCheckpoint + 1;
    if (enc.body.type === 'vault')
      w.vault = { generation: enc.body.generation, vault_hash: enc.body.vault_hash, seq: enc.seq };
    return { seq: enc.seq, hash };
  }

  private acceptCheckpoint(d: Draft): Head {
    const key = this.signKey as Buffer;
    return this.accept(
      d,
      this.encode(d.work, (seq, prev) => ({
        type: 'checkpoint',
        head_seq: seq - 1,
        head: prev,
        sign_pub: this.signer as string,
        sig: ed25519Sign(checkpointMessage(this.journalId, seq - 1, prev), key).toString('base64'),
      })),
    );
  }

  // The signer entry and its checkpoint, in one segment, written and synced
  // at once; only then does the new key take over.
  private async acceptSigner(d: Draft, secret: Buffer, pub: string): Promise<Head> {
    const encode = (): Encoded => this.encode(d.work, () => ({ type: 'signer', sign_pub: pub }));
    let enc = encode();
    if (this.mustRotate(d.work, enc.line.length + 1 + CHECKPOINT_LINE_MAX)) {
      await this.rotate(d);
      enc = encode();
    }
    this.accept(d, enc);
    const head = this.acceptCheckpoint(d);
    await this.flush(d);
    (this.signKey as Buffer).set(secret);
    this.signer = pub;
    return head;
  }

  // A fresh event key, sealed to the audit box key; events after it use it.
  private acceptKey(d: Draft): void {
    const key = randomBytes(EVENT_KEY_BYTES);
    const head = this.accept(
      d,
      this.encode(d.work, (seq) => ({ type: 'key', key_id: seq, sealed: sealTo(key, this.boxKey).toString('base64') })),
    );
    if (d.work.key !== this.cur.key) wipe(d.work.key); // an earlier uncommitted key of this draft
    d.work.key = key;
    d.work.keyId = head.seq;
  }

  private acceptVault(d: Draft): void {
    const v = d.work.vault as VaultState;
    this.accept(
      d,
      this.encode(d.work, () => ({ type: 'vault', generation: v.generation, vault_hash: v.vault_hash })),
    );
  }

  private mustRotate(w: Cursor, bytes: number): boolean {
    return w.offset + bytes > this.segmentSize && w.offset > w.headerEnd;
  }

  // Ends the current segment (checkpoint, durable) and starts the next one:
  // created exclusively, directory fsynced, then its opening entries.
  private async rotate(d: Draft): Promise<void> {
    if (this.signKey && d.work.sinceCheckpoint > 0) this.acceptCheckpoint(d);
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
    this.accept(
      d,
      this.encode(d.work, () => ({ type: 'segment', segment: n })),
    );
    this.acceptKey(d);
    if (d.work.vault) this.acceptVault(d);
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

  // contains() reads by path: make sure the path still names the file being written.
  private assertSameHandle(fh: FileHandle, file: string): void {
    const a = fs.fstatSync(fh.fd);
    const b = fs.fstatSync(this.fh.fd);
    if (a.dev !== b.dev || a.ino !== b.ino) throw refuse.notSameFile(file, 'was replaced by another file');
  }
}

const NEWLINE = Buffer.from('\n');

// Errors that concern one append only (its payload), not the journal.
const ITEM_ERROR = Symbol('journal item error');
function itemError(e: Refusal): Refusal {
  return Object.assign(e, { [ITEM_ERROR]: true });
}
function isItemError(e: unknown): boolean {
  return e instanceof TypeError || e instanceof RangeError || (typeof e === 'object' && e !== null && ITEM_ERROR in e);
}
