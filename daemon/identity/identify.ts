// Who is asking (SPEC §7): the kernel's peer credentials of the connection,
// then /proc for the process *instance* and what a human needs on an
// approval card (executable path, command line, working directory, parent
// chain). The instance is the pid, its start time, the executable's device
// and inode, and two things every exec changes even when it runs the same
// interpreter again: where the new argument block starts in memory
// (arg_start, randomised per exec) and the command line itself; and, since
// an exec with randomisation off keeps both, the process's address space,
// held from before it is read (proc.ts, sameProgram). An instance is
// checked again at decision time, so a reused pid or an exec never
// inherits an approval. Facts that change while a process runs (parent,
// working directory, a deleted executable) are read again for a card.
//
// A non-root daemon may not read another uid's /proc/<pid>/exe or cwd (nor
// stat the executable through it): Linux asks for ptrace rights. Such a
// process (the dedicated-user deployment) is identified by what any user
// may read: uid, pid, start time, parent chain and command line; its exe
// and cwd are shown as NOT_READABLE, and its instance key is made of the
// pid, the start time, the command line's hash and the size of its code
// segment (VmExe, in /proc/<pid>/status), which an exec of another program
// usually changes (docs/design-notes.md, *Identity of another uid's
// process*). For the daemon's own uid an unreadable exe stays
// unidentified_peer.
//
// Two cases where the path shown may not be the program that runs are
// marked on the exe itself, so every card, journal entry and session list
// says so: a process in a mount namespace other than the daemon's, and an
// executable whose path, looked up by the daemon, is another file (device
// and inode) than the one the process runs (a bind mount over /usr/bin/git
// in the agent's own namespace).
import {
  closeProcFiles,
  exeIdentity,
  mountNs,
  openProcFiles,
  readCmdline,
  readCmdlineFrom,
  readExeAndCwd,
  readStat,
  readStatFrom,
  sameFile,
  sameProgram,
  uidOf,
  vmExe,
} from '../platform/proc';
import type { ProcFiles, Stat } from '../platform/proc';
import { Refusal } from '../../shared/errors';
import { sha256hex } from '../../shared/crypto';
import { EXE_MISMATCH_NOTE, NOT_READABLE, OTHER_MOUNT_NS_NOTE } from '../../shared/admin-protocol';

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
  // false: exe and cwd could not be read (another uid's process); exe and
  // cwd then hold NOT_READABLE and exeDev/exeIno are -1.
  readable: boolean;
  // Runs in a mount namespace other than the daemon's.
  otherMountNs: boolean;
  // The exe path, looked up by the daemon, is not the file the process runs.
  exePathMismatch: boolean;
}

export interface Identity {
  process: ProcessInfo;
  // Ancestors from the parent upwards, stopping below the session leader (or
  // at pid 1): the processes a session may be rooted at, besides itself.
  ancestors: ProcessInfo[];
}

const OWN_UID = process.getuid?.() ?? -1;

function argvHash(cmdline: Buffer): string {
  return sha256hex(cmdline).slice(0, 16);
}

function instanceKey(pid: number, stat: Stat, exeId: { dev: number; ino: number }, cmdline: Buffer): string {
  return `${pid}:${stat.startTime}:${exeId.dev}:${exeId.ino}:${stat.argStart}:${argvHash(cmdline)}`;
}

// Without ptrace rights: what any user may read (arg_start reads as 0).
function partialKey(pid: number, stat: Stat, code: string, cmdline: Buffer): string {
  return `${pid}:${stat.startTime}:-:-:vmexe=${code}:${argvHash(cmdline)}`;
}

interface Instance {
  stat: Stat;
  exeId: { dev: number; ino: number } | null; // null: not readable
  raw: Buffer;
  key: string;
}

// The instance now running under `pid`, and its facts that identify it.
// `uid`: the owner; another uid's process without ptrace rights is read
// partially, the daemon's own never. With `files` (held for that process),
// stat and cmdline are read through them: the exe, read by pid between the
// two, is then of the same process, since its pid cannot pass to another
// while the later read still finds it.
function readInstance(pid: number, uid: number, files?: ProcFiles): Instance | null {
  const stat = files ? readStatFrom(files) : readStat(pid);
  const exeId = exeIdentity(pid);
  const raw = files ? readCmdlineFrom(files) : readCmdline(pid);
  if (!stat || !exeId || !raw) return null;
  if (exeId !== 'denied') return { stat, exeId, raw, key: instanceKey(pid, stat, exeId, raw) };
  if (uid === OWN_UID) return null;
  const code = vmExe(pid);
  if (code === null) return null;
  return { stat, exeId: null, raw, key: partialKey(pid, stat, code, raw) };
}

