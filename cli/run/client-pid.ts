// Which of CMD's descendants opened a proxy connection, for the approval
// card (SPEC §11: reported by `postern run`, not checked by the kernel).
// The client's end of the loopback connection is a socket inode in
// /proc/net/tcp{,6}; the process holding it has a /proc/<pid>/fd link to
// `socket:[inode]`. Every read may fail (processes come and go): the answer
// is then "unknown".
//
// Reading /proc/net/tcp walks every bucket of the kernel's table of
// connections, however few it lists: ≈5 ms on a 24 GiB machine (262,144
// buckets), more on a larger one. So one read of a table serves every
// connection accepted before it began: a client opening sixteen
// connections at once costs one or two reads, not sixteen. (Read through
// node's thread pool instead, a lookup took 1–2 ms longer: the relay stays
// synchronous.)
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { endianness } from 'node:os';

interface Row {
  // As the table prints them: address and port in hex ("0100007F:1F90").
  local: string;
  remote: string;
  // Connected, in any state a client's socket may be in while its request
  // is read: established, or half-closed after sending it (FIN_WAIT1/2,
  // CLOSING). Not a listener; a socket with no owner has inode 0.
  connected: boolean;
  inode: string;
}

const CONNECTED_STATES = new Set(['01', '04', '05', '08', '09', '0B']);

function parseTable(text: string): Row[] {
  const rows: Row[] = [];
  for (const line of text.split('\n').slice(1)) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    rows.push({
      local: f[1]!.toUpperCase(),
      remote: f[2]!.toUpperCase(),
      connected: CONNECTED_STATES.has(f[3]!),
      inode: f[9]!,
    });
  }
  return rows;
}

// One table's reads: a lookup is answered by the last read when that read
// began after the lookup's connection was accepted, else by a new one.
class Table {
  private last: { covers: number; rows: Row[] } | null = null;
  reads = 0;
  constructor(private readonly file: string) {}

  rows(ticket: number, latest: number): Row[] {
    if (this.last && this.last.covers >= ticket) return this.last.rows;
    this.reads++;
    let rows: Row[] = [];
    try {
      rows = parseTable(readFileSync(this.file, 'utf8'));
    } catch (e) {
      // Out of descriptors says nothing of the connection: the caller says so.
      if (outOfDescriptors(e)) throw e;
      // otherwise unreadable: no rows, the answer is "unknown"
    }
    this.last = { covers: latest, rows };
    return rows;
  }
}

// The socket tables of one `postern run`. `accepted()` is called as each
// connection is accepted, before anything else is awaited; its ticket then
// names which reads may answer for it.
export class SocketTables {
  private count = 0;
  private readonly tables = [new Table('/proc/net/tcp'), new Table('/proc/net/tcp6')];

  accepted(): number {
    return ++this.count;
  }

  // The inode of the connected socket at the client's end of `c`: local
  // address and port the client's, remote the listener's, in either table
  // (an IPv6 socket connected to 127.0.0.1 shows the IPv4-mapped form). All
  // four: a port alone is matched by another program connecting from
  // another loopback address (127.0.0.2) with the same port number.
  clientSocketInode(ticket: number, c: Connection): string | null {
    const tuples = tableForms(c);
    if (tuples === null) return null;
    for (const [i, table] of this.tables.entries()) {
      const { local, remote } = tuples[i]!;
      const row = table
        .rows(ticket, this.count)
        .find((r) => r.local === local && r.remote === remote && r.connected && r.inode !== '0');
      if (row) return row.inode;
    }
    return null;
  }

  // How many times each table was read (for tests).
  reads(): number[] {
    return this.tables.map((t) => t.reads);
  }
}

// A relayed connection as the listener sees it: the client's address and
// port, and the listener's.
export interface Connection {
  clientAddress: string;
  clientPort: number;
  serverAddress: string;
  serverPort: number;
}

