// The Linux /proc files identity is read from, one function each; every
// read answers null (or 'denied') instead of throwing, since the process may
// exit between any two of them. Nothing here decides anything: the rules
// (instances, ancestry, what a card shows) are in daemon/identity/.
import { closeSync, openSync, readFileSync, readSync, readlinkSync, statSync } from 'node:fs';

export interface Stat {
  ppid: number;
  sid: number;
  startTime: string;
  // Field 48; "0" when the kernel hides it from this reader.
  argStart: string;
}

// /proc/<pid>/stat: the command name (field 2) is in parentheses and may
// contain anything, so the fields are counted after the LAST ')'.
// Only the four fields wanted are cut out (it is read twice a request; a
// split made some fifty strings each time).
export function parseStat(text: string): Stat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  // Field 3 (state) starts two characters after the ')'.
  const wanted: (string | undefined)[] = [];
  let start = close + 2;
  for (let field = 3; field <= 48 && start <= text.length; field++) {
    let end = text.indexOf(' ', start);
    if (end < 0) end = text.length;
    if (field === 4 || field === 6 || field === 22 || field === 48) wanted.push(text.slice(start, end));
    start = end + 1;
  }
  const [ppidText, sidText, startTime, argStartText] = wanted;
  const argStart = argStartText ?? '0';
  const digits = /^\d+$/;
  if (
    ppidText === undefined ||
    sidText === undefined ||
    startTime === undefined ||
    !digits.test(ppidText) ||
    !digits.test(sidText) ||
    !digits.test(startTime) ||
    !digits.test(argStart)
  )
    return null;
  return { ppid: Number(ppidText), sid: Number(sidText), startTime, argStart };
}

export function readStat(pid: number): Stat | null {
  const n = readIntoScratch(`/proc/${pid}/stat`);
  // Latin-1: one character per byte, whatever the command name holds.
  return n === null ? null : parseStat(scratch.toString('latin1', 0, n));
}

// null: gone or unreadable; 'denied': the process exists but this reader
// lacks ptrace rights over it.
export function exeIdentity(pid: number): { dev: number; ino: number } | 'denied' | null {
  try {
    const st = statSync(`/proc/${pid}/exe`);
    return { dev: st.dev, ino: st.ino };
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EACCES' ? 'denied' : null;
  }
}

// The size of the code segment, readable by anyone: "VmExe: 772 kB".
export function vmExe(pid: number): string | null {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('VmExe:'));
    const m = line?.match(/^VmExe:\s+(\d+)/);
    return m ? m[1]! : '0';
  } catch {
    return null;
  }
}

export function readCmdline(pid: number): Buffer | null {
  const n = readIntoScratch(`/proc/${pid}/cmdline`);
  return n === null ? null : Buffer.from(scratch.subarray(0, n));
}

// A process's stat and cmdline, opened once and read again through the same
// descriptors. A descriptor of /proc/<pid>/ stays bound to the process it
// was opened for: once that process is gone every read fails (ESRCH), even
// when its pid has been given to another, and after an exec it reads what
// the process runs now. A read costs one pread instead of open, read, close.
//
// `mm` is /proc/<pid>/pagemap, which is bound more tightly: to the address
// space of the program the process ran when it was opened. Once that
// program exec'd (or exited) it reads nothing, even when the new program
// is the same file with the same command line at the same addresses (an
// exec with address randomisation off, which the instance key cannot tell
// apart). Opening it asks for the same rights as reading the process's
// memory map (its own uid, or root); null when refused.
export interface ProcFiles {
  stat: number;
  cmdline: number;
  mm: number | null;
}

export function openProcFiles(pid: number): ProcFiles | null {
  let stat: number;
  try {
    stat = openSync(`/proc/${pid}/stat`, 'r');
  } catch {
    return null;
  }
  let cmdline: number;
  try {
    cmdline = openSync(`/proc/${pid}/cmdline`, 'r');
  } catch {
    closeSync(stat);
    return null;
  }
  let mm: number | null = null;
  try {
    mm = openSync(`/proc/${pid}/pagemap`, 'r');
  } catch {
    // another uid's process: its program is told apart by the key alone
  }
  return { stat, cmdline, mm };
}

export function closeProcFiles(f: ProcFiles): void {
  closeSync(f.stat);
  closeSync(f.cmdline);
  if (f.mm !== null) closeSync(f.mm);
}

const entry = Buffer.alloc(8);

// Whether the program that ran when `f` was opened still runs (no exec, no
// exit since): its address space still answers, with the entry of page 0.
// null when not known (no `mm` descriptor).
export function sameProgram(f: ProcFiles): boolean | null {
  if (f.mm === null) return null;
  try {
    return readSync(f.mm, entry, 0, 8, 0) === 8;
  } catch {
    return false;
  }
}

export function readStatFrom(f: ProcFiles): Stat | null {
  const n = readFdIntoScratch(f.stat);
  return n === null ? null : parseStat(scratch.toString('latin1', 0, n));
}

export function readCmdlineFrom(f: ProcFiles): Buffer | null {
  const n = readFdIntoScratch(f.cmdline);
  return n === null ? null : Buffer.from(scratch.subarray(0, n));
}

// readFileSync of a /proc file (size 0) reads into a fresh 64 KiB buffer
// each time; stat and cmdline are read on every request (liveness), so one
// scratch buffer serves every read, and each caller copies or decodes what
// it needs before the next. The byte count read; null when the file cannot
// be opened or read (the process is gone). Only for files that end where a
// read comes short.
let scratch = Buffer.allocUnsafe(4096);

function readIntoScratch(file: string): number | null {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return null;
  }
  try {
    return readFdIntoScratch(fd);
  } finally {
    closeSync(fd);
  }
}

// The whole file from its start (positional reads: a held descriptor needs
// no seek).
function readFdIntoScratch(fd: number): number | null {
  try {
    // A long command line read earlier does not keep its buffer.
    if (scratch.length > 65536) scratch = Buffer.allocUnsafe(4096);
    let n = 0;
    for (;;) {
      if (n === scratch.length) {
        const bigger = Buffer.allocUnsafe(scratch.length * 2);
        scratch.copy(bigger, 0, 0, n);
        scratch = bigger;
      }
      const room = scratch.length - n;
      const got = readSync(fd, scratch, n, room, n);
      n += got;
      // stat (one seq_file record) and cmdline (copied page by page until
      // the request is filled) return less than asked only at their end:
      // no second read to see 0.
      if (got < room) return n;
    }
  } catch {
    return null;
  }
}

export function mountNs(pid: number | 'self'): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return null;
  }
}

export function readExeAndCwd(pid: number): { exe: string; cwd: string } | null {
  try {
    return { exe: readlinkSync(`/proc/${pid}/exe`), cwd: readlinkSync(`/proc/${pid}/cwd`) };
  } catch {
    return null;
  }
}

// Is `path`, looked up by the daemon, the file with this device and inode?
export function sameFile(path: string, id: { dev: number; ino: number }): boolean {
  try {
    const st = statSync(path);
    return st.dev === id.dev && st.ino === id.ino;
  } catch {
    return false;
  }
}

// The real uid, from /proc/<pid>/status.
export function uidOf(pid: number): number | null {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Uid:'));
    const real = line ? Number(line.split(/\s+/)[1]) : NaN;
    return Number.isInteger(real) ? real : null;
  } catch {
    return null;
  }
}
