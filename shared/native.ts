import * as fs from 'node:fs';
import * as path from 'node:path';
import type * as net from 'node:net';
import { Refusal } from './errors';

// The one door to native/peercred.c (SPEC §2). Everything platform-specific
// about peer identity and process hardening goes through here.

export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

export interface NativeAddon {
  peerCred(fd: number): PeerCred;
  setNonDumpable(): void;
  pidfdOpen(pid: number): number | null;
}

const ADDON_PATH = ['native', 'build', 'Release', 'postern_native.node'];

// Walk up from this file to the directory holding native/binding.gyp: that is
// the repo root both from shared/ (tap runs sources) and dist/shared/ (tsc).
export function projectRoot(from: string = __dirname): string | null {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'native', 'binding.gyp'))) return dir;
    if (path.dirname(dir) === dir) return null;
  }
}

let cached: NativeAddon | undefined;

export function loadNative(): NativeAddon {
  if (cached) return cached;
  const root = projectRoot();
  const where = root
    ? path.join(root, ...ADDON_PATH)
    : `native/build/Release/postern_native.node (no native/binding.gyp above ${__dirname})`;
  let addon: Partial<NativeAddon>;
  try {
    if (!root) throw new Error('postern installation not found');
    addon = require(where) as Partial<NativeAddon>;
    for (const name of ['peerCred', 'setNonDumpable', 'pidfdOpen'] as const) {
      if (typeof addon[name] !== 'function') throw new Error(`it does not export ${name}`);
    }
  } catch (e) {
    const reason = e instanceof Error ? e.message.split('\n')[0] : String(e);
    throw new Refusal(
      'bad_environment',
      `postern refuses to run without its native addon ${where}: ${reason}; ` +
        `build it with \`npm ci\` or \`node native/build.js\` in the postern directory`,
      { addon: where },
    );
  }
  cached = addon as NativeAddon;
  return cached;
}

export function peerCred(fd: number): PeerCred {
  return loadNative().peerCred(fd);
}

export function setNonDumpable(): void {
  loadNative().setNonDumpable();
}

// A pidfd for `pid` (close it with fs.closeSync), or null when the kernel
// lacks pidfd_open. Throws (code ESRCH) when the process does not exist.
export function pidfdOpen(pid: number): number | null {
  return loadNative().pidfdOpen(pid);
}

// Node exposes a connected socket's descriptor only through its internal
// handle (PLATFORM.md). Without it the peer cannot be identified: refuse.
export function socketFd(sock: net.Socket): number {
  const handle = (sock as unknown as { _handle?: { fd?: unknown } | null })._handle;
  const fd = handle?.fd;
  if (typeof fd !== 'number' || !Number.isInteger(fd) || fd < 0) {
    throw new Refusal(
      'unidentified_peer',
      'the connecting process cannot be identified (its socket has no file descriptor, ' +
        'it may already be closed); connect again',
    );
  }
  return fd;
}

// The process at the other end of a Unix socket, as of its connect() call.
// The kernel reports pid 0 when it has no peer process to name (a TCP
// socket, or a peer whose pid namespace we cannot see): refused, never "pid 0".
export function peerCredOfSocket(sock: net.Socket): PeerCred {
  const fd = socketFd(sock);
  const { peerCred: read } = loadNative();
  let cred: PeerCred;
  try {
    cred = read(fd);
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new Refusal(
      'unidentified_peer',
      `the connecting process cannot be identified (${reason}); connect over the Unix socket`,
    );
  }
  if (cred.pid <= 0) {
    throw new Refusal(
      'unidentified_peer',
      'the kernel names no process for this connection (not a Unix socket, or a peer in another pid namespace); ' +
        "connect over the Unix socket from a process in the daemon's pid namespace",
    );
  }
  return cred;
}
