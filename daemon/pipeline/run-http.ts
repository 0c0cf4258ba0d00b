// POST /v1/http: the steps of SPEC §6.1, in order, each a function from the
// files beside this one. The order lives here and only here. A refusal at
// any step is journaled and carries its audit_seq; the secret is opened only
// at step 8, after everything before it passed.
import { Refusal } from '../../shared/errors';
import { canonicalJson } from '../../shared/canonical-json';
import { usableDefinition } from '../vault/unlocked-vault';
import type { Controller } from '../controller';
import type { Identity } from '../identity/identify';
import { validateHttpRequest, parseJsonBody, HttpRequest } from './validate';
import { checkPolicy, checkHeadersForCredential, checkQueryForCredential } from './policy';
import { resolveTarget } from './resolve';
import { assertAllAllowed } from './classify';
import { formatOrigin } from './target';
import { PinnedPools } from '../stores/pinned-pools';
import { inject } from './inject';
import { sendPinned, RawResponse } from './execute-http';
import { buildRedactor, Redactor } from './redact';
import { shapeResponse } from './response';
import { IdempotencyStore, Outcome, Ticket } from '../stores/idempotency';
import { RateBudgets } from '../stores/budgets';
import type { Slot } from '../stores/budgets';
import { who, sha256, refuse, dnsServers, approve } from './steps';
import type { RequestContext } from './steps';

export interface HttpContext {
  controller: Controller;
  pools: PinnedPools;
  idempotency: IdempotencyStore;
  budgets: RateBudgets;
  identity: Identity;
  signal: AbortSignal;
  slot?: Slot;
  onWaiting?: RequestContext['onWaiting'];
}

function requestFacts(req: HttpRequest, bodyHash: string | null): Record<string, unknown> {
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

// Two requests are "the same" for idempotency when they would send the same
// bytes: credential, method, URL, headers (sorted) and body. The timeout is
// not part of the request.
function requestHash(req: HttpRequest, bodyHash: string | null): string {
  const t = req.target;
  const headers = [...req.headers]
    .map(([k, v]) => [k.toLowerCase(), v])
    .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : a[1]! < b[1]! ? -1 : 1));
  return sha256(
    Buffer.from(
      canonicalJson({
        credential: req.credential,
        method: req.method,
        url: `${formatOrigin(t)}${t.path}${t.query}`,
        headers,
        body: bodyHash,
      }),
    ),
  );
}

