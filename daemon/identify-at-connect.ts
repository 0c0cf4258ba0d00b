// The peer of an agent-socket or ssh-agent connection is the process that
// made it (SPEC §7), read when the connection is accepted rather than at
// its first request: a maker that exec'd (or exited, its pid reused) before
// writing is then found changed at that request, not taken for the process
// it became. The verdict, a refusal included, is kept for the socket by
// `identify` and given at the first request. What remains: a maker that
// execs between its connect() and the daemon's accept, which /proc cannot
// tell apart (Linux counts no execs); docs/threat-model.md.
import type net from 'node:net';
import { Refusal } from '../shared/errors';

export function identifyAtConnect(identify: (sock: net.Socket) => unknown, sock: net.Socket): void {
  try {
    identify(sock);
  } catch {
    // kept for the socket, answered at its first request
  }
}

// `r`, a refusal given before the request's peer was checked to still run
// (its body was not whole yet), unless `check` (that check) refuses: then
// its refusal, the one a check at the request's head would have given.
export function peerGoneInstead(check: () => unknown, r: Refusal): Refusal {
  try {
    check();
    return r;
  } catch (e) {
    return e instanceof Refusal ? e : r;
  }
}
