// Reading the journal for verification: the lines of every segment in
// order, as records, with bounded memory (a chunk or two, and no line kept
// beyond MAX_LINE_BYTES); the marks where a segment is empty, missing or
// not a regular file; and each line's entry and hash.
import { Stats, lstatSync, readdirSync, statSync } from 'node:fs';
import { FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Entry, MAX_LINE_BYTES, MAX_SEGMENT_FILE_BYTES, decodeEntry, entryHash, segmentPath } from './audit-format';
import { Refusal } from './errors';
import { LineSplitter, READ_CHUNK, openSegment } from './journal-read';

export const DEFAULT_JOURNAL_NAME = 'audit.log';

// A directory stands for the journal in it (`audit.log`).
export function resolveJournalPath(path: string): string {
  try {
    if (statSync(path).isDirectory()) return join(path, DEFAULT_JOURNAL_NAME);
  } catch {
    // a missing path is reported by the reader, with its name
  }
  return path;
}

export interface LineRec {
  kind: 'line';
  bytes: Buffer | null; // null: longer than any entry (not kept)
  terminated: boolean; // ended with "\n"
  file: string;
  line: number; // 1-based, within its file
  seg: number;
  first: boolean; // first line of its file
  parsed?: Parsed;
  // Set on the last line read of a file longer than any segment the writer
  // makes: the offset past which the file was not read.
  unreadPast?: number;
}
// A segment file with no bytes at all, or a segment number missing while a later one exists.
export interface MarkRec {
  kind: 'empty' | 'gap' | 'unreadable';
  file: string;
  seg: number;
  detail: string;
}
export type Rec = LineRec | MarkRec;

export interface Parsed {
  entry: Entry | null;
  why: string;
  hash: string | null;
}

export function parse(r: LineRec): Parsed {
  if (r.parsed) return r.parsed;
  if (r.bytes === null) {
    r.parsed = { entry: null, why: `the line is longer than ${MAX_LINE_BYTES} bytes`, hash: null };
  } else {
    const d = decodeEntry(r.bytes);
    r.parsed = d.ok
      ? { entry: d.entry, why: '', hash: lineHash(r.bytes) }
      : { entry: null, why: d.why, hash: lineHash(r.bytes) };
  }
  return r.parsed;
}

// BLAKE2b-256 of a line, written straight into libsodium's wasm heap: the
// wrapper's per-call allocations and copies cost more than the hash itself
// (about half the verify time). Journal lines are public, so the buffers
// need no wiping. The raw export takes the 64-bit length as two 32-bit
// halves; the result is compared with entryHash once and the wrapper is
// used instead if they ever differ.
interface RawSodium {
  HEAPU8: Uint8Array;
  _malloc(size: number): number;
  _crypto_generichash(
    out: number,
    outLen: number,
    input: number,
    inLenLow: number,
    inLenHigh: number,
    key: number,
    keyLen: number,
  ): number;
}

let lineHash: (line: Buffer) => string = entryHash;
let fastHashChecked = false;

export function setUpLineHash(lib: unknown): void {
  if (fastHashChecked) return;
  fastHashChecked = true;
  const raw = (lib as { libsodium?: RawSodium }).libsodium;
  if (!raw || typeof raw._crypto_generichash !== 'function' || typeof raw._malloc !== 'function') return;
  const input = raw._malloc(MAX_LINE_BYTES);
  const out = raw._malloc(32);
  if (input === 0 || out === 0) return;
  const fast = (line: Buffer): string => {
    raw.HEAPU8.set(line, input); // HEAPU8 read afresh: it is replaced when the heap grows
    if (raw._crypto_generichash(out, 32, input, line.length, 0, 0, 0) !== 0) return entryHash(line);
    return Buffer.from(raw.HEAPU8.buffer, raw.HEAPU8.byteOffset + out, 32).toString('hex');
  };
  const probes = [Buffer.alloc(0), Buffer.from('{"v":1}'), Buffer.alloc(MAX_LINE_BYTES - 1, 0x61)];
  if (probes.every((p) => fast(p) === entryHash(p))) lineHash = fast;
}

// The records of every segment in order, read ahead on demand.
export class JournalLines {
  segments = 0; // files opened
  private queue: Array<Rec | undefined> = [];
  private qh = 0;
  private done = false;
  private seg = -1;
  private fh: FileHandle | null = null;
  private file = '';
  private lineNo = 0;
  private sawBytes = false;
  private split = new LineSplitter();
  private spare: Buffer | null = null;
  private fileOffset = 0; // bytes of the current file read

  constructor(private readonly base: string) {}

  get length(): number {
    return this.queue.length - this.qh;
  }

  peek(i: number): Rec | undefined {
    return this.queue[this.qh + i];
  }

