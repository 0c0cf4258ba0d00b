// Atomic, durable replacement of a file: write a temp file in the same
// directory, fsync it, rename it over the target, fsync the directory. A crash
// at any moment leaves either the old or the new file, never a mix.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';

const TEMP_MARK = '.tmp-';

// `.<base>.tmp-<pid>-<random>`: hidden, tied to its writer's pid so leftovers
// of dead writers can be told apart from a write in progress.
function tempName(target: string): string {
  return path.join(
    path.dirname(target),
    `.${path.basename(target)}${TEMP_MARK}${process.pid}-${randomBytes(6).toString('hex')}`,
  );
}

function writeAll(fd: number, data: Buffer): void {
  let done = 0;
  while (done < data.length) done += fs.writeSync(fd, data, done, data.length - done);
}

function fsyncDirectory(dir: string): void {
  const fd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export function writeFileDurable(target: string, data: Buffer, mode = 0o600): void {
  const temp = tempName(target);
  const { O_CREAT, O_EXCL, O_WRONLY, O_NOFOLLOW } = fs.constants;
  let fd: number | null = fs.openSync(temp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW, 0o600);
  try {
    // Exact mode whatever the umask; the file is still empty at this point.
    fs.fchmodSync(fd, mode);
    writeAll(fd, data);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = null;
    fs.renameSync(temp, target);
  } catch (e) {
    if (fd !== null) fs.closeSync(fd);
    fs.rmSync(temp, { force: true });
    throw e;
  }
  // After the rename the new file is in place; this makes the rename itself
  // survive a power loss.
  fsyncDirectory(path.dirname(target));
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// Removes temp files left in `dir` by writers of `baseName` that are no longer
// running (killed mid-write). Our own pid counts as finished: writes are
// synchronous, so none of ours is in progress while this runs. Returns the
// names removed.
export function removeStaleTemps(dir: string, baseName: string): string[] {
  const prefix = `.${baseName}${TEMP_MARK}`;
  const removed: string[] = [];
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(/^(\d+)-[0-9a-f]+$/.exec(name.slice(prefix.length))?.[1]);
    if (Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && pidAlive(pid)) continue;
    fs.rmSync(path.join(dir, name), { force: true });
    removed.push(name);
  }
  return removed;
}
