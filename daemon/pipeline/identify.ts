// Who is asking (SPEC §7): the kernel's peer credentials of the connection,
// then /proc for the process *instance* (pid, start time, executable device
// and inode) and what a human needs on an approval card (executable path,
// command line, working directory, parent chain). Identity is cached per
// instance, and an instance is checked again at decision time, so a reused
// pid or an exec of another program never inherits an approval.
import { readFileSync, readlinkSync, statSync } from 'node:fs';
import { Refusal } from '../../shared/errors';

export interface ProcessInfo {
  pid: number;
  ppid: number;
  sid: number;
  uid: number;
  startTime: string; // clock ticks since boot, as text (can exceed 2^53 in theory)
  exeDev: number;
  exeIno: number;
  exe: string; // readlink of /proc/<pid>/exe, as the kernel prints it
  exeDeleted: boolean;
  exeMemfd: boolean;
  cmdline: string[];
  cwd: string;
  key: string; // the instance: pid, start time, exe device and inode
}

export interface Identity {
  process: ProcessInfo;
  // Ancestors from the parent upwards, stopping below the session leader (or
  // at pid 1): the processes a session may be rooted at, besides itself.
  ancestors: ProcessInfo[];
}

interface Stat {
  ppid: number;
  sid: number;
  startTime: string;
}

// /proc/<pid>/stat: the command name (field 2) is in parentheses and may
// contain anything, so the fields are counted after the LAST ')'.
export function parseStat(text: string): Stat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const rest = text.slice(close + 2).split(' ');
  // rest[0] is field 3 (state); field N is rest[N - 3].
  const ppid = Number(rest[1]);
  const sid = Number(rest[3]);
  const startTime = rest[19];
  if (!Number.isInteger(ppid) || !Number.isInteger(sid) || !startTime || !/^\d+$/.test(startTime)) return null;
  return { ppid, sid, startTime };
}

function readStat(pid: number): Stat | null {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

function exeIdentity(pid: number): { dev: number; ino: number } | null {
  try {
    const st = statSync(`/proc/${pid}/exe`);
    return { dev: st.dev, ino: st.ino };
  } catch {
    return null;
  }
}

function instanceKey(pid: number, startTime: string, dev: number, ino: number): string {
  return `${pid}:${startTime}:${dev}:${ino}`;
}

// Read one process; null when it is gone or unreadable.
export function readProcess(pid: number, uid: number): ProcessInfo | null {
  const stat = readStat(pid);
  const exeId = exeIdentity(pid);
  if (!stat || !exeId) return null;
  let exe: string;
  let cmdline: string[];
  let cwd: string;
  try {
    exe = readlinkSync(`/proc/${pid}/exe`);
    const raw = readFileSync(`/proc/${pid}/cmdline`);
    cmdline = raw.length === 0 ? [] : raw.toString('utf8').replace(/\0$/, '').split('\0');
    cwd = readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return null;
  }
  // The stat read first and the start time read again now must agree, or
  // the pid changed hands while we were reading.
  const again = readStat(pid);
  if (!again || again.startTime !== stat.startTime) return null;
  return {
    pid,
    ppid: stat.ppid,
    sid: stat.sid,
    uid,
    startTime: stat.startTime,
    exeDev: exeId.dev,
    exeIno: exeId.ino,
    exe,
    exeDeleted: exe.endsWith(' (deleted)'),
    exeMemfd: exe.startsWith('/memfd:'),
    cmdline,
    cwd,
    key: instanceKey(pid, stat.startTime, exeId.dev, exeId.ino),
  };
}

// Is this instance still the process now running under its pid?
export function stillRunning(p: ProcessInfo): boolean {
  const stat = readStat(p.pid);
  const exeId = exeIdentity(p.pid);
  return stat !== null && exeId !== null && instanceKey(p.pid, stat.startTime, exeId.dev, exeId.ino) === p.key;
}

function uidOf(pid: number): number | null {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('Uid:'));
    const real = line ? Number(line.split(/\s+/)[1]) : NaN;
    return Number.isInteger(real) ? real : null;
  } catch {
    return null;
  }
}

const MAX_CHAIN = 64;
const MAX_CACHE = 4096;

export class Identifier {
  private cache = new Map<string, ProcessInfo>();

  // Identity of the peer `pid` with `uid` from SO_PEERCRED.
  identify(pid: number, uid: number): Identity {
    const self = this.lookup(pid, uid);
    if (!self) throw new Refusal('unidentified_peer', `the connecting process (pid ${pid}) could not be identified from /proc; it may have exited — retry from a running process`);
    const ancestors: ProcessInfo[] = [];
    let cur = self;
    while (ancestors.length < MAX_CHAIN && cur.ppid > 1 && cur.ppid !== cur.sid && cur.pid !== cur.sid) {
      const parentUid = uidOf(cur.ppid);
      if (parentUid === null) break;
      const parent = this.lookup(cur.ppid, parentUid);
      if (!parent) break;
      // The session leader itself is not a root a session may take.
      if (parent.pid === parent.sid) break;
      ancestors.push(parent);
      cur = parent;
    }
    return { process: self, ancestors };
  }

  private lookup(pid: number, uid: number): ProcessInfo | null {
    const stat = readStat(pid);
    const exeId = exeIdentity(pid);
    if (!stat || !exeId) return null;
    const key = instanceKey(pid, stat.startTime, exeId.dev, exeId.ino);
    const hit = this.cache.get(key);
    if (hit) return hit;
    const info = readProcess(pid, uid);
    if (!info) return null;
    if (this.cache.size >= MAX_CACHE) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(info.key, info);
    return info;
  }

  forget(key: string): void {
    this.cache.delete(key);
  }
}
