// The steps of SPEC §6.1 an HTTP request takes, whichever front door it
// came through (POST /v1/http, run-http.ts; the proxy, run-proxied.ts):
// each runs one step, and the runners say in which order. Step 4 and the
// pinned pool are in pinned-address.ts, which the token endpoints and the
// proxy's tunnels use too.
import type { ProxyCardFields } from '../../shared/admin-protocol';
import type { HttpCredentialDef } from '../../shared/credential';
import type { Approval } from '../../shared/events';
import { checkPolicy, checkHeadersForCredential, checkQueryForCredential, type PolicyMatch } from './policy';
import type { ResolvedAddress } from './resolve';
import type { Target } from './target';
import { inject, type InjectRequest, type Injected } from './inject';
import { githubAppToken } from './computed/github-token';
import { oauthToken } from './computed/oauth-token';
import { computedFacts } from './evidence';
import type { Redactor } from './redact';
import { NO_REDACTION } from '../stores/redactors';
import { approve } from './approve';
import type { PipelineServices, RequestContext } from './context';
import type { HttpRequest } from './validate';

// 3. policy, and the credential's budget (checked now so no human is asked
// about a request that would be refused anyway; spent before the intent).
export function checkCredentialRules(
  s: PipelineServices,
  def: HttpCredentialDef,
  req: HttpRequest,
): { match: PolicyMatch; headers: [string, string][] } {
  const match = checkPolicy(def, req);
  const headers = checkHeadersForCredential(req, def);
  checkQueryForCredential(req, def);
  s.stores.budgets.check(def.name, def.rate);
  return { match, headers };
}

// 5. approval: a covering session, else a human's decision on a card that
// shows the address found in step 4.
export function approveHttp(
  ctx: RequestContext,
  def: HttpCredentialDef,
  match: PolicyMatch,
  req: Pick<HttpRequest, 'method' | 'target' | 'body' | 'reason'>,
  pinned: ResolvedAddress,
  bodyHash: string | null,
  // What the card adds for a request through the proxy (shared/admin-protocol.ts).
  door: ProxyCardFields | null = null,
): Promise<Approval> {
  const t = req.target;
  return approve(ctx, def.name, match.approve, {
    kind: 'http',
    method: req.method,
    scheme: t.scheme,
    host: t.host,
    address: pinned.address,
    port: t.port,
    path: t.path,
    query: t.query,
    body_bytes: req.body?.length ?? 0,
    body_sha256: bodyHash,
    ...(req.reason !== null ? { reason: req.reason } : {}),
    ...(door ?? {}),
    ...computedFacts(def),
  });
}

// What scans a response: the credential's redactor, leased while the
// secret is open; the caller releases it once the response is shaped or
// streamed, also when `send` fails (it is handed over before the send).
export interface ResponseScan {
  redactor: Redactor | null;
  release(): void;
}

export function responseScan(): ResponseScan {
  return { ...NO_REDACTION };
}

// 8. the secret, opened only around injection and the send; the redactor
// of the response is taken while it is open (see ResponseScan).
// A GitHub App or OAuth credential obtains its token first, with its secret open.
export async function sendWithSecret<T>(
  s: PipelineServices,
  def: HttpCredentialDef,
  headers: [string, string][],
  target: Target,
  request: InjectRequest,
  scan: ResponseScan,
  send: (injected: Injected) => Promise<T>,
): Promise<T> {
  return s.vault().withCredentialSecret(def.name, async (secret) => {
    const inj = def.inject;
    const token =
      'github_app' in inj
        ? await githubAppToken(s, { ...def, inject: inj }, secret)
        : 'oauth2' in inj
          ? await oauthToken(s, { ...def, inject: inj }, secret)
          : null;
    const injected = inject(def, secret, headers, target, request, token);
    try {
      const lease = def.redact_response ? s.stores.redactors.acquire(def.name, injected.needles) : NO_REDACTION;
      scan.redactor = lease.redactor;
      scan.release = lease.release;
      return await send(injected);
    } finally {
      for (const n of injected.needles) n.fill(0);
    }
  });
}
