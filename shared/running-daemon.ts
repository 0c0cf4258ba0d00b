// Whether a daemon runs for a home, and its pid, found without its sockets:
// the daemon holds an abstract-namespace socket named after its home as its
// one-daemon-per-home lock (the kernel releases it when the process dies),
// and the kernel names the process that listens on it. `postern daemon`,
// `status` and `doctor` all ask here, so they agree even when the socket
// files were deleted under a running daemon.
import net from 'node:net';
import { createHash } from 'node:crypto';
import { peerCredOfSocket } from './native';

export function homeLockName(home: string): string {
  return '\0postern-home-' + createHash('sha256').update(home).digest('hex').slice(0, 32);
}

export interface RunningDaemon {
  // null when the kernel names no process (a daemon in another pid namespace).
  pid: number | null;
  uid: number | null;
}

// null: no daemon runs for this home.
export function findRunningDaemon(home: string): Promise<RunningDaemon | null> {
  return new Promise((resolve) => {
    const sock = net.connect(homeLockName(home));
    sock.once('error', () => resolve(null));
    sock.once('connect', () => {
      let found: RunningDaemon = { pid: null, uid: null };
      try {
        const cred = peerCredOfSocket(sock);
        found = { pid: cred.pid, uid: cred.uid };
      } catch {
        // running, but not identifiable from here
      }
      sock.destroy();
      resolve(found);
    });
  });
}

// "pid 123" (and its uid when it is not ours), for messages.
export function describeDaemon(d: RunningDaemon): string {
  const pid = d.pid === null ? 'pid unknown: it runs in another pid namespace' : `pid ${d.pid}`;
  const uid = d.uid !== null && d.uid !== process.getuid?.() ? `, uid ${d.uid}` : '';
  return `${pid}${uid}`;
}

// What to do about a daemon whose sockets are gone.
export function restartAdvice(d: RunningDaemon): string {
  const stop = d.pid === null ? 'stop it' : `stop pid ${d.pid} (\`kill ${d.pid}\`)`;
  return `restart it: ${stop}, then run \`postern daemon\``;
}
