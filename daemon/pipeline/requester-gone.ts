// The signal that the requester went away (its response closed before it
// was finished), for whatever waits on the requester: an approval card is
// withdrawn. Most requests never wait, so the AbortController is made only
// when the signal is first asked for, aborted at once if the requester had
// already gone by then (two signals per request were a measurable part of
// the request path's cost).
import type { WaitingListener } from '../../shared/protocol';
import { Refusal } from '../../shared/errors';
import type { ServerResponse } from 'node:http';
import type { Identity } from '../identity/identify';
import type { Card } from '../sessions/approvals';
import type { Slot } from '../stores/budgets';
import type { PipelineServices, RequestContext } from './context';

export interface RequesterGone {
  readonly signal: AbortSignal;
  // Whether it has gone already (no signal made).
  readonly left: boolean;
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
    // Gone, or done sending: the connection's reading side ended (a close
    // shows there before the response's own close, which waits for the
    // connection's end to be written).
    get left(): boolean {
      return gone || res.socket?.readableEnded === true;
    },
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
// (made only if a step asks for it). `confirmed`: the requester was checked
// to still run once the request was whole (RequestContext).
export function requestContext(
  services: PipelineServices,
  identity: Identity,
  gone: RequesterGone,
  slot: Slot,
  onWaiting?: WaitingListener<Card>,
  confirmed = false,
): RequestContext {
  return {
    services,
    identity,
    get signal() {
      return gone.signal;
    },
    requesterLeft: () => gone.left,
    slot,
    ...(onWaiting ? { onWaiting } : {}),
    ...(confirmed ? { requesterConfirmed: true } : {}),
  };
}

// A request whose requester closed its connection before the request was
// sent is not sent: no one would get its answer. HTTP servers treat a
// client's end of sending as its going away (Node's server aborts the
// request, nginx answers 499); so does postern, as long as nothing has left.
export function refuseIfRequesterLeft(ctx: RequestContext): void {
  if (ctx.requesterLeft?.())
    throw new Refusal(
      'bad_request',
      'the connection closed before the request was sent, so nothing was sent; keep the connection open, both ways, until the answer arrives',
      { withdrawn: 'by the requester' },
    );
}
