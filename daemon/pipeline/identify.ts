// Who is asking (SPEC §7): the kernel's peer credentials of the connection,
// then /proc for the process *instance* and what a human needs on an
// approval card (executable path, command line, working directory, parent
// chain). The instance is the pid, its start time, the executable's device
// and inode, and two things every exec changes even when it runs the same
// interpreter again: where the new argument block starts in memory
// (arg_start, randomised per exec) and the command line itself. An instance
// is checked again at decision time, so a reused pid or an exec never
// inherits an approval. Facts that change while a process runs (parent,
// working directory, a deleted executable) are read on every request.
import { createHash } from 'node:crypto';
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
  key: string; // the instance: pid, start time, exe device and inode, arg_start, command line hash
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
  // Field 48; "0" when the kernel hides it from this reader.
  argStart: string;
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
  const argStart = rest[45] ?? '0';
  if (!Number.isInteger(ppid) || !Number.isInteger(sid) || !startTime || !/^\d+$/.test(startTime) || !/^\d+$/.test(argStart)) return null;
  return { ppid, sid, startTime, argStart };
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

function readCmdline(pid: number): Buffer | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`);
  } catch {
    return null;
  }
}

function instanceKey(pid: number, stat: Stat, exeId: { dev: number; ino: number }, cmdline: Buffer): string {
  const argv = createHash('sha256').update(cmdline).digest('hex').slice(0, 16);
  return `${pid}:${stat.startTime}:${exeId.dev}:${exeId.ino}:${stat.argStart}:${argv}`;
}

// The instance now running under `pid`, and its facts that identify it.
function readInstance(pid: number): { stat: Stat; exeId: { dev: number; ino: number }; raw: Buffer; key: string } | null {
  const stat = readStat(pid);
  const exeId = exeIdentity(pid);
  const raw = readCmdline(pid);
  if (!stat || !exeId || !raw) return null;
  return { stat, exeId, raw, key: instanceKey(pid, stat, exeId, raw) };
}

// What may change while the instance runs: read on every request.
function readChanging(pid: number): { exe: string; cwd: string } | null {
  try {
    return { exe: readlinkSync(`/proc/${pid}/exe`), cwd: readlinkSync(`/proc/${pid}/cwd`) };
  } catch {
    return null;
  }
}

// The stat read first and the instance read again now must agree, or the
// pid changed hands (or exec'd) while we were reading.
function sameInstance(pid: number, key: string): boolean {
  return readInstance(pid)?.key === key;
}

function withChanging(base: Omit<ProcessInfo, 'exe' | 'exeDeleted' | 'exeMemfd' | 'cwd'>, now: { exe: string; cwd: string }): ProcessInfo {
  return { ...base, exe: now.exe, exeDeleted: now.exe.endsWith(' (deleted)'), exeMemfd: now.exe.startsWith('/memfd:'), cwd: now.cwd };
}

// Read one process; null when it is gone or unreadable.
export function readProcess(pid: number, uid: number): ProcessInfo | null {
  const inst = readInstance(pid);
  const now = readChanging(pid);
  if (!inst || !now || !sameInstance(pid, inst.key)) return null;
  const { stat, exeId, raw, key } = inst;
  const cmdline = raw.length === 0 ? [] : raw.toString('utf8').replace(/\0$/, '').split('\0');
  return withChanging({ pid, ppid: stat.ppid, sid: stat.sid, uid, startTime: stat.startTime, exeDev: exeId.dev, exeIno: exeId.ino, cmdline, key }, now);
}

// Is this instance still the process now running under its pid?
export function stillRunning(p: ProcessInfo): boolean {
  return sameInstance(p.pid, p.key);
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

// Identity of the peer `pid` with `uid` from SO_PEERCRED, read afresh: a
// cache would have to re-read every fact that makes up an instance anyway.
export function identify(pid: number, uid: number): Identity {
  const self = readProcess(pid, uid);
  if (!self) throw new Refusal('unidentified_peer', `the connecting process (pid ${pid}) could not be identified from /proc; it may have exited — retry from a running process`);
  const ancestors: ProcessInfo[] = [];
  let cur = self;
  while (ancestors.length < MAX_CHAIN && cur.ppid > 1 && cur.ppid !== cur.sid && cur.pid !== cur.sid) {
    const parentUid = uidOf(cur.ppid);
    if (parentUid === null) break;
    const parent = readProcess(cur.ppid, parentUid);
    if (!parent) break;
    // A parent is never younger than its child: the pid was reused after
    // the real parent exited, and the chain ends here.
    if (BigInt(parent.startTime) > BigInt(cur.startTime)) break;
    // The session leader itself is not a root a session may take.
    if (parent.pid === parent.sid) break;
    ancestors.push(parent);
    cur = parent;
  }
  return { process: self, ancestors };
}
