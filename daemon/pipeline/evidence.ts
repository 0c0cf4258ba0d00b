// What the journal says about a request, composed from what the steps
// returned (shared/events.ts): the requester, the request, the resolution and
// the approval. A refusal journals as much of it as was known when it came;
// the intent journals all of it. The field order is the journal's.
import { sha256hex } from '../../shared/crypto';
import type {
  Approval,
  HttpRequestFacts,
  JournalEvent,
  Requester,
  Resolution,
  SshRequestFacts,
  UncredentialedHttpFacts,
} from '../../shared/events';
import type { HttpCredentialDef, SshCredentialDef } from '../../shared/credential';
import { tokenEndpoint } from './computed/github-token';
import type { Identity } from '../identity/identify';
import type { HttpRequest, SshRequest } from './validate';
import type { ResolvedAddress } from './resolve';

export function who(identity: Identity): Requester {
  const p = identity.process;
  return { pid: p.pid, uid: p.uid, exe: p.exe, instance: p.key };
}

export function sha256(b: Buffer): string {
  return sha256hex(b);
}

export function httpRequestFacts(req: HttpRequest, bodyHash: string | null): HttpRequestFacts {
  const t = req.target;
  return {
    credential: req.credential,
    method: req.method,
    scheme: t.scheme,
    host: t.host,
    port: t.port,
    path: t.path,
    body_bytes: req.body?.length ?? 0,
    body_sha256: bodyHash,
    ...(req.idempotencyKey !== null ? { idempotency_key: req.idempotencyKey } : {}),
    ...(req.reason !== null ? { reason: req.reason } : {}),
  };
}

// What a computed credential adds to the request's facts (SPEC §13), once
// the credential is known.
export function computedFacts(def: HttpCredentialDef): Pick<HttpRequestFacts, 'computed' | 'token_endpoint'> {
  const inj = def.inject;
  if ('aws_sigv4' in inj) return { computed: 'aws_sigv4' };
  if ('github_app' in inj) return { computed: 'github_app', token_endpoint: tokenEndpoint(inj.github_app) };
  if ('oauth2' in inj) return { computed: 'oauth2', token_endpoint: inj.oauth2.token_url };
  return {};
}

// The credential's host, port, user and host key once it is known.
export function sshRequestFacts(
  req: SshRequest,
  stdinHash: string | null,
  def: SshCredentialDef | null,
): SshRequestFacts {
  return {
    credential: req.credential,
    command: req.command,
    stdin_bytes: req.stdin?.length ?? 0,
    stdin_sha256: stdinHash,
    ...(req.reason !== null ? { reason: req.reason } : {}),
    ...(def ? { host: def.host, port: def.port, user: def.user, host_key: def.host_key } : {}),
  };
}

export function resolutionFacts(addresses: readonly ResolvedAddress[]): Resolution {
  return { address: addresses[0]!.address, addresses: addresses.map((a) => a.address) };
}

// What a request's steps have established so far.
export interface Evidence<R> {
  requester: Requester;
  request?: R;
  resolution?: Resolution;
  approval?: Approval;
}

// Everything known, in the journal's order: for a refusal's entry.
export function known(
  e: Evidence<HttpRequestFacts | UncredentialedHttpFacts>,
): Requester & Partial<HttpRequestFacts & Resolution & Approval>;
export function known(e: Evidence<SshRequestFacts>): Requester & Partial<SshRequestFacts & Resolution & Approval>;
export function known(e: Evidence<HttpRequestFacts | UncredentialedHttpFacts> | Evidence<SshRequestFacts>): Requester {
  return { ...e.requester, ...(e.request ?? {}), ...(e.resolution ?? {}), ...(e.approval ?? {}) };
}

// An evidence whose every step is done: for the intent.
export interface Complete<R> {
  requester: Requester;
  request: R;
  resolution: Resolution;
  approval: Approval;
}

export function httpIntent(e: Complete<HttpRequestFacts>): JournalEvent {
  return { kind: 'http_intent', ...e.requester, ...e.request, ...e.resolution, ...e.approval };
}

export function sshIntent(e: Complete<SshRequestFacts>): JournalEvent {
  return { kind: 'ssh_intent', ...e.requester, ...e.request, ...e.resolution, ...e.approval };
}