// `body` is the raw request body: a body that is not JSON is refused inside
// the pipeline, so that refusal is journaled and carries its audit_seq too.
export async function runHttp(ctx: HttpContext, body: Buffer): Promise<Record<string, unknown>> {
  const c = ctx.controller;
  const vault = c.requireUnlocked();
  const cfg = c.config.config;
  let facts: Record<string, unknown> = { ...who(ctx.identity) };
  let ticket: Ticket | null = null;
  try {
    // 1. validate
    const req = validateHttpRequest(parseJsonBody(body), {
      maxRequestBody: cfg.http.max_request_body,
      maxTimeout: cfg.http.max_timeout,
    });
    const bodyHash = req.body ? sha256(req.body) : null;
    facts = { ...facts, ...requestFacts(req, bodyHash) };
    // 2. the credential exists
    const stored = vault.credential(req.credential);
    if (!stored)
      throw new Refusal('unknown_credential', `${vault.noSuchCredential(req.credential)}; see GET /v1/credentials`);
    if (stored.entry.kind !== 'http')
      throw new Refusal(
        'bad_request',
        `credential "${req.credential}" is an ${stored.entry.kind} credential; use POST /v1/ssh`,
      );
    const def = usableDefinition(stored);
    if (def.kind !== 'http')
      throw new Refusal(
        'internal_error',
        `the stored definition of credential "${req.credential}" is not of its kind; a human must fix it with \`postern cred update ${req.credential}\``,
      );
    // 3. policy, and the credential's budget (checked now so no human is
    // asked about a request that would be refused anyway; spent at step 7)
    const match = checkPolicy(def, req);
    const headers = checkHeadersForCredential(req, def);
    checkQueryForCredential(req, def);
    ctx.budgets.check(def.name, def.rate);
    // 4. one resolution; every address classified
    const resolution = await resolveTarget(req.target.host.replace(/^\[|\]$/g, ''), req.target.hostKind, {
      dnsServers: dnsServers(cfg.http.dns_servers),
      timeoutMs: Math.min(cfg.http.timeout, 10_000),
    });
    assertAllAllowed(
      req.target.host,
      resolution.addresses.map((a) => a.address),
      def.allow_addresses,
    );
    const pinned = resolution.addresses[0]!;
    facts = { ...facts, address: pinned.address, addresses: resolution.addresses.map((a) => a.address) };
    // 5. approval: a covering session, else a human's decision
    const t = req.target;
    const approval = await approve(ctx, def.name, match.approve, {
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
    });
    facts = { ...facts, approval };
    // 6. idempotency: each-use requests are never replayed (a human saw
    // this one and approved it again)
    if (req.idempotencyKey !== null && match.approve !== 'each-use') {
      const scope = approval === 'once' ? `process:${ctx.identity.process.key}` : approval;
      const found = ctx.idempotency.lookup(scope, def.name, req.idempotencyKey, requestHash(req, bodyHash));
      if (found.kind === 'replay') return await replay(c, found.outcome, facts);
      ticket = found.ticket;
    }
    ctx.budgets.take(def.name, def.rate);
    // 7. intent, durable before anything leaves the machine
    const intent = await c.record({ kind: 'http_intent', ...facts });
    // 8–9. connect to the checked address, inject, send, read
    const started = Date.now();
    const timeoutMs = req.timeoutMs ?? cfg.http.timeout;
    const cap = cfg.http.max_response_body;
    const pool = ctx.pools.get({
      credential: def.name,
      origin: formatOrigin(req.target),
      address: pinned.address,
      family: pinned.family,
    });
    let raw: RawResponse;
    // Built while the secret is open; wiped once the response is shaped.
    const scan: { redactor: Redactor | null; readLimit: number } = { redactor: null, readLimit: cap };
    try {
      raw = await vault.withCredentialSecret(def.name, async (secret) => {
        const injected = inject(def, secret, headers, req.target);
        try {
          scan.redactor = def.redact_response ? buildRedactor(injected.needles, def.name) : null;
          scan.readLimit = cap + (scan.redactor?.maxMatchLength ?? 0);
          return await sendPinned(pool, req.target.host, {
            method: req.method,
            pathAndQuery: injected.pathAndQuery,
            headers: injected.headers,
            body: req.body,
            timeoutMs,
            readLimit: scan.readLimit,
          });
        } finally {
          for (const n of injected.needles) n.fill(0);
        }
      });
    } catch (e) {
      scan.redactor?.wipe();
      const r = e instanceof Refusal ? e : new Refusal('upstream_error', 'the request failed; see the daemon log');
      const out = await c
        .record({
          kind: 'http_outcome',
          intent_seq: intent.seq,
          error: r.code,
          maybe_executed: r.maybeExecuted,
          duration_ms: Date.now() - started,
        })
        .catch(() => null);
      throw settle(ticket, new Refusal(r.code, r.message, { ...(r.detail ?? {}), audit_seq: out?.seq ?? intent.seq }));
    }
    let reply;
    try {
      reply = await shapeResponse(raw, def, scan.redactor, cap, scan.readLimit, req.target.host);
    } catch (e) {
      const r =
        e instanceof Refusal
          ? e
          : new Refusal('upstream_error', 'the response could not be read; see the daemon log', {
              maybe_executed: true,
            });
      const out = await c
        .record({
          kind: 'http_outcome',
          intent_seq: intent.seq,
          status: raw.status,
          error: r.code,
          maybe_executed: true,
          duration_ms: Date.now() - started,
        })
        .catch(() => null);
      throw settle(ticket, new Refusal(r.code, r.message, { ...(r.detail ?? {}), audit_seq: out?.seq ?? intent.seq }));
    } finally {
      scan.redactor?.wipe();
    }
    // 10. outcome; the hash is of what the agent gets, so the journal never
    // holds a hash of a secret the upstream echoed.
    const outcome = await c.recordOutcome({
      kind: 'http_outcome',
      intent_seq: intent.seq,
      status: raw.status,
      bytes: raw.body.length,
      truncated: reply.truncated,
      redactions: reply.redactions,
      body_sha256: sha256(Buffer.from(reply.body, reply.body_encoding)),
      duration_ms: Date.now() - started,
    });
    // 11. reply
    const result = {
      ...reply,
      target: { host: req.target.host, address: pinned.address, port: req.target.port },
      audit_seq: outcome.seq,
    };
    ticket?.finish({ kind: 'reply', reply: result, auditSeq: outcome.seq });
    return result;
  } catch (e) {
    // A refusal before the request left, or one that says it certainly did
    // not execute, frees the key: a retry with it runs.
    if (ticket && !(e instanceof Refusal && e.maybeExecuted === true)) ticket.abandon();
    if (e instanceof Refusal && e.auditSeq !== undefined) throw e;
    return refuse(c, 'http', e, facts);
  }
}

// After the intent: a refusal that says the request may have executed is
// what a retry with the same key gets; any other frees the key.
function settle(ticket: Ticket | null, r: Refusal): Refusal {
  if (ticket && r.maybeExecuted === true) ticket.finish({ kind: 'refusal', refusal: r, auditSeq: Number(r.auditSeq) });
  return r;
}

// The recorded outcome, marked as a replay; the replay itself is journaled.
async function replay(
  c: Controller,
  outcome: Outcome,
  facts: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const head = await c.record({ kind: 'http_replayed', ...facts, replayed_seq: outcome.auditSeq });
  if (outcome.kind === 'reply')
    return { ...outcome.reply, replayed: true, replayed_audit_seq: outcome.auditSeq, audit_seq: head.seq };
  const r = outcome.refusal;
  throw new Refusal(r.code, r.message, {
    ...(r.detail ?? {}),
    replayed: true,
    replayed_audit_seq: outcome.auditSeq,
    audit_seq: head.seq,
  });
}
