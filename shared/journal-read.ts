// Reading journal segments (docs/audit-format.md), the one way both the
// daemon's start-up scan and `postern audit verify` read them: a segment
// is opened without following a link and only when it is a regular file,
// and no line is kept beyond MAX_LINE_BYTES, so memory stays bounded
// whatever a file holds.
import * as fs from 'node:fs';
import { FileHandle, open } from 'node:fs/promises';
import { MAX_LINE_BYTES } from './audit-format';

const { O_RDONLY, O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
const NL = 0x0a;
// The writer keeps a line and its "\n" within MAX_LINE_BYTES: a longer line is never an entry.
export const LONGEST_LINE = MAX_LINE_BYTES - 1;

export type OpenMode = 'read' | 'append' | 'create';

// O_NONBLOCK: opening a FIFO planted at the path must fail the check
// below, not hang; it changes nothing for regular files.
const FLAGS: Record<OpenMode, number> = {
  read: O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
  append: O_RDWR | O_NOFOLLOW | O_NONBLOCK,
  create: O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW,
};

// Opens a segment; never follows a symlink (ELOOP) and refuses anything but
// a regular file (ENOTREG, our own code) so a FIFO or device cannot stand in.
export async function openSegment(file: string, mode: OpenMode): Promise<FileHandle> {
  const fh = await open(file, FLAGS[mode], 0o600);
  try {
    if (mode === 'create') await fh.chmod(0o600); // exact mode whatever the umask
    const st = await fh.stat();
    if (!st.isFile()) throw Object.assign(new Error(`${file} is not a regular file`), { code: 'ENOTREG' });
    return fh;
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e;
  }
}

// Splits bytes fed in order into lines. A line is handed over without its
// "\n", as a view on the chunk it lies in when it lies in one (else a
// copy); a line longer than LONGEST_LINE is handed over as null, its bytes
// not kept. What is left of a chunk after its last "\n" is copied, so a
// chunk may be refilled once fed unless a line handed over is still used.
export class LineSplitter {
  private parts: Buffer[] = [];
  private partLen = 0;
  private overlong = false;

  // `offset`: where the line being assembled starts in the file.
  constructor(public offset = 0) {}

  // Calls onLine for each line completed by `data`; returning false stops
  // before that line counts as read (`offset` stays at its start) and makes
  // feed return false.
  feed(data: Buffer, onLine: (line: Buffer | null, offset: number) => boolean | void): boolean {
    let i = 0;
    for (let j = data.indexOf(NL, i); j !== -1; j = data.indexOf(NL, i)) {
      this.take(data.subarray(i, j));
      const line = this.line();
      if (onLine(line, this.offset) === false) return false;
      this.offset += this.partLen + 1;
      this.reset();
      i = j + 1;
    }
    if (i < data.length) this.take(data.subarray(i), true);
    return true;
  }

  // The line being assembled is already longer than any entry.
  get overlongSoFar(): boolean {
    return this.overlong;
  }

  // Bytes after the last "\n": the unterminated line (null when over-long),
  // or undefined when there are none.
  rest(): Buffer | null | undefined {
    return this.partLen > 0 || this.overlong ? this.line() : undefined;
  }

  // Adds a piece of the current line; past the longest entry only its length is kept.
  private take(piece: Buffer, copy = false): void {
    this.partLen += piece.length;
    if (this.overlong) return;
    if (this.partLen > LONGEST_LINE) {
      this.overlong = true;
      this.parts = [];
    } else if (piece.length > 0) this.parts.push(copy ? Buffer.from(piece) : piece);
  }

  private line(): Buffer | null {
    if (this.overlong) return null;
    return this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.partLen);
  }

  private reset(): void {
    this.parts = [];
    this.partLen = 0;
    this.overlong = false;
  }
}

export const READ_CHUNK = 256 * 1024;

export interface LineWalk {
  // Offset just after the last complete line handed to the callback.
  end: number;
  // The callback asked to stop at the line starting at `end`.
  stopped: boolean;
  // A line longer than any entry starts at `end`.
  overlong: boolean;
}