// An IPv4 address as /proc/net/tcp prints it: the 32-bit word in the
// machine's byte order, in hex.
function ipv4Word(address: string): string {
  const bytes = address.split('.').map(Number);
  if (endianness() === 'LE') bytes.reverse();
  return bytes
    .map((b) => b.toString(16).padStart(2, '0'))
    .join('')
    .toUpperCase();
}

function hexPort(port: number): string {
  return port.toString(16).padStart(4, '0').toUpperCase();
}

// The client's end of `c` as each table prints it: /proc/net/tcp, then
// /proc/net/tcp6 (IPv4-mapped, ::ffff:a.b.c.d, word by word). Null when
// the addresses are not IPv4 (the listener is on 127.0.0.1).
function tableForms(c: Connection): { local: string; remote: string }[] | null {
  const client = c.clientAddress.replace(/^::ffff:/i, '');
  const server = c.serverAddress.replace(/^::ffff:/i, '');
  if (!isIPv4(client) || !isIPv4(server)) return null;
  const mapped = `0000000000000000${endianness() === 'LE' ? 'FFFF0000' : '0000FFFF'}`;
  const form = (prefix: string) => ({
    local: `${prefix}${ipv4Word(client)}:${hexPort(c.clientPort)}`,
    remote: `${prefix}${ipv4Word(server)}:${hexPort(c.serverPort)}`,
  });
  return [form(''), form(mapped)];
}

// EMFILE or ENFILE: the process (or the system) has no descriptor left.
export function outOfDescriptors(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return code === 'EMFILE' || code === 'ENFILE';
}

// A process's parent and start time (clock ticks since boot, as text), from
// /proc/<pid>/stat; null when it is gone.
function statOf(pid: number): { ppid: number; start: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold anything: count after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    // Field 22 of the line: the 20th after the command name.
    const start = fields[19] ?? '';
    return Number.isInteger(ppid) && /^\d+$/.test(start) ? { ppid, start } : null;
  } catch {
    return null;
  }
}

function parentOf(pid: number): number | null {
  return statOf(pid)?.ppid ?? null;
}

// The process `pid` as first seen: a pid alone could be another process's
// later.
export interface Holder {
  pid: number;
  start: string;
}

export function holderOf(pid: number): Holder | null {
  const s = statOf(pid);
  return s ? { pid, start: s.start } : null;
}

const MAX_DEPTH = 64;

// Whether `holder` is still the process first seen and still below `root`:
// a process that leaves CMD's tree (its parent exited, it was reparented to
// init or a subreaper) is no longer CMD's, whatever it connected as.
export function stillInTree(holder: Holder, root: number): boolean {
  if (holder.pid === root) return true;
  const first = statOf(holder.pid);
  if (!first || first.start !== holder.start) return false;
  let pid = first.ppid;
  for (let depth = 0; depth < MAX_DEPTH && pid > 1; depth++) {
    if (pid === root) return true;
    const up = parentOf(pid);
    if (up === null) return false;
    pid = up;
  }
  return false;
}

// `root` and every process below it, parents before children. Throws when
// /proc cannot be listed (out of descriptors).
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const ppid = parentOf(Number(name));
    if (ppid !== null) children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]!) ?? []));
  return out;
}

function holds(pid: number, link: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === link;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

// The pid that opened the connection, as text, or "unknown". A socket
// inherited across fork is held by parent and child; the deepest holder is
// the one that uses it. Throws when out of descriptors (outOfDescriptors):
// then nothing can be said of the connection.
export function connectionClient(tables: SocketTables, ticket: number, root: number | null, c: Connection): string {
  if (root === null) return 'unknown';
  const inode = tables.clientSocketInode(ticket, c);
  if (inode === null) return 'unknown';
  const link = `socket:[${inode}]`;
  const holders = descendants(root).filter((pid) => holds(pid, link));
  return holders.length ? String(holders[holders.length - 1]) : 'unknown';
}
