// The writer's file operations on journal segments: positional writes,
// directory fsync, and the check that a segment's path still names it. Opening and reading segments is shared with the
// offline verifier (shared/journal-read.ts).
import * as fs from 'node:fs';
import { FileHandle, open } from 'node:fs/promises';
import * as refuse from './refusals';

const { O_RDONLY, O_DIRECTORY } = fs.constants;

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

// An open segment's device and inode do not change while it is open: read
// once per handle, so a check costs one lstat of the path.
const opened = new WeakMap<FileHandle, { dev: number; ino: number }>();

function identityOf(file: string, fh: FileHandle): { dev: number; ino: number } {
  let id = opened.get(fh);
  if (id) return id;
  try {
    const st = fs.fstatSync(fh.fd);
    id = { dev: st.dev, ino: st.ino };
  } catch (e) {
    throw refuse.writeFailed(file, e);
  }
  opened.set(fh, id);
  return id;
}

// Does the path still name the open segment `fh`? A segment removed,
// renamed or replaced (by a link, a FIFO, another file) is refused: what is
// written to it would go to a file nobody will read.
export function assertStillNamed(file: string, fh: FileHandle): void {
  const id = identityOf(file, fh);
  let named: fs.Stats | undefined;
  try {
    named = fs.lstatSync(file, { throwIfNoEntry: false });
  } catch (e) {
    throw refuse.notSameFile(file, `cannot be checked (${String((e as NodeJS.ErrnoException).code)})`);
  }
  if (named === undefined) throw refuse.notSameFile(file, 'was removed or renamed');
  if (named.isSymbolicLink()) throw refuse.notSameFile(file, 'was replaced by a symbolic link');
  if (!named.isFile()) throw refuse.notSameFile(file, 'was replaced by something that is not a regular file');
  if (named.dev !== id.dev || named.ino !== id.ino) throw refuse.notSameFile(file, 'was replaced by another file');
}