const OWN_MOUNT_NS = mountNs('self');

interface Changing {
  exe: string;
  cwd: string;
  otherMountNs: boolean;
  exePathMismatch: boolean;
}

// What may change while the instance runs: read on every request.
function readChanging(pid: number, exeId: { dev: number; ino: number }): Changing | null {
  const paths = readExeAndCwd(pid);
  if (!paths) return null;
  const { exe, cwd } = paths;
  const ns = mountNs(pid);
  const otherMountNs = ns === null || OWN_MOUNT_NS === null || ns !== OWN_MOUNT_NS;
  // A deleted or memfd executable is marked as such already.
  const special = exe.endsWith(' (deleted)') || exe.startsWith('/memfd:');
  const exePathMismatch = !special && !sameFile(exe, exeId);
  return { exe, cwd, otherMountNs, exePathMismatch };
}

// The stat read first and the instance read again now must agree, or the
// pid changed hands (or exec'd) while we were reading.
function sameInstance(pid: number, uid: number, key: string, files?: ProcFiles): boolean {
  return readInstance(pid, uid, files)?.key === key && (!files || sameProgram(files) !== false);
}

// The exe as shown: the kernel's path, with the daemon's notes appended
// when the path may not be the program that runs.
function shownExe(now: Changing): string {
  return [now.exe, now.otherMountNs ? OTHER_MOUNT_NS_NOTE : '', now.exePathMismatch ? EXE_MISMATCH_NOTE : '']
    .filter(Boolean)
    .join('  ');
}

// Read one process; null when it is gone or unreadable. With `files` (just
// opened for it), what is read is the program they are bound to.
export function readProcess(pid: number, uid: number, files?: ProcFiles): ProcessInfo | null {
  const inst = readInstance(pid, uid, files);
  if (!inst) return null;
  const now = inst.exeId ? readChanging(pid, inst.exeId) : null;
  if ((inst.exeId && !now) || !sameInstance(pid, uid, inst.key, files)) return null;
  const { stat, exeId, raw, key } = inst;
  const cmdline = raw.length === 0 ? [] : raw.toString('utf8').replace(/\0$/, '').split('\0');
  const base = { pid, ppid: stat.ppid, sid: stat.sid, uid, startTime: stat.startTime, cmdline, key };
  if (!exeId || !now) {
    return {
      ...base,
      exeDev: -1,
      exeIno: -1,
      exe: NOT_READABLE,
      exeDeleted: false,
      exeMemfd: false,
      cwd: NOT_READABLE,
      readable: false,
      otherMountNs: false,
      exePathMismatch: false,
    };
  }
  return {
    ...base,
    exeDev: exeId.dev,
    exeIno: exeId.ino,
    exe: shownExe(now),
    exeDeleted: now.exe.endsWith(' (deleted)'),
    exeMemfd: now.exe.startsWith('/memfd:'),
    cwd: now.cwd,
    readable: true,
    otherMountNs: now.otherMountNs,
    exePathMismatch: now.exePathMismatch,
  };
}

// The /proc files of instances checked before, kept open while the
// instance is the one they read (proc.ts, ProcFiles): liveness is checked
// on every request, for the connection's process and the session's root.
// A connecting process's files are opened before it is read, so they are
// bound to the program that was read (an approver's card holds those of
// every process it shows); others are opened at their first check. An
// instance found gone or exec'd closes them. Bounded: beyond the limit the
// oldest are closed (and opened again, by pid, when needed).
const held = new Map<string, ProcFiles>();
// The key held for each pid (at most one: a pid runs one instance at a time).
const heldByPid = new Map<number, string>();
let heldLimit = 128;

function pidOfKey(key: string): number {
  return Number(key.slice(0, key.indexOf(':')));
}

function release(key: string, files: ProcFiles): void {
  held.delete(key);
  if (heldByPid.get(pidOfKey(key)) === key) heldByPid.delete(pidOfKey(key));
  closeProcFiles(files);
}

// Set once at start from the descriptor budget (connection-budget.ts).
export function limitHeldProcesses(n: number): void {
  heldLimit = n;
}

