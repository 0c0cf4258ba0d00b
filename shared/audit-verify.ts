// Offline verification of the audit journal (SPEC §9, docs/audit-format.md):
// the hash chain across every segment, the checkpoint signatures, the key
// that made them, and the expected head. Streams the files with bounded
// memory (a chunk or two, and no line kept beyond MAX_LINE_BYTES) and stops
// at the first problem, which it names with the entry number and the kind
// of damage.
import { Stats, constants, lstatSync, readdirSync, statSync } from 'node:fs';
import { open, FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import {
  CheckpointEntry,
  Entry,
  GENESIS_PREV,
  MAX_LINE_BYTES,
  checkpointMessage,
  decodeEntry,
  entryHash,
  segmentPath,
  sodiumReady,
} from './audit-format';
import { ed25519Verify } from './crypto';
import { Refusal } from './errors';

export interface VerifyOptions {
  pubkey?: string; // base64 Ed25519 public key, as `postern init` prints it
  expectHead?: { seq: number; hash: string };
  allowUnsignedTail?: boolean;
}

// Every verdict `audit verify` can give, in the order docs/audit-format.md lists them.
export const PROBLEM_KINDS = [
  'modified',
  'inserted',
  'deleted',
  'reordered',
  'bad_signature',
  'wrong_key',
  'unsigned_rotation',
  'unsigned_tail',
  'behind_expected_head',
  'torn_last_write',
  'not_a_journal',
  'missing_segment',
] as const;
export type ProblemKind = (typeof PROBLEM_KINDS)[number];

export interface VerifyProblem {
  seq: number | null;
  kind: ProblemKind;
  message: string;
  file: string;
  line: number;
}

export interface VerifyReport {
  ok: boolean;
  entries: number;
  checkpoints: number;
  segments: number;
  head: { seq: number; hash: string } | null;
  keyPinned: boolean;
  // The audit signing keys in the order they took over: the genesis key
  // from entry 1, then each key a `signer` entry named, from that entry.
  signingKeys: { key: string; since: number }[];
  signedThrough: number | null;
  unsignedTail: number;
  problem: VerifyProblem | null;
}

export const DEFAULT_JOURNAL_NAME = 'audit.log';
const READ_CHUNK = 256 * 1024;
const NL = 0x0a;
// A line (with its "\n") longer than this is never an entry: the writer refuses to write one.
const LONGEST_ENTRY = MAX_LINE_BYTES - 1;

// The pinned key as `postern init` prints it: canonical base64 of 32 bytes.
export function parsePubkey(text: string): Buffer | null {
  const raw = Buffer.from(text, 'base64');
  return raw.length === 32 && raw.toString('base64') === text ? raw : null;
}

// A directory stands for the journal in it (`audit.log`).
export function resolveJournalPath(path: string): string {
  try {
    if (statSync(path).isDirectory()) return join(path, DEFAULT_JOURNAL_NAME);
  } catch {
    // a missing path is reported by the reader, with its name
  }
  return path;
}

// ---------------------------------------------------------------------------
// Reading: the lines of every segment in order, as records.

interface LineRec {
  kind: 'line';
  bytes: Buffer | null; // null: longer than any entry (not kept)
  terminated: boolean; // ended with "\n"
  file: string;
  line: number; // 1-based, within its file
  seg: number;
  first: boolean; // first line of its file
  parsed?: Parsed;
}
// A segment file with no bytes at all, or a segment number missing while a later one exists.
interface MarkRec {
  kind: 'empty' | 'gap' | 'unreadable';
  file: string;
  seg: number;
  detail: string;
}
type Rec = LineRec | MarkRec;

interface Parsed {
  entry: Entry | null;
  why: string;
  hash: string | null;
}

function parse(r: LineRec): Parsed {
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

function setUpLineHash(lib: unknown): void {
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

class JournalLines {
  segments = 0; // files opened
  private queue: Array<Rec | undefined> = [];
  private qh = 0;
  private done = false;
  private seg = -1;
  private fh: FileHandle | null = null;
  private file = '';
  private lineNo = 0;
  private sawBytes = false;
  private parts: Buffer[] = [];
  private partLen = 0;
  private overlong = false;
  private spare: Buffer | null = null;
  private kept = false;

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
    this.kept = false;
    const { bytesRead } = await this.fh.read(chunk, 0, READ_CHUNK, null);
    if (bytesRead === 0) {
      this.spare = chunk;
      await this.endFile();
      return;
    }
    this.sawBytes = true;
    const data = chunk.subarray(0, bytesRead);
    let i = 0;
    for (let j = data.indexOf(NL, i); j !== -1; j = data.indexOf(NL, i)) {
      this.take(data.subarray(i, j));
      this.emitLine(true);
      i = j + 1;
    }
    if (i < data.length) this.take(data.subarray(i));
    if (!this.kept) this.spare = chunk;
  }

  // Adds a piece of the current line; past the longest entry only the fact is kept.
  private take(piece: Buffer): void {
    if (this.overlong) return;
    if (this.partLen + piece.length > LONGEST_ENTRY) {
      this.overlong = true;
      this.parts = [];
      return;
    }
    if (piece.length > 0) {
      this.parts.push(piece);
      this.kept = true;
    }
    this.partLen += piece.length;
  }

  private emitLine(terminated: boolean): void {
    this.lineNo += 1;
    let bytes: Buffer | null = null;
    if (!this.overlong)
      bytes = this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.partLen);
    this.queue.push({
      kind: 'line',
      bytes,
      terminated,
      file: this.file,
      line: this.lineNo,
      seg: this.seg,
      first: this.lineNo === 1,
    });
    this.parts = [];
    this.partLen = 0;
    this.overlong = false;
  }

  private async endFile(): Promise<void> {
    if (this.partLen > 0 || this.overlong) this.emitLine(false);
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
        const later = this.laterSegment(n);
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
    const opened = await openSegment(file);
    if ('why' in opened) {
      this.done = true;
      this.queue.push({ kind: 'unreadable', file, seg: n, detail: opened.why });
      return;
    }
    this.fh = opened.fh;
    this.segments += 1;
  }

  // The lowest segment number above n whose file exists (a gap in the set).
  private laterSegment(n: number): number | null {
    const name = basename(this.base);
    let found: number | null = null;
    try {
      for (const f of readdirSync(dirname(this.base))) {
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
}

// A segment file is read only when it is a regular file itself: a symbolic
// link is never followed, as the daemon never follows one (SPEC §9), so a
// link cannot stand in for the journal. lstat first, so that a device or
// FIFO is not even opened; O_NOFOLLOW and O_NONBLOCK, then fstat, so that a
// link or FIFO put there after the lstat is refused all the same.
async function openSegment(file: string): Promise<{ fh: FileHandle } | { why: string }> {
  let fh: FileHandle;
  try {
    const why = notRegular(lstatSync(file));
    if (why) return { why };
    fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'unreadable';
    return { why: code === 'ELOOP' ? LINK : `cannot be read (${code})` };
  }
  const why = notRegular(await fh.stat());
  if (!why) return { fh };
  await fh.close();
  return { why };
}

const LINK = 'cannot be read (a symbolic link, never followed)';

// Why a segment file is not read, or null for a regular file.
function notRegular(st: Stats): string | null {
  if (st.isFile()) return null;
  return st.isSymbolicLink() ? LINK : 'cannot be read (not a regular file)';
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

// ---------------------------------------------------------------------------
// Checking.

interface Point {
  rec: LineRec;
  entry: Entry;
  hash: string;
}

interface Verdict {
  kind: ProblemKind;
  seq: number | null;
  message: string;
  at: { file: string; line: number };
  // The verdict is about the entry before the window (X) itself, so it
  // replaces a deferred problem of that entry.
  aboutX?: boolean;
  // What the report counts when the problem is about an entry already
  // counted: the tally as it stood before that entry.
  passed?: Tally;
}

// The report's counts: the entries that passed, up to the last of them (the head).
interface Tally {
  entries: number;
  checkpoints: number;
  lastCheckpointSeq: number;
  signedThrough: number | null;
  keys: number; // how many signing keys had taken over
  x: Point | null;
}

const ADVICE: Record<ProblemKind, string> = {
  modified: 'the journal was altered after it was written; keep this copy as evidence and compare it with a backup',
  inserted: 'a line was added that the daemon did not write; keep this copy as evidence and compare it with a backup',
  deleted: 'entries were removed; keep this copy as evidence and compare it with a backup',
  reordered: 'entries were moved; keep this copy as evidence and compare it with a backup',
  bad_signature: 'a checkpoint was forged or altered; keep this copy as evidence',
  wrong_key:
    'check --pubkey against the key `postern init` printed (or the one `postern audit rotate-key` printed); otherwise this journal belongs to another vault or was re-signed',
  unsigned_rotation: 'a change of signing key was not vouched for by the key it replaces; keep this copy as evidence',
  unsigned_tail:
    'a daemon unlocked since it started signs them within a second (or at its next checkpoint while unlocked); if it has not been, unlock it, then verify again; or pass --allow-unsigned-tail to accept the tail',
  behind_expected_head: 'the journal was cut back or replaced since that head was noted; compare it with a backup',
  torn_last_write:
    'a write was cut short (crash or full disk): start the daemon once, it cuts the torn line and records a repair entry',
  not_a_journal: 'give the journal file (segment 0, or its directory) with --log',
  missing_segment: 'a segment file of the journal is missing; restore it from a backup',
};

// Does q chain from the entry (seq, hash)?
function linksFrom(seq: number, hash: string | null, q: Parsed | null): boolean {
  return q !== null && q.entry !== null && hash !== null && q.entry.seq === seq + 1 && q.entry.prev === hash;
}

function complete(r: Rec | undefined): Parsed | null {
  return r && r.kind === 'line' && r.terminated ? parse(r) : null;
}

// How many hex digits differ: a prev that differs from the expected hash in
// a digit or two was edited itself; a changed predecessor hashes to
// something unrelated.
function hexDistance(a: string, b: string): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) d += 1;
  return d;
}

function where(r: { file: string; line: number }): string {
  return `${basename(r.file)} line ${r.line}`;
}

// The link from X to A is broken: say what happened, looking one line further (B).
function classify(x: Point, a: LineRec, b: Rec | undefined): Verdict {
  const e = x.entry.seq + 1;
  const pa = parse(a);
  const pb = complete(b);
  const bFromX = linksFrom(x.entry.seq, x.hash, pb);
  const ae = pa.entry;
  const at = { file: a.file, line: a.line };

  // The file of segment n holds the start of another segment: a whole
  // segment removed and the later ones renumbered, or an earlier segment
  // copied over this one. Either way segment n's own entries are not there.
  const startsOther =
    ae && a.first && a.seg > 0 && (ae.type === 'genesis' || (ae.type === 'segment' && ae.segment !== a.seg));
  if (startsOther) {
    const other = ae.type === 'genesis' ? 0 : ae.segment;
    return {
      kind: 'missing_segment',
      seq: e,
      at,
      message: `${basename(a.file)} begins segment ${other} (entry ${ae.seq}), not segment ${a.seg}: the entries of segment ${a.seg}, from ${e}, are missing`,
    };
  }
  if (!ae) {
    if (bFromX)
      return {
        kind: 'inserted',
        seq: null,
        at,
        message: `${where(a)} is an extra line that is not an entry (${pa.why}); entry ${e} follows it`,
      };
    // One last line that is not an entry, within an entry's length, is what
    // a crash can leave (a write cut short, blocks never written): the
    // daemon cuts it at its next start, as it does part of a line.
    if (b === undefined && a.bytes !== null) {
      return {
        kind: 'torn_last_write',
        seq: e,
        at,
        message: `the last line (${where(a)}) is not an entry (${pa.why})`,
      };
    }
    return { kind: 'modified', seq: e, at, message: `entry ${e} (${where(a)}) no longer decodes: ${pa.why}` };
  }
  // A second line chaining from X's predecessor: one of the two was added.
  if (ae.seq === x.entry.seq && ae.prev === x.entry.prev) {
    if ((a.bytes as Buffer).equals(x.rec.bytes as Buffer)) {
      return { kind: 'inserted', seq: ae.seq, at, message: `${where(a)} is a second copy of entry ${ae.seq}` };
    }
    if (linksFrom(ae.seq, pa.hash, pb)) {
      return {
        kind: 'inserted',
        seq: ae.seq,
        at: x.rec,
        aboutX: true,
        message: `${where(x.rec)} is an extra entry claiming seq ${ae.seq}: the chain continues from ${where(a)}`,
      };
    }
    return { kind: 'inserted', seq: ae.seq, at, message: `${where(a)} is an extra entry claiming seq ${ae.seq}` };
  }
  if (bFromX) {
    const pbEntry = (pb as Parsed).entry as Entry;
    if (ae.seq > e)
      return {
        kind: 'reordered',
        seq: e,
        at,
        message: `entry ${ae.seq} (${where(a)}) comes before entry ${pbEntry.seq}`,
      };
    return {
      kind: 'inserted',
      seq: ae.seq,
      at,
      message: `${where(a)} is an extra entry claiming seq ${ae.seq}: entry ${e} follows it`,
    };
  }
  if (ae.seq === e) {
    // A's prev is wrong. If B chains from A, A is intact and X changed.
    const xChanged = pb ? linksFrom(e, pa.hash, pb) : hexDistance(ae.prev, x.hash) > 8;
    if (xChanged) {
      return {
        kind: 'modified',
        seq: x.entry.seq,
        at: x.rec,
        aboutX: true,
        message: `entry ${x.entry.seq} (${where(x.rec)}) was changed: entry ${e} names another hash for it`,
      };
    }
    return {
      kind: 'modified',
      seq: e,
      at,
      message: `entry ${e} (${where(a)}) was changed: it does not name the hash of entry ${x.entry.seq}, and nothing chains from it`,
    };
  }
  if (ae.prev === x.hash) {
    return {
      kind: 'modified',
      seq: e,
      at,
      message: `entry ${e} (${where(a)}) was changed: it follows entry ${x.entry.seq} but claims seq ${ae.seq}`,
    };
  }
  if (ae.seq > e) {
    const range = ae.seq - 1 === e ? `entry ${e} is` : `entries ${e} to ${ae.seq - 1} are`;
    return {
      kind: 'deleted',
      seq: e,
      at,
      message: `${range} missing: entry ${ae.seq} (${where(a)}) follows entry ${x.entry.seq}`,
    };
  }
  return {
    kind: 'modified',
    seq: e,
    at,
    message: `entry ${e} (${where(a)}) was replaced by a line claiming seq ${ae.seq}`,
  };
}

function isValidGenesis(e: Entry): boolean {
  return e.type === 'genesis' && e.seq === 1 && e.prev === GENESIS_PREV;
}

// The journal's first line, which must be the genesis entry.
function classifyFirst(a: LineRec, b: Rec | undefined): Verdict | null {
  const pa = parse(a);
  const ae = pa.entry;
  const at = { file: a.file, line: a.line };
  if (ae && isValidGenesis(ae)) return null;
  const pb = complete(b);
  const be = pb?.entry;
  if (be && isValidGenesis(be)) {
    if (ae && ae.seq === 2 && ae.prev === pb.hash)
      return { kind: 'reordered', seq: 1, at, message: 'entry 2 comes before the genesis entry' };
    return {
      kind: 'inserted',
      seq: ae ? ae.seq : null,
      at,
      message: `${where(a)} is an extra line before the genesis entry`,
    };
  }
  // Only the genesis entry is of type genesis: one with another seq or prev is that entry, changed.
  if (ae && ae.type === 'genesis') {
    return {
      kind: 'modified',
      seq: 1,
      at,
      message: `the genesis entry was changed: it has seq ${ae.seq} and prev ${ae.prev.slice(0, 16)}…, not seq 1 and a prev of 64 zeros`,
    };
  }
  if (!ae && be && be.seq === 2)
    return { kind: 'modified', seq: 1, at, message: `the genesis entry no longer decodes: ${pa.why}` };
  // The journal starts later than entry 1: the first entries were removed.
  // A segment entry is rather a later segment given in place of segment 0.
  if (ae && ae.seq > 1 && ae.type !== 'segment') {
    const range =
      ae.seq === 2 ? 'entry 1 (the genesis entry) is' : `entries 1 (the genesis entry) to ${ae.seq - 1} are`;
    return {
      kind: 'deleted',
      seq: 1,
      at,
      message: `${range} missing: the first line (${where(a)}) is entry ${ae.seq}`,
    };
  }
  const what = !ae
    ? `not a journal entry (${pa.why})`
    : ae.type === 'segment'
      ? `the start of segment ${ae.segment} (entry ${ae.seq}), not the genesis entry of segment 0`
      : `a ${ae.type} entry with seq ${ae.seq}, not the genesis entry`;
  return { kind: 'not_a_journal', seq: null, at, message: `the first line of ${a.file} is ${what}` };
}

class Verifier {
  entries = 0;
  checkpoints = 0;
  lastCheckpointSeq = 0;
  signedThrough: number | null = null;
  x: Point | null = null;
  pending: Verdict | null = null; // a problem of X itself, reported once its successor confirms X's bytes
  journalId = '';
  // The signing key in force, and a change to another key waiting for the
  // checkpoint by this one that vouches for it.
  current = '';
  changing: { key: string; seq: number; at: { file: string; line: number }; before: Tally } | null = null;
  keys: { key: string; since: number }[] = [];
  // A checkpoint signed by the pinned key was seen (it vouches for every
  // entry before it, whichever keys signed them).
  pinnedSigned = false;
  expectSeen: string | null = null;
  firstUnsigned = { file: '', line: 0 }; // where the entries after the last checkpoint begin

  constructor(
    private readonly pinned: string | null,
    private readonly expect: { seq: number; hash: string } | null,
  ) {}

  beforeX: Tally = this.tally();

  tally(): Tally {
    return {
      entries: this.entries,
      checkpoints: this.checkpoints,
      lastCheckpointSeq: this.lastCheckpointSeq,
      signedThrough: this.signedThrough,
      keys: this.keys.length,
      x: this.x,
    };
  }

  // A record that chains (or the genesis): count it and note what is wrong with it, if anything.
  accept(rec: LineRec): void {
    this.beforeX = this.tally();
    const p = parse(rec);
    const entry = p.entry as Entry;
    this.x = { rec, entry, hash: p.hash as string };
    this.entries += 1;
    if (entry.seq === this.lastCheckpointSeq + 1) this.firstUnsigned = { file: rec.file, line: rec.line };
    if (this.expect && entry.seq === this.expect.seq) this.expectSeen = p.hash;
    const problem = this.problemOf(rec, entry);
    if (problem) problem.passed ??= this.beforeX;
    this.pending = problem;
  }

  private problemOf(rec: LineRec, entry: Entry): Verdict | null {
    const at = rec; // a LineRec names its file and line
    const seq = entry.seq;
    if (entry.type === 'genesis') {
      if (seq !== 1)
        return { kind: 'inserted', seq, at, message: `entry ${seq} (${where(rec)}) is a second genesis entry` };
      this.journalId = entry.journal_id;
      this.current = entry.sign_pub;
      this.keys = [{ key: entry.sign_pub, since: 1 }];
      this.genesisAt = at;
      return null;
    }
    const changing = this.changing;
    if (changing && entry.type !== 'checkpoint') {
      return {
        kind: 'unsigned_rotation',
        seq: changing.seq,
        at: changing.at,
        passed: changing.before,
        message: `entry ${changing.seq} changes the signing key to ${changing.key}, but entry ${seq} (${where(rec)}) after it is not a checkpoint signed by the key it replaces (${this.current})`,
      };
    }
    if (rec.first && rec.seg > 0) {
      if (entry.type !== 'segment' || entry.segment !== rec.seg) {
        return {
          kind: 'missing_segment',
          seq,
          at,
          message: `${basename(rec.file)} does not begin with the entry of segment ${rec.seg}`,
        };
      }
      return null;
    }
    if (entry.type === 'segment')
      return { kind: 'inserted', seq, at, message: `entry ${seq} (${where(rec)}) is a segment entry inside a segment` };
    // Events name their key entry by its seq; a key entry naming another seq was not written so.
    if (entry.type === 'key' && entry.key_id !== seq)
      return {
        kind: 'modified',
        seq,
        at,
        message: `key entry ${seq} (${where(rec)}) has key_id ${entry.key_id}: a key entry's key_id is its own seq`,
      };
    if (entry.type === 'checkpoint') return this.checkpointProblem(entry, at);
    if (entry.type === 'signer')
      this.changing = { key: entry.sign_pub, seq, at: { file: rec.file, line: rec.line }, before: this.beforeX };
    return null;
  }

  genesisAt: { file: string; line: number } = { file: '', line: 0 };

  private checkpointProblem(c: CheckpointEntry, at: { file: string; line: number }): Verdict | null {
    const seq = c.seq;
    if (c.head_seq !== seq - 1 || c.head !== c.prev) {
      return {
        kind: 'bad_signature',
        seq,
        at,
        message: `checkpoint ${seq} signs head ${c.head_seq}:${c.head.slice(0, 16)}… but follows entry ${seq - 1}:${c.prev.slice(0, 16)}…`,
      };
    }
    const msg = checkpointMessage(this.journalId, c.head_seq, c.head);
    if (!ed25519Verify(Buffer.from(c.sig, 'base64'), msg, Buffer.from(c.sign_pub, 'base64'))) {
      return {
        kind: 'bad_signature',
        seq,
        at,
        message: `checkpoint ${seq}'s signature does not verify under the key it names`,
      };
    }
    if (this.changing && c.sign_pub !== this.current) {
      return {
        kind: 'unsigned_rotation',
        seq: this.changing.seq,
        at: this.changing.at,
        passed: this.changing.before,
        message: `entry ${this.changing.seq} changes the signing key to ${this.changing.key}, but checkpoint ${seq} after it is signed by ${c.sign_pub}, not by the key it replaces (${this.current})`,
      };
    }
    if (c.sign_pub !== this.current) {
      const retired = this.keys.some((k) => k.key === c.sign_pub);
      const inForce =
        this.keys.length > 1
          ? `the key in force since entry ${(this.keys[this.keys.length - 1] as { since: number }).since}`
          : "the genesis entry's key";
      return {
        kind: 'wrong_key',
        seq,
        at,
        message: `checkpoint ${seq} is signed by ${retired ? 'the retired key ' : ''}${c.sign_pub}, not by ${inForce} ${this.current}`,
      };
    }
    if (c.sign_pub === this.pinned) this.pinnedSigned = true;
    if (this.changing) {
      this.current = this.changing.key;
      this.keys.push({ key: this.changing.key, since: this.changing.seq });
      this.changing = null;
    }
    this.checkpoints += 1;
    this.lastCheckpointSeq = seq;
    this.signedThrough = c.head_seq;
    return null;
  }

  // After the last record.
  finish(allowUnsignedTail: boolean): Verdict | null {
    const x = this.x as Point;
    if (this.pending) return this.pending;
    const at = { file: x.rec.file, line: x.rec.line };
    const head = x.entry.seq;
    if (this.pinned && !this.pinnedSigned && this.keys[0]?.key !== this.pinned) {
      const named = this.keys.find((k) => k.key === this.pinned);
      const message = named
        ? `the journal changes to the pinned key ${this.pinned} at entry ${named.since}, but no checkpoint signed by it follows, and its genesis entry names another key (${this.keys[0]?.key})`
        : `the genesis entry names signing key ${this.keys[0]?.key}, not the pinned key ${this.pinned}, and the journal never changes to the pinned key`;
      return { kind: 'wrong_key', seq: 1, at: this.genesisAt, message };
    }
    if (this.expect) {
      if (head < this.expect.seq) {
        return {
          kind: 'behind_expected_head',
          seq: head + 1,
          at,
          message: `the journal ends at entry ${head}, before the expected head ${this.expect.seq}: entries ${head + 1} to ${this.expect.seq} are missing`,
        };
      }
      if (this.expectSeen !== this.expect.hash) {
        return {
          kind: 'behind_expected_head',
          seq: this.expect.seq,
          at,
          message: `entry ${this.expect.seq} hashes to ${this.expectSeen}, not to the expected ${this.expect.hash}`,
        };
      }
    }
    if (head > this.lastCheckpointSeq && !allowUnsignedTail) {
      const from = this.lastCheckpointSeq + 1;
      const after =
        this.lastCheckpointSeq === 0
          ? 'no checkpoint signs any entry'
          : `they follow the last checkpoint (entry ${this.lastCheckpointSeq})`;
      return {
        kind: 'unsigned_tail',
        seq: from,
        at: this.firstUnsigned,
        message: `entries ${from} to ${head} are not signed yet: ${after}`,
      };
    }
    return null;
  }
}

export async function verifyJournal(path: string, opts: VerifyOptions = {}): Promise<VerifyReport> {
  let pinned: string | null = null;
  if (opts.pubkey !== undefined) {
    const raw = parsePubkey(opts.pubkey);
    if (!raw)
      throw new Refusal(
        'bad_request',
        'the pinned key must be the 32-byte Ed25519 public key in base64 that `postern init` printed',
      );
    pinned = raw.toString('base64');
  }
  const expect = opts.expectHead ?? null;
  if (expect && (!Number.isSafeInteger(expect.seq) || expect.seq < 1 || !/^[0-9a-f]{64}$/.test(expect.hash))) {
    throw new Refusal(
      'bad_request',
      'the expected head must be SEQ:HASH with SEQ ≥ 1 and HASH 64 lower-case hex digits, as `postern audit head` prints it',
    );
  }
  setUpLineHash(await sodiumReady());
  const base = resolveJournalPath(path);
  const src = new JournalLines(base);
  const v = new Verifier(pinned, expect);
  let verdict: Verdict | null = null;
  try {
    verdict = await run(src, v, base, Boolean(opts.allowUnsignedTail));
  } finally {
    await src.close();
  }
  // An entry the problem is about did not pass, even if the chain went past it.
  const t = verdict?.passed ?? v.tally();
  const x = t.x;
  return {
    ok: verdict === null,
    entries: t.entries,
    checkpoints: t.checkpoints,
    segments: src.segments,
    head: x ? { seq: x.entry.seq, hash: x.hash } : null,
    keyPinned: pinned !== null,
    signingKeys: v.keys.slice(0, t.keys),
    signedThrough: t.signedThrough,
    unsignedTail: x ? x.entry.seq - t.lastCheckpointSeq : 0,
    problem: verdict && {
      seq: verdict.seq,
      kind: verdict.kind,
      message: `${verdict.message}; ${ADVICE[verdict.kind]}`,
      file: verdict.at.file,
      line: verdict.at.line,
    },
  };
}

async function run(src: JournalLines, v: Verifier, base: string, allowUnsignedTail: boolean): Promise<Verdict | null> {
  for (;;) {
    // A and one line of lookahead; mostly already queued.
    if (src.length < 2) await src.ensure(2);
    const a = src.peek(0);
    const x = v.x;
    if (!a) {
      if (!x)
        return { kind: 'not_a_journal', seq: null, at: { file: base, line: 0 }, message: `${base} holds no entry` };
      return v.finish(allowUnsignedTail);
    }
    if (a.kind !== 'line') return v.pending ?? markVerdict(a, x, src.peek(1) !== undefined);
    if (!a.terminated) {
      if (v.pending) return v.pending;
      if (!x) return { kind: 'not_a_journal', seq: null, at: a, message: `${a.file} holds no complete line` };
      const e = x.entry.seq + 1;
      if (src.peek(1) !== undefined)
        return {
          kind: 'modified',
          seq: e,
          at: a,
          message: `${basename(a.file)} ends in the middle of a line (line ${a.line}) although later segments follow`,
        };
      // A write cut short leaves part of one entry, never more than an entry's length.
      if (a.bytes === null)
        return {
          kind: 'modified',
          seq: e,
          at: a,
          message: `the last line (${where(a)}) is incomplete and longer than ${MAX_LINE_BYTES} bytes: not a write cut short`,
        };
      return { kind: 'torn_last_write', seq: e, at: a, message: `the last line (${where(a)}) is incomplete` };
    }
    if (!x) {
      const first = classifyFirst(a, src.peek(1));
      if (first) return first;
      v.accept(a);
    } else if (linksFrom(x.entry.seq, x.hash, parse(a))) {
      if (v.pending) return v.pending;
      v.accept(a);
    } else {
      const c = classify(x, a, src.peek(1));
      if (c.aboutX) return { ...c, passed: v.beforeX };
      return v.pending ? unconfirmed(v.pending, c, x, a, src.peek(1), v.beforeX) : c;
    }
    src.shift();
  }
}

// X has a problem of its own and A does not chain from it. X's bytes are
// the ones that were chained when the line after A chains from X (A was put
// in between); with no entry after X (a torn last write, a missing segment)
// X's own problem stands; otherwise nothing vouches for X's bytes, and the
// first thing wrong is that X was changed.
function unconfirmed(own: Verdict, c: Verdict, x: Point, a: LineRec, b: Rec | undefined, passed: Tally): Verdict {
  if (c.kind === 'torn_last_write' || c.kind === 'missing_segment' || linksFrom(x.entry.seq, x.hash, complete(b)))
    return own;
  return {
    kind: 'modified',
    seq: x.entry.seq,
    at: x.rec,
    passed,
    message: `entry ${x.entry.seq} (${where(x.rec)}) was changed: ${own.message}, and ${where(a)} after it does not chain from it`,
  };
}

function markVerdict(m: MarkRec, x: Point | null, more: boolean): Verdict {
  const at = { file: m.file, line: 0 };
  const next = x ? x.entry.seq + 1 : null;
  if (m.kind === 'unreadable') {
    return m.seg === 0
      ? { kind: 'not_a_journal', seq: null, at, message: `${m.file} ${m.detail}` }
      : { kind: 'missing_segment', seq: next, at, message: `segment ${m.seg} (${m.file}) ${m.detail}` };
  }
  if (m.seg === 0) return { kind: 'not_a_journal', seq: null, at, message: `${m.file} is empty` };
  if (m.kind === 'gap')
    return { kind: 'missing_segment', seq: next, at, message: `segment ${m.seg} (${m.file}) ${m.detail}` };
  if (more)
    return {
      kind: 'missing_segment',
      seq: next,
      at,
      message: `segment ${m.seg} (${m.file}) is empty although later segments follow`,
    };
  return {
    kind: 'torn_last_write',
    seq: next,
    at,
    message: `the last segment ${m.file} is empty: the daemon stopped while starting it`,
  };
}

// ---------------------------------------------------------------------------
// The head: the last complete entry of the last segment, read from the end.

export interface JournalHead {
  seq: number;
  hash: string;
  file: string;
}

export async function journalHead(path: string): Promise<JournalHead> {
  await sodiumReady();
  const base = resolveJournalPath(path);
  let last = -1;
  for (let n = 0; ; n++) {
    const file = segmentPath(base, n);
    let why: string | null;
    try {
      why = notRegular(lstatSync(file));
    } catch {
      break;
    }
    if (why)
      throw new Refusal('not_found', `${file} ${why}; give the journal file (segment 0, or its directory) with --log`);
    last = n;
  }
  if (last < 0)
    throw new Refusal(
      'not_found',
      `${base} does not exist; give the journal file (segment 0, or its directory) with --log`,
    );
  for (let n = last; n >= 0; n--) {
    const file = segmentPath(base, n);
    const line = await lastEntryLine(file, n === last);
    if (line === 'none') continue;
    const d = line === 'overlong' ? null : decodeEntry(line);
    if (!d || !d.ok) {
      throw new Refusal(
        'not_found',
        `the last complete line of ${file} is not a journal entry; run \`postern audit verify --log ${base}\` to find the damage`,
      );
    }
    return { seq: d.entry.seq, hash: entryHash(line as Buffer), file };
  }
  throw new Refusal('not_found', `${base} holds no complete entry; give the journal file with --log`);
}

interface FoundLine {
  line: Buffer | 'overlong';
  start: number; // offset of its first byte (unknown, 0, when overlong)
  end: number; // offset of its "\n"
}

// The line that should hold a segment's last entry: its last complete line,
// or, in the last segment, the one before it when that last line is a torn
// write (a line that is not an entry, ending the file). Part of a line at
// the end is skipped. 'none': no complete entry line in the file.
async function lastEntryLine(file: string, isLast: boolean): Promise<Buffer | 'overlong' | 'none'> {
  // A FIFO or device would block or never end, a link could point anywhere: only regular files are read.
  const opened = await openSegment(file);
  if ('why' in opened)
    throw new Refusal(
      'not_found',
      `${file} ${opened.why}; give the journal file (segment 0, or its directory) with --log`,
    );
  const fh = opened.fh;
  try {
    const size = (await fh.stat()).size;
    const found = await completeLineBefore(fh, size);
    if (!found) return 'none';
    const torn = isLast && found.end === size - 1 && found.line !== 'overlong' && !decodeEntry(found.line).ok;
    if (!torn) return found.line;
    const before = await completeLineBefore(fh, found.start);
    return before ? before.line : 'none';
  } finally {
    await fh.close();
  }
}

// The last "\n"-terminated line that ends before `limit`, scanning backwards
// in chunks so that memory stays bounded.
async function completeLineBefore(fh: FileHandle, limit: number): Promise<FoundLine | null> {
  const chunk = Buffer.allocUnsafe(READ_CHUNK);
  let end = -1;
  for (let pos = limit; pos > 0 && end < 0;) {
    const from = Math.max(0, pos - READ_CHUNK);
    const { bytesRead } = await fh.read(chunk, 0, pos - from, from);
    const i = chunk.subarray(0, bytesRead).lastIndexOf(NL);
    if (i >= 0) end = from + i;
    pos = from;
  }
  if (end < 0) return null;
  const span = Math.min(end, LONGEST_ENTRY + 1);
  const buf = Buffer.alloc(span);
  const { bytesRead } = await fh.read(buf, 0, span, end - span);
  const nl = buf.subarray(0, bytesRead).lastIndexOf(NL);
  if (nl < 0 && end > LONGEST_ENTRY) return { line: 'overlong', start: 0, end };
  return { line: Buffer.from(buf.subarray(nl + 1, bytesRead)), start: end - span + nl + 1, end };
}
