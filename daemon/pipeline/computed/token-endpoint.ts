// A token endpoint (SPEC §13) is a target like any other: one resolution,
// every address classified with the credential's allow_addresses, the
// connection pinned to the address checked, the CA list of http.ca_file,
// no redirect followed. It needs no [[allow]] rule: the definition names it.
// A failure here is the agent's request's refusal, which was not sent.
import { Refusal } from '../../../shared/errors';
import type { HttpCredentialDef } from '../../../shared/credential';
import type { PipelineServices } from '../context';
import { parseTarget, type Target } from '../target';
import { pinnedPool, resolveChecked } from '../pinned-address';
import { sendPinned, type RawResponse } from '../execute-http';
import { DAEMON_REQUESTER } from '../../stores/pinned-pools';

const TOKEN_TIMEOUT_MS = 10_000;

export interface TokenCall {
  url: string;
  headers: Record<string, string>;
  body: Buffer;
  readLimit: number;
}

function endpointTarget(url: string): Target {
  try {
    return parseTarget(url);
  } catch (e) {
    if (e instanceof Refusal)
      throw new Refusal('bad_request', `the token endpoint ${url} is not a valid URL: ${e.message}`);
    throw e;
  }
}

export async function callTokenEndpoint(
  s: PipelineServices,
  def: HttpCredentialDef,
  call: TokenCall,
): Promise<RawResponse> {
  const target = endpointTarget(call.url);
  const { pinned } = await resolveChecked(s, target, def.allow_addresses);
  return sendPinned(pinnedPool(s, def.name, DAEMON_REQUESTER, target, pinned), target.host, {
    method: 'POST',
    pathAndQuery: target.path + target.query,
    headers: call.headers,
    body: call.body,
    timeoutMs: TOKEN_TIMEOUT_MS,
    readLimit: call.readLimit,
  });
}

// Any failure while obtaining a token: named by its endpoint, and marked
// as not having sent the agent's request.
export function tokenFailure(url: string, e: unknown): Refusal {
  const r =
    e instanceof Refusal ? e : new Refusal('upstream_error', 'the token could not be obtained; see the daemon log');
  // The endpoint's own timeout words would say the request may have
  // reached it: true of the token request, not of the agent's, never sent.
  const message =
    r.code === 'upstream_timeout'
      ? `obtaining a token from ${url}: no answer in time; the request was not sent — retry later`
      : r.message.includes(url)
        ? r.message
        : `obtaining a token from ${url}: ${r.message}`;
  return new Refusal(r.code, message, { ...(r.detail ?? {}), maybe_executed: false });
}
