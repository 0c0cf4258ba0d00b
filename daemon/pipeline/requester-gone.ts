// The signal that the requester went away (its response closed before it
// was finished), for whatever waits on the requester: an approval card is
// withdrawn. Most requests never wait, so the AbortController is made only
// when the signal is first asked for, aborted at once if the requester had
// already gone by then (two signals per request were a measurable part of
// the request path's cost).
import type { WaitingListener } from '../../shared/protocol';
import type { ServerResponse } from 'node:http';
import type { Identity } from '../identity/identify';
import type { Card } from '../sessions/approvals';
import type { Slot } from '../stores/budgets';
import type { PipelineServices, RequestContext } from './context';

export interface RequesterGone {
  readonly signal: AbortSignal;
}

export function requesterGone(res: ServerResponse): RequesterGone {
  let controller: AbortController | null = null;
  let gone = false;
  res.on('close', () => {
    if (res.writableFinished) return;
    gone = true;
    controller?.abort();
  });
  return {
    get signal(): AbortSignal {
      if (!controller) {
        controller = new AbortController();
        if (gone) controller.abort();
      }
      return controller.signal;
    },
  };
}

// A request's context for either front door, its signal the requester's
// (made only if a step asks for it).
export function requestContext(
  services: PipelineServices,
  identity: Identity,
  gone: RequesterGone,
  slot: Slot,
  onWaiting?: WaitingListener<Card>,
): RequestContext {
  return {
    services,
    identity,
    get signal() {
      return gone.signal;
    },
    slot,
    ...(onWaiting ? { onWaiting } : {}),
  };
}
