// The steps of SPEC §6.1 an HTTP request takes, whichever front door it
// came through (POST /v1/http, run-http.ts; the proxy, run-proxied.ts):
// each runs one step, and the runners say in which order. Step 4 and the
// pinned pool are in pinned-address.ts, which the token endpoints and the
// proxy's tunnels use too.
import { Refusal } from '../../shared/errors';
import type { ProxyCardFields } from '../../shared/admin-protocol';
import { definitionHash, type HttpCredentialDef } from '../../shared/credential';
import type { Approval } from '../../shared/events';
import { checkPolicy, checkHeadersForCredential, checkQueryForCredential, type PolicyMatch } from './policy';
import type { ResolvedAddress } from './resolve';
import type { Target } from './target';
import { inject, standingNeedles, type InjectRequest, type Injected } from './inject';
import { githubAppToken } from './computed/github-token';
import { oauthToken } from './computed/oauth-token';
import type { Obtained } from './computed/github-app';
import { computedFacts } from './evidence';
import { buildRedactor, type Redactor } from './redact';
import { joinRedactors } from './redact/redactor';
import { NO_REDACTION, type RedactorLease } from '../stores/redactors';
import type { FormerVersion } from '../stores/former-values';
import { formerCovering } from './coverage';
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
  return approve(ctx, def, match.approve, {
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

// The credential's cached redactor joined with one for the values made for
// this request (Injected.ownNeedles), built here and wiped at release.
function withOwnNeedles(lease: RedactorLease, own: Buffer[], label: string): RedactorLease {
  const mine = own.length > 0 ? buildRedactor(own, label) : null;
  if (!mine) return lease;
  const redactor = lease.redactor ? joinRedactors([lease.redactor, mine], label, mine) : mine;
  let held = true;
  return {
    redactor,
    release: () => {
      if (!held) return;
      held = false;
      redactor.wipe();
      lease.release();
    },
  };
}

// A host some credentials cover may keep a secret one request injected and
// show it to any later request: to one without a placeholder (SPEC §11:
// sent as it is, no approval) and to one through another credential
// covering it (docs/proxy.md, docs/responses.md). So every response from a
// covered host is searched for the values of every credential covering it
// that redacts, not only those of the credential it was sent with, and for
// the values of the former versions that covered it (a rotated or removed
// secret the host kept: stores/former-values.ts).
// Each credential's shared redactor when it has one, else one built from
// its secret now. `except`: the request's own credential, searched already.
export async function coveringLeases(
  s: PipelineServices,
  covering: HttpCredentialDef[],
  target: Target,
  except: string | null = null,
): Promise<NamedLease[]> {
  const leases: NamedLease[] = [];
  try {
    for (const def of covering) {
      if (!def.redact_response || def.name === except) continue;
      let lease = s.stores.redactors.current(def.name);
      if (!lease) {
        try {
          lease = await standingLease(s, def);
        } catch (e) {
          // Locked meanwhile: the request's refusal. Removed meanwhile: it
          // covers nothing now.
          if (e instanceof Refusal) throw e;
          continue;
        }
      }
      leases.push({ lease, name: def.name });
    }
    for (const former of formerCovering(s, target))
      leases.push({
        lease: s.stores.redactors.current(former.key) ?? (await formerLease(s, former)),
        name: former.definition.name,
      });
  } catch (e) {
    for (const l of leases) l.lease.release();
    throw e;
  }
  return leases;
}

// A lease and the name of the credential whose redactor it holds (the
// lease itself, not a copy: the cache knows its own leases by identity).
export interface NamedLease {
  lease: RedactorLease;
  name: string;
}

// One lease for several: their redactors joined (an occurrence marked with
// the name of the credential whose value it is), each released with it.
// The join of the cache's redactors is kept by the cache; one with a part
// made for this request alone is made for it and wiped with it.
function joinLeases(s: PipelineServices, leases: NamedLease[]): RedactorLease {
  const parts = leases.filter((l) => l.lease.redactor !== null);
  const label = parts.map((l) => l.name).join('|');
  const kept =
    parts.length > 1
      ? s.stores.redactors.joined(
          parts.map((l) => l.lease),
          label,
        )
      : null;
  const redactors = parts.map((l) => l.lease.redactor as Redactor);
  const joined = parts.length < 2 ? null : (kept ?? joinRedactors(redactors, label, null, true));
  let held = true;
  return {
    redactor: joined ?? redactors[0] ?? null,
    release: () => {
      if (!held) return;
      held = false;
      if (!kept) joined?.wipe();
      for (const l of leases) l.lease.release();
    },
  };
}

// A proxied request without a placeholder to a covered host: its response
// is searched for the covering credentials' values (see coveringLeases),
// handed to `scan` as sendWithSecret does, for the caller to release.
export async function scanForCovering(
  s: PipelineServices,
  covering: HttpCredentialDef[],
  target: Target,
  scan: ResponseScan,
): Promise<void> {
  const lease = joinLeases(s, await coveringLeases(s, covering, target));
  scan.redactor = lease.redactor;
  scan.release = lease.release;
}

function standingLease(s: PipelineServices, def: HttpCredentialDef): Promise<RedactorLease> {
  return s.vault().withCredentialSecret(def, async (secret) => {
    const inj = def.inject;
    const token =
      'github_app' in inj || 'oauth2' in inj ? s.stores.tokens.get(def.name, definitionHash(def), new Date()) : null;
    const needles = standingNeedles(def, secret.bytes, token);
    try {
      return s.stores.redactors.acquire(def.name, needles);
    } finally {
      for (const n of needles) n.fill(0);
    }
  });
}

// A former version's redactor, kept by the cache under the version's key
// until the version leaves the store or the vault locks. Its values as the
// version injected them, without an access token (one obtained with a
// replaced secret expires on its own).
function formerLease(s: PipelineServices, former: FormerVersion): Promise<RedactorLease> {
  const def = former.definition as HttpCredentialDef;
  return s.vault().withReplacedSecret(former.secret, async (secret) => {
    const needles = standingNeedles(def, secret.bytes, null);
    try {
      return s.stores.redactors.acquire(former.key, needles, def.name);
    } finally {
      for (const n of needles) n.fill(0);
    }
  });
}

// The token step counts against the request's timeout: a slow token
// endpoint times the request out as a slow upstream would, with nothing
// sent. The token request goes on (other requests may wait for it, and its
// token is kept for the next).
function tokenWithin(token: Promise<Obtained>, ms: number, def: HttpCredentialDef): Promise<Obtained> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      const from = computedFacts(def).token_endpoint ?? 'its token endpoint';
      reject(
        new Refusal(
          'upstream_timeout',
          `no access token for credential "${def.name}" from ${from} within the request's timeout (${ms} ms); the request was not sent — retry later, or give the request longer (timeout_ms on POST /v1/http; through the proxy front door a human may raise http.timeout)`,
          { maybe_executed: false },
        ),
      );
    }, ms);
  });
  token.catch(() => undefined);
  return Promise.race([token, late]).finally(() => clearTimeout(timer));
}

