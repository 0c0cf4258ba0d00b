// Creating the daemon's listening sockets safely: one daemon per home (an
// abstract-namespace socket works as a lock the kernel releases when the
// process dies, so there is no stale lock file to clean up), stale socket
// files removed, live ones never stolen, modes set before anyone connects.
import net from 'node:net';
import { chmodSync, chownSync, lstatSync, unlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { userInfo } from 'node:os';
import { Refusal } from '../shared/errors';
import { describeDaemon, findRunningDaemon, homeLockName, restartAdvice } from '../shared/running-daemon';

// `bornMode`: the permission bits the socket file gets at bind(2). For a path,
// Node binds and listens synchronously inside server.listen(), so a umask set
// around that call decides the mode the socket has from its first connection
// on. The umask is the process's, so it is restored at once: no JavaScript
// runs in between, and at start-up nothing else is creating files.
// Connections waiting to be accepted (the kernel caps it at somaxconn):
// Node's default of 511 makes a burst of agent connections fail with
// EAGAIN while the daemon is busy for a moment.
const BACKLOG = 4096;

function listen(server: net.Server, path: string, bornMode?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error): void => reject(e);
    server.once('error', onError);
    const previous = bornMode === undefined ? null : process.umask(~bornMode & 0o777);
    try {
      server.listen({ path, backlog: BACKLOG }, () => {
        server.off('error', onError);
        resolve();
      });
    } finally {
      if (previous !== null) process.umask(previous);
    }
  });
}

export async function claimHome(home: string): Promise<net.Server> {
  const server = net.createServer((c) => c.destroy());
  try {
    await listen(server, homeLockName(home));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      const other = (await findRunningDaemon(home)) ?? { pid: null, uid: null };
      throw new Refusal(
        'conflict',
        `another postern daemon (${describeDaemon(other)}) is already running for ${home}; use it (\`postern status\`), or, if its sockets are gone, ${restartAdvice(other)}`,
      );
    }
    throw e;
  }
  server.unref();
  return server;
}

function canConnect(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

// Remove a socket file left by a daemon that died, after making sure nothing
// answers on it; refuse to touch anything that is not a socket.
async function clearStale(path: string): Promise<void> {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  if (!st.isSocket())
    throw new Refusal(
      'conflict',
      `${path} exists and is not a socket; move it away or choose another socket path in the config`,
    );
  if (await canConnect(path))
    throw new Refusal('conflict', `a live process is listening on ${path}; stop that daemon first`);
  unlinkSync(path);
}

// The socket is never connectable under a mode wider than `mode`: it is
// born with `mode` itself or, when its group must change first, with the
// owner's bits only until the group is set. chown/chmod afterwards repeat
// the final state whatever the umask did.
export async function listenUnix(server: net.Server, path: string, mode: number, group?: string): Promise<void> {
  const gid = group ? groupId(group) : undefined;
  if (group && gid !== undefined) requireMember(group, gid);
  await clearStale(path);
  await listen(server, path, gid === undefined ? mode : mode & 0o700);
  if (group && gid !== undefined) {
    try {
      chownSync(path, -1, gid);
    } catch (e) {
      server.close();
      removeSocket(path);
      if ((e as NodeJS.ErrnoException).code === 'EPERM') throw notMember(group);
      throw e;
    }
  }
  chmodSync(path, mode);
}

function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return String(process.getuid?.() ?? 'USER');
  }
}

function notMember(group: string): Refusal {
  const user = userName();
  return new Refusal(
    'bad_config',
    `daemon.agent_socket_group: the daemon's user ${user} is not a member of group "${group}", so it cannot give the agent socket to that group; as root run \`usermod -aG ${group} ${user}\`, then start the daemon again (from a new login or service start, so the membership applies)`,
  );
}

// chown(2) of a file to a group needs the owner to be in that group (root
// excepted): refuse at start, naming the fix, rather than fail at chown.
function requireMember(group: string, gid: number): void {
  if (process.getuid?.() === 0) return;
  if (process.getgid?.() === gid || (process.getgroups?.() ?? []).includes(gid)) return;
  throw notMember(group);
}

function groupId(group: string): number {
  if (/^\d+$/.test(group)) return Number(group);
  try {
    const line = execFileSync('getent', ['group', group], { encoding: 'utf8' }).trim();
    const gid = Number(line.split(':')[2]);
    if (Number.isInteger(gid)) return gid;
  } catch {
    // fall through to the refusal
  }
  throw new Refusal('bad_config', `daemon.agent_socket_group: no group named "${group}"; create it or fix the config`);
}

export function removeSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    // already gone
  }
}
