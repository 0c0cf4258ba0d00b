// File operations on journal segments: opening without following links,
// positional writes, directory fsync, and reading lines with bounded memory.
import * as fs from 'node:fs';
import { FileHandle, open } from 'node:fs/promises';
import { MAX_LINE_BYTES } from '../../shared/audit-format';

const { O_RDONLY, O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = fs.constants;
const NL = 0x0a;
const READ_CHUNK = 1024 * 1024;
// The writer keeps a line and its "\n" within MAX_LINE_BYTES.
const LONGEST_LINE = MAX_LINE_BYTES - 1;

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

export async function writeAllAt(fh: FileHandle, data: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await fh.write(data, done, data.length - done, position + done);
    // A zero-byte write would loop forever; the kernel reports ENOSPC on the next call anyway.
    if (bytesWritten === 0) throw Object.assign(new Error('write wrote nothing'), { code: 'ENOSPC' });
    done += bytesWritten;
  }
}

// The same on the event loop: a batch of journal lines is a copy into the
// page cache (the fdatasync that makes it durable stays off the loop), and
// a thread-pool round trip for it costs more than the copy, before every
// intent. Larger batches keep the asynchronous write.
export const SYNC_WRITE_MAX = 256 * 1024;
export function writeAllAtSync(fd: number, data: Buffer, position: number): void {
  let done = 0;
  while (done < data.length) {
    const bytesWritten = fs.writeSync(fd, data, done, data.length - done, position + done);
    if (bytesWritten === 0) throw Object.assign(new Error('write wrote nothing'), { code: 'ENOSPC' });
    done += bytesWritten;
  }
}

// Makes a new directory entry (a new segment) survive a power loss.
export async function fsyncDirectory(dir: string): Promise<void> {
  const fh = await open(dir, O_RDONLY | O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export interface LineWalk {
  // Offset just after the last complete line handed to the callback.
  end: number;
  // The callback asked to stop at the line starting at `end`.
  stopped: boolean;
  // A line longer than any entry starts at `end` (nothing after it was read).
  overlong: boolean;
}

// Calls `onLine(line, offset)` for each "\n"-terminated line in [start, limit),
// without the "\n". `line` is a view on a reused buffer: copy what you keep.
// Returning false stops the walk before that line counts as read. Memory
// stays bounded by about 2 × READ_CHUNK whatever the file holds.
export async function walkLines(
  fh: FileHandle,
  start: number,
  limit: number,
  onLine: (line: Buffer, offset: number) => boolean | void,
): Promise<LineWalk> {
  const buf = Buffer.allocUnsafe(READ_CHUNK);
  let carry = Buffer.alloc(0);
  let carryAt = start;
  let pos = start;
  while (pos < limit) {
    const { bytesRead } = await fh.read(buf, 0, Math.min(READ_CHUNK, limit - pos), pos);
    if (bytesRead === 0) break;
    pos += bytesRead;
    const data = carry.length > 0 ? Buffer.concat([carry, buf.subarray(0, bytesRead)]) : buf.subarray(0, bytesRead);
    let i = 0;
    for (let j = data.indexOf(NL, i); j !== -1; j = data.indexOf(NL, i)) {
      if (j - i > LONGEST_LINE) return { end: carryAt + i, stopped: false, overlong: true };
      if (onLine(data.subarray(i, j), carryAt + i) === false)
        return { end: carryAt + i, stopped: true, overlong: false };
      i = j + 1;
    }
    carry = Buffer.from(data.subarray(i)); // a copy: `buf` is refilled next round
    carryAt += i;
    if (carry.length > LONGEST_LINE) return { end: carryAt, stopped: false, overlong: true };
  }
  return { end: carryAt, stopped: false, overlong: false };
}

// The first line of a file (without "\n"), or null when it has no complete
// first line within MAX_LINE_BYTES.
export async function readFirstLine(fh: FileHandle): Promise<Buffer | null> {
  const buf = Buffer.alloc(MAX_LINE_BYTES + 1);
  const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
  const nl = buf.subarray(0, bytesRead).indexOf(NL);
  return nl === -1 ? null : Buffer.from(buf.subarray(0, nl));
}

// The last line of a file that ends with "\n" (without it), or null when
// the file is empty, does not end with "\n", or its last line is too long.
export async function readLastLine(fh: FileHandle, size: number): Promise<Buffer | null> {
  const n = Math.min(size, MAX_LINE_BYTES + 1);
  if (n === 0) return null;
  const buf = Buffer.alloc(n);
  const { bytesRead } = await fh.read(buf, 0, n, size - n);
  if (bytesRead !== n || buf[n - 1] !== NL) return null;
  const before = buf.subarray(0, n - 1).lastIndexOf(NL);
  if (before === -1 && size > n) return null; // longer than MAX_LINE_BYTES
  return Buffer.from(buf.subarray(before + 1, n - 1));
}