  shift(): void {
    // Drop the record now (its line and chunk can go), compact now and then.
    this.queue[this.qh] = undefined;
    this.qh += 1;
    if (this.qh > 4096 && this.qh * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.qh);
      this.qh = 0;
    }
  }

  // Reads until `n` records are queued or every file is read.
  async ensure(n: number): Promise<void> {
    while (this.length < n && !this.done) await this.fill();
  }

  async close(): Promise<void> {
    await this.fh?.close().catch(() => undefined);
    this.fh = null;
  }

  private async fill(): Promise<void> {
    if (!this.fh) {
      await this.openNext();
      return;
    }
    // Lines are views on their chunk, so a chunk is reused only when no
    // line kept a view on it (the inside of an over-long line, say).
    const chunk = this.spare ?? Buffer.allocUnsafe(READ_CHUNK);
    this.spare = null;
    const room = MAX_SEGMENT_FILE_BYTES - this.fileOffset;
    const { bytesRead } = await this.fh.read(chunk, 0, Math.min(READ_CHUNK, Math.max(room, 1)), null);
    if (bytesRead === 0) {
      this.spare = chunk;
      await this.endFile();
      return;
    }
    if (room <= 0) {
      // A byte beyond the longest segment: the file is not a segment the
      // writer made; its last line read stands for the rest, unread.
      this.spare = chunk;
      await this.endFile(this.fileOffset);
      return;
    }
    this.fileOffset += bytesRead;
    this.sawBytes = true;
    let kept = false;
    this.split.feed(chunk.subarray(0, bytesRead), (bytes) => {
      if (bytes !== null && bytes.length > 0) kept = true;
      this.emitLine(bytes, true);
    });
    if (!kept) this.spare = chunk;
  }

  private emitLine(bytes: Buffer | null, terminated: boolean, unreadPast?: number): void {
    this.lineNo += 1;
    this.queue.push({
      kind: 'line',
      bytes,
      terminated,
      file: this.file,
      line: this.lineNo,
      seg: this.seg,
      first: this.lineNo === 1,
      ...(unreadPast !== undefined ? { unreadPast } : {}),
    });
  }

  // `unreadPast`: the file goes on beyond what a segment may hold; the
  // line in progress (or, at a line's end, an empty over-long one) is its
  // unterminated last line, longer than any entry.
  private async endFile(unreadPast?: number): Promise<void> {
    const rest = this.split.rest();
    if (unreadPast !== undefined) this.emitLine(null, false, unreadPast);
    else if (rest !== undefined) this.emitLine(rest, false);
    else if (!this.sawBytes) this.queue.push({ kind: 'empty', file: this.file, seg: this.seg, detail: 'is empty' });
    await this.close();
  }

  private async openNext(): Promise<void> {
    const n = this.seg + 1;
    const file = segmentPath(this.base, n);
    let exists = true;
    try {
      lstatSync(file);
    } catch {
      exists = false;
    }
    if (!exists) {
      this.done = true;
      if (n === 0) this.queue.push({ kind: 'unreadable', file, seg: 0, detail: 'does not exist' });
      else {
        const later = segmentAfter(this.base, n);
        if (later !== null)
          this.queue.push({
            kind: 'gap',
            file,
            seg: n,
            detail: `is missing although ${segmentPath(this.base, later)} exists`,
          });
      }
      return;
    }
    this.seg = n;
    this.file = file;
    this.lineNo = 0;
    this.sawBytes = false;
    this.fileOffset = 0;
    this.split = new LineSplitter();
    const opened = await openToRead(file);
    if ('why' in opened) {
      this.done = true;
      this.queue.push({ kind: 'unreadable', file, seg: n, detail: opened.why });
      return;
    }
    this.fh = opened.fh;
    this.segments += 1;
  }
}

// The lowest segment number above n whose file exists beside segment 0
// `base` (a gap in the set when n + 1 is missing); null when none does or
// the directory cannot be listed.
export function segmentAfter(base: string, n: number): number | null {
  const name = basename(base);
  let found: number | null = null;
  try {
    for (const f of readdirSync(dirname(base))) {
      if (!f.startsWith(name + '.')) continue;
      const rest = f.slice(name.length + 1);
      if (!/^[1-9]\d{0,8}$/.test(rest)) continue;
      const k = Number(rest);
      if (k > n && (found === null || k < found)) found = k;
    }
  } catch {
    return null;
  }
  return found;
}

const LINK = 'cannot be read (a symbolic link, never followed)';
const NOT_REGULAR = 'cannot be read (not a regular file)';

// Why a segment file is not read, or null for a regular file.
export function notRegular(st: Stats): string | null {
  if (st.isFile()) return null;
  return st.isSymbolicLink() ? LINK : NOT_REGULAR;
}

// A segment file is read only when it is a regular file itself: a symbolic
// link is never followed, as the daemon never follows one (SPEC §9), so a
// link cannot stand in for the journal. lstat first, so that a device or
// FIFO is not even opened; then the safe open the daemon uses, so that a link
// or FIFO put there after the lstat is refused all the same.
export async function openToRead(file: string): Promise<{ fh: FileHandle } | { why: string }> {
  try {
    const why = notRegular(lstatSync(file));
    if (why) return { why };
    return { fh: await openSegment(file, 'read') };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'unreadable';
    return { why: code === 'ELOOP' ? LINK : code === 'ENOTREG' ? NOT_REGULAR : `cannot be read (${code})` };
  }
}

export interface JournalLine {
  file: string;
  line: number; // 1-based, within its file
  bytes: Buffer | null; // without its "\n"; null: longer than any entry (not kept)
  terminated: boolean;
}

// The lines of every segment in order, read the way verification reads them
// (regular files only, no more than an entry's length of a line kept), for
// readers that print them. Segment 0 missing, empty or not a regular file,
// or a later segment missing or unreadable while the journal goes on, is a
// Refusal naming the file; an empty last segment has no lines.
export async function* journalLines(path: string): AsyncGenerator<JournalLine> {
  const src = new JournalLines(resolveJournalPath(path));
  try {
    for (;;) {
      await src.ensure(1);
      const r = src.peek(0);
      if (!r) return;
      src.shift();
      if (r.kind === 'line') {
        yield { file: r.file, line: r.line, bytes: r.bytes, terminated: r.terminated };
      } else if (r.seg === 0) {
        throw new Refusal(
          'not_found',
          `${r.file} ${r.detail}; give the journal file (segment 0, or its directory) with --log`,
        );
      } else if (r.kind !== 'empty') {
        throw new Refusal(
          'not_found',
          `segment ${r.seg} (${r.file}) ${r.detail}, so the entries from there on cannot be read; run \`postern audit verify\` to see what is damaged`,
        );
      }
    }
  } finally {
    await src.close();
  }
}