// Keys whose program was replaced by an exec that kept the key (the same
// file, command line and addresses: randomisation off). Such a key names
// two programs, so it names neither: refused from then on. Bounded; a key
// matters only while its process lives.
const replaced = new Set<string>();
const REPLACED_LIMIT = 4096;

function hold(key: string, files: ProcFiles): void {
  if (held.size >= heldLimit) {
    const [oldest, f] = held.entries().next().value as [string, ProcFiles];
    release(oldest, f);
  }
  // An earlier instance under the same pid is gone: its files read nothing.
  const pid = pidOfKey(key);
  const earlier = heldByPid.get(pid);
  if (earlier !== undefined && earlier !== key) release(earlier, held.get(earlier)!);
  held.set(key, files);
  heldByPid.set(pid, key);
}

function retire(key: string, files: ProcFiles): void {
  release(key, files);
  // Gone or exec'd: the key can come back only after an exec that kept it.
  if (replaced.size >= REPLACED_LIMIT) replaced.delete(replaced.values().next().value as string);
  replaced.add(key);
}

// Is this instance still the process now running under its pid?
export function stillRunning(p: ProcessInfo): boolean {
  if (replaced.has(p.key)) return false;
  const kept = held.get(p.key);
  const files = kept ?? openProcFiles(p.pid);
  if (!files) return false;
  if (sameProgram(files) !== false && readInstance(p.pid, p.uid, files)?.key === p.key) {
    if (!kept) hold(p.key, files);
    return true;
  }
  if (kept) retire(p.key, files);
  else closeProcFiles(files);
  return false;
}

// `p`, just read through `files`: its files held, unless its key is held
// already for the same program. Null when the key's program was replaced
// by an exec that kept the key.
function bind(p: ProcessInfo, files: ProcFiles): ProcessInfo | null {
  if (replaced.has(p.key)) {
    closeProcFiles(files);
    return null;
  }
  const kept = held.get(p.key);
  if (!kept) {
    hold(p.key, files);
    return p;
  }
  closeProcFiles(files);
  if (sameProgram(kept) !== false) return p;
  retire(p.key, kept);
  return null;
}

// Read one process through files opened first and then held (see bind).
// When files are held for the instance now under `pid` (a process that
// connects again), they are read instead: still answering for the program
// they were opened on, with the same key, they are bound to what was read.
function readBound(pid: number, uid: number): ProcessInfo | 'replaced' | null {
  const heldKey = heldByPid.get(pid);
  if (heldKey !== undefined && !replaced.has(heldKey)) {
    const p = readProcess(pid, uid, held.get(heldKey)!);
    if (p?.key === heldKey) return p;
  }
  const files = openProcFiles(pid);
  if (!files) return null;
  const p = readProcess(pid, uid, files);
  if (!p) {
    closeProcFiles(files);
    return null;
  }
  return bind(p, files) ?? 'replaced';
}

// The number of instances whose /proc files are held (for tests).
export function heldProcFiles(): number {
  return held.size;
}

const MAX_CHAIN = 64;

// Identity of the peer `pid` with `uid` from SO_PEERCRED, read afresh: a
// cache would have to re-read every fact that makes up an instance anyway.
// The process's /proc files are held from before it is read (see hold);
// `holdChain`: its ancestors' too (for a card, whose choice of root a
// session keeps).
export function identify(pid: number, uid: number, holdChain = false): Identity {
  const self = readBound(pid, uid);
  if (self === 'replaced')
    throw new Refusal(
      'unidentified_peer',
      `the connecting process (pid ${pid}) exec'd the program it ran, with the same command line at the same addresses (address randomisation off), so postern cannot tell it from the program it was; start the program afresh, as a new process`,
    );
  if (!self)
    throw new Refusal(
      'unidentified_peer',
      `the connecting process (pid ${pid}) could not be identified from /proc: it may have exited (retry from a running process), or /proc hides it from the daemon's user (hidepid; see docs/operations.md)`,
    );
  const ancestors: ProcessInfo[] = [];
  let cur = self;
  while (ancestors.length < MAX_CHAIN && cur.ppid > 1 && cur.ppid !== cur.sid && cur.pid !== cur.sid) {
    const parentUid = uidOf(cur.ppid);
    if (parentUid === null) break;
    const read = holdChain ? readBound(cur.ppid, parentUid) : readProcess(cur.ppid, parentUid);
    if (read === 'replaced' || !read) break;
    const parent = read;
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
