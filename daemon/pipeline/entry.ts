// The one way into the steps of SPEC §6.1, for every front door: a request
// already validated (step 1) and the identity of the process that sent it.
// The agent socket's JSON is validated here too, so a malformed request is
// refused, journaled and given its audit_seq like any other.
import type { HttpReply, SshReply } from '../../shared/protocol';
import type { RequestContext } from './context';
import {
  validateHttpRequest,
  validateSshRequest,
  parseJsonBody,
  HttpRequest,
  SshRequest,
  RequestLimits,
} from './validate';
import { runHttp } from './run-http';
import { runSsh } from './run-ssh';
import { refuseHttp, refuseSsh } from './refuse';
import { who } from './evidence';

export type PipelineRequest = { endpoint: 'http'; request: HttpRequest } | { endpoint: 'ssh'; request: SshRequest };

export function serve(ctx: RequestContext, r: { endpoint: 'http'; request: HttpRequest }): Promise<HttpReply>;
export function serve(ctx: RequestContext, r: { endpoint: 'ssh'; request: SshRequest }): Promise<SshReply>;
export function serve(ctx: RequestContext, r: PipelineRequest): Promise<HttpReply | SshReply> {
  return r.endpoint === 'http' ? runHttp(ctx, r.request) : runSsh(ctx, r.request);
}

function limits(ctx: RequestContext): RequestLimits {
  const cfg = ctx.services.config();
  return { maxRequestBody: cfg.http.max_request_body, maxTimeout: cfg.http.max_timeout };
}

// POST /v1/http and POST /v1/ssh: `body` is the raw request body.
export async function serveJson(ctx: RequestContext, endpoint: 'http', body: Buffer): Promise<HttpReply>;
export async function serveJson(ctx: RequestContext, endpoint: 'ssh', body: Buffer): Promise<SshReply>;
export async function serveJson(
  ctx: RequestContext,
  endpoint: 'http' | 'ssh',
  body: Buffer,
): Promise<HttpReply | SshReply> {
  // Locked: the lock's refusal, before anything is read.
  ctx.services.vault();
  const requester = who(ctx.identity);
  if (endpoint === 'http') {
    let request: HttpRequest;
    try {
      request = validateHttpRequest(parseJsonBody(body), limits(ctx));
    } catch (e) {
      return refuseHttp(ctx.services, e, { requester });
    }
    return runHttp(ctx, request);
  }
  let request: SshRequest;
  try {
    request = validateSshRequest(parseJsonBody(body), limits(ctx));
  } catch (e) {
    return refuseSsh(ctx.services, e, { requester });
  }
  return runSsh(ctx, request);
}
