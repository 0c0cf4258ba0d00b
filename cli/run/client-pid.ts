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

interface Row {
  localPort: number;
  remotePort: number;
  // Connected, in any state a client's socket may be in while its request
  // is read: established, or half-closed after sending it (FIN_WAIT1/2,
  // CLOSING). Not a listener; a socket with no owner has inode 0.
  connected: boolean;
  inode: string;
}

const CONNECTED_STATES = new Set(['01', '04', '05', '08', '09', '0B']);

function parseTable(text: string): Row[] {
  const rows: Row[] = [];
  const port = (address: string): number => parseInt(address.split(':')[1] ?? '', 16);
  for (const line of text.split('\n').slice(1)) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    rows.push({
      localPort: port(f[1]!),
      remotePort: port(f[2]!),
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
    } catch {
      // unreadable: no rows, the answer is "unknown"
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

  // The inode of the connected socket whose local port is `clientPort`
  // and whose remote port is `serverPort`, in either table.
  clientSocketInode(ticket: number, clientPort: number, serverPort: number): string | null {
    for (const table of this.tables) {
      const row = table
        .rows(ticket, this.count)
        .find((r) => r.localPort === clientPort && r.remotePort === serverPort && r.connected && r.inode !== '0');
      if (row) return row.inode;
    }
    return null;
  }

  // How many times each table was read (for tests).
  reads(): number[] {
    return this.tables.map((t) => t.reads);
  }
}

function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold anything: count after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : null;
  } catch {
    return null;
  }
}

// `root` and every process below it, parents before children.
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
// the one that uses it.
export function connectionClient(
  tables: SocketTables,
  ticket: number,
  root: number | null,
  clientPort: number,
  serverPort: number,
): string {
  if (root === null) return 'unknown';
  const inode = tables.clientSocketInode(ticket, clientPort, serverPort);
  if (inode === null) return 'unknown';
  const link = `socket:[${inode}]`;
  const holders = descendants(root).filter((pid) => holds(pid, link));
  return holders.length ? String(holders[holders.length - 1]) : 'unknown';
}