// 8. the secret, opened only around injection and the send; the redactor
// of the response is taken while it is open (see ResponseScan), joined
// with `others` (coveringLeases: the other credentials covering the host),
// which it releases with its own, or at once when it fails before.
// A GitHub App or OAuth credential obtains its token first, with its secret
// open, within `timeoutMs` (the request's timeout).
export async function sendWithSecret<T>(
  s: PipelineServices,
  def: HttpCredentialDef,
  headers: [string, string][],
  target: Target,
  request: InjectRequest,
  scan: ResponseScan,
  timeoutMs: number,
  send: (injected: Injected) => Promise<T>,
  others: NamedLease[] = [],
): Promise<T> {
  let handed = false;
  try {
    return await s.vault().withCredentialSecret(def, async (secret) => {
      const inj = def.inject;
      const obtained =
        'github_app' in inj
          ? await tokenWithin(githubAppToken(s, { ...def, inject: inj }, secret), timeoutMs, def)
          : 'oauth2' in inj
            ? await tokenWithin(oauthToken(s, { ...def, inject: inj }, secret), timeoutMs, def)
            : null;
      const injected = inject(def, secret, headers, target, request, obtained?.token ?? null);
      if (obtained?.rotated) injected.ownNeedles.push(Buffer.from(obtained.rotated, 'latin1'));
      try {
        const own = def.redact_response
          ? withOwnNeedles(s.stores.redactors.acquire(def.name, injected.needles), injected.ownNeedles, def.name)
          : NO_REDACTION;
        const lease = others.length > 0 ? joinLeases(s, [{ lease: own, name: def.name }, ...others]) : own;
        scan.redactor = lease.redactor;
        scan.release = lease.release;
        handed = true;
        return await send(injected);
      } finally {
        for (const n of injected.needles) n.fill(0);
        for (const n of injected.ownNeedles) n.fill(0);
      }
    });
  } finally {
    if (!handed) for (const l of others) l.lease.release();
  }
}