// Calls `onLine(line, offset)` for each "\n"-terminated line in [start, limit),
// without the "\n". `line` may be a view on a reused buffer: copy what you keep.
// Returning false stops the walk before that line counts as read; so does
// a line longer than any entry. Memory stays bounded by a chunk and a line.
export async function walkLines(
  fh: FileHandle,
  start: number,
  limit: number,
  onLine: (line: Buffer, offset: number) => boolean | void,
): Promise<LineWalk> {
  const chunk = Buffer.allocUnsafe(READ_CHUNK);
  const split = new LineSplitter(start);
  let stop: 'stopped' | 'overlong' | null = null;
  const each = (line: Buffer | null, offset: number): boolean => {
    if (line === null) stop = 'overlong';
    else if (onLine(line, offset) === false) stop = 'stopped';
    return stop === null;
  };
  for (let pos = start; pos < limit && stop === null;) {
    const { bytesRead } = await fh.read(chunk, 0, Math.min(READ_CHUNK, limit - pos), pos);
    if (bytesRead === 0) break;
    pos += bytesRead;
    split.feed(chunk.subarray(0, bytesRead), each);
    // Where it ends changes nothing: the walk stops at its start. Reading
    // on would take as long as the file is (a sparse one of terabytes).
    if (stop === null && split.overlongSoFar) stop = 'overlong';
  }
  const how = stop as 'stopped' | 'overlong' | null; // assigned in the callback
  const overlong = how === 'overlong' || (how === null && split.rest() === null);
  return { end: split.offset, stopped: how === 'stopped', overlong };
}

// The first line of a file (without "\n"), or null when it has no complete
// first line within MAX_LINE_BYTES.
export async function readFirstLine(fh: FileHandle): Promise<Buffer | null> {
  const buf = Buffer.alloc(MAX_LINE_BYTES + 1);
  const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
  const nl = buf.subarray(0, bytesRead).indexOf(NL);
  return nl === -1 ? null : Buffer.from(buf.subarray(0, nl));
}

export interface FoundLine {
  line: Buffer | 'overlong';
  start: number; // offset of its first byte (unknown, 0, when overlong)
  end: number; // offset of its "\n"
}

// The last "\n"-terminated line that ends before `limit`, scanning backwards
// in chunks so that memory stays bounded; null when there is none. When the
// bytes before `limit` hold no "\n" for longer than any entry, the scan
// stops there ('overlong', `end` the limit): what ends the file is no torn
// write, and reading back further would take as long as the file is (a
// sparse one of terabytes).
export async function lastCompleteLine(fh: FileHandle, limit: number): Promise<FoundLine | null> {
  const chunk = Buffer.allocUnsafe(READ_CHUNK);
  let end = -1;
  for (let pos = limit; pos > 0 && end < 0;) {
    if (limit - pos > LONGEST_LINE + 1) return { line: 'overlong', start: 0, end: limit };
    const from = Math.max(0, pos - READ_CHUNK);
    const { bytesRead } = await fh.read(chunk, 0, pos - from, from);
    const i = chunk.subarray(0, bytesRead).lastIndexOf(NL);
    if (i >= 0) end = from + i;
    pos = from;
  }
  if (end < 0) return null;
  const span = Math.min(end, LONGEST_LINE + 1);
  const buf = Buffer.alloc(span);
  const { bytesRead } = await fh.read(buf, 0, span, end - span);
  const nl = buf.subarray(0, bytesRead).lastIndexOf(NL);
  if (nl < 0 && end > LONGEST_LINE) return { line: 'overlong', start: 0, end };
  return { line: Buffer.from(buf.subarray(nl + 1, bytesRead)), start: end - span + nl + 1, end };
}

// The line that ends a file with "\n" (without it), or null when the file
// does not end with "\n" or its last line is longer than any entry.
export async function readLastLine(fh: FileHandle, size: number): Promise<Buffer | null> {
  const found = await lastCompleteLine(fh, size);
  return found && found.end === size - 1 && found.line !== 'overlong' ? found.line : null;
}
