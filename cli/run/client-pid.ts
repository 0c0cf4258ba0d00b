// Which of CMD's descendants opened a proxy connection, for the approval
// card (SPEC §11: reported by `postern run`, not checked by the kernel).
// The client's end of the loopback connection is a socket inode in
// /proc/net/tcp{,6}; the process holding it has a /proc/<pid>/fd link to
// `socket:[inode]`. Every read may fail (processes come and go): the answer
// is then "unknown".
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

// The inode of the socket whose local port is `clientPort` and whose remote
// port is `serverPort`, established (state 01), in either table.
export function clientSocketInode(clientPort: number, serverPort: number): string | null {
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (address: string): number => parseInt(address.split(':')[1] ?? '', 16);
      if (port(f[1]!) === clientPort && port(f[2]!) === serverPort && f[3] === '01' && f[9] !== '0') return f[9]!;
    }
  }
  return null;
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
export function connectionClient(root: number | null, clientPort: number, serverPort: number): string {
  if (root === null) return 'unknown';
  const inode = clientSocketInode(clientPort, serverPort);
  if (inode === null) return 'unknown';
  const link = `socket:[${inode}]`;
  const holders = descendants(root).filter((pid) => holds(pid, link));
  return holders.length ? String(holders[holders.length - 1]) : 'unknown';
}
