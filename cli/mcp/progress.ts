// Progress while a call waits (SPEC §10): a request may wait for a human at
// the approver for up to daemon.approval_timeout, longer than common client
// timeouts (the MCP SDK's is 60 s). A client that gave a progress token is
// told every few seconds that the call is waiting, so one that resets its
// timeout on progress keeps waiting.
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { HEARTBEAT_MS, type ApprovalNotice } from '../../shared/protocol';

export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

// Well inside the 10 s the SPEC allows, so that a client whose timeout is a
// few seconds also keeps waiting.
export const PROGRESS_EVERY_MS = 2000;

// What the call is doing, as the agent socket tells it: the daemon sends a
// waiting notice (id, expiry) when the request starts to wait for a human,
// and another when one approved it.
export interface CallPhase {
  approval: ApprovalNotice | null;
  // When the daemon last said anything (a notice or its heartbeat).
  heardAt: number;
}

// The daemon's heartbeat comes every HEARTBEAT_MS while it works on a call;
// after three missed, it is taken as stopped (a frozen or hung daemon, a
// connection no longer read) and progress stops, so that a client that
// resets its timeout on progress gives up in its own time instead of
// waiting for ever.
export const SILENT_AFTER_MS = 3 * HEARTBEAT_MS;

export function waitingMessage(seconds: number, phase: CallPhase): string {
  const a = phase.approval;
  if (a?.approved)
    return `a human approved this request (${a.id}) at the postern approver; postern is carrying it out; ${seconds} s so far`;
  if (a)
    return `waiting for postern: a human is being asked to approve this request (${a.id}) at the postern approver; the request expires at ${a.expiresAt}; ${seconds} s so far`;
  return `postern is working on this request; ${seconds} s so far`;
}

// Starts the notifications; the returned function stops them.
export function reportWaiting(extra: ToolExtra, phase: CallPhase, everyMs = PROGRESS_EVERY_MS): () => void {
  const token = extra._meta?.progressToken;
  if (token === undefined) return () => undefined;
  const started = Date.now();
  let beat = 0;
  const timer = setInterval(() => {
    if (extra.signal.aborted || Date.now() - phase.heardAt > SILENT_AFTER_MS) return;
    beat += 1;
    const seconds = Math.round((Date.now() - started) / 1000);
    extra
      .sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress: beat, message: waitingMessage(seconds, phase) },
      })
      .catch(() => undefined); // the client is gone: nothing to tell
  }, everyMs);
  return () => clearInterval(timer);
}
