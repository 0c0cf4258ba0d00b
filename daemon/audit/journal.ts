// The daemon's audit journal (SPEC §9, format in shared/audit-format.ts):
// opening it at start-up (journal-open.ts), appending through the write
// loop (journal-writer.ts), and the signing keys its checkpoints use.
import * as fs from 'node:fs';
import { FileHandle } from 'node:fs/promises';
import { EventPayload, entryHash, segmentPath } from '../../shared/audit-format';
import { sodiumReady, wipe } from '../../shared/crypto';
import { Refusal } from '../../shared/errors';
import { readFirstLine, walkLines } from '../../shared/journal-read';
import { Head } from './journal-entries';
import { recoverJournal, scanEarlier, withSegment } from './journal-open';
import { SIGN_SECRET_BYTES, signingPublic } from './journal-signing';
import { JournalOptions, JournalStats, JournalWriter } from './journal-writer';
import * as refuse from './refusals';
import { VaultState } from './segment-scan';

export type { VaultState } from './segment-scan';
export type { Head } from './journal-entries';
export type { JournalOptions, JournalStats } from './journal-writer';
export { createJournal } from './journal-open';

const HEX64 = /^[0-9a-f]{64}$/;
const SEQ_PREFIX = /^\{"v":1,"seq":(\d+),/;

// What the daemon calls: appends checked before they are queued, reading an
// entry back, and the signing keys; the write loop itself is JournalWriter.
export class Journal extends JournalWriter {
  private closing: Promise<void> | null = null;

  // Opens the last segment, repairs a torn last write (recorded as a
  // `repair` entry), and starts a fresh event key.
  static async open(opts: JournalOptions): Promise<Journal> {
    if (!Number.isSafeInteger(opts.segmentSize) || opts.segmentSize <= 0)
      throw new TypeError('Journal.open: segmentSize must be a positive number of bytes');
    await sodiumReady();
    const r = await recoverJournal(opts.path);
    try {
      const j = new Journal(opts, r.genesis, r.fh, r.cursor, r.signer);
      await j.start(r.unstarted, r.repair, r.restate);
      return j;
    } catch (e) {
      await r.fh.close().catch(() => undefined);
      throw e instanceof Refusal ? e : refuse.cannotOpen(segmentPath(opts.path, r.cursor.segment), e);
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
    const durable = this.enqueue({ type: 'event', payload }, told, true).catch((e: unknown) => {
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

  // contains() reads by path: make sure the path still names the file being written.
  private assertSameHandle(fh: FileHandle, file: string): void {
    const a = fs.fstatSync(fh.fd);
    const b = fs.fstatSync(this.fh.fd);
    if (a.dev !== b.dev || a.ino !== b.ino) throw refuse.notSameFile(file, 'was replaced by another file');
  }
}
