// An HTTP request through the steps of SPEC §6.1, in order, each a function
// from the files beside this one. The order lives here and only here. The
// request arrives validated (step 1, by its front door); a refusal at any
// later step is journaled and carries its audit_seq; the secret is opened
// only at step 8, after everything before it passed.
import { refuseIfRequesterLeft } from './requester-gone';
import { Refusal } from '../../shared/errors';
import { responseFailure } from './http-failures';
import { canonicalJson } from '../../shared/canonical-json';
import type { HttpRequestFacts } from '../../shared/events';
import type { HttpReply } from '../../shared/protocol';
import { credentialOfKind } from './credential';
import type { HttpRequest } from './validate';
import { formatOrigin } from './target';
import { sendPinned, RawResponse } from './execute-http';
import { approveHttp, checkCredentialRules, coveringLeases, responseScan, sendWithSecret } from './http-steps';
import { coveringCredentials } from './coverage';
import { pinnedPool, resolveChecked } from './pinned-address';
import { shapeResponse } from './response';
import type { Outcome, Ticket } from '../stores/idempotency';
import type { PipelineServices, RequestContext } from './context';
import {
  Complete,
  Evidence,
  computedFacts,
  httpIntent,
  httpRequestFacts,
  resolutionFacts,
  sha256,
  who,
} from './evidence';
import { lockedMeanwhile, outcomeNotJournaled, refuseAfterIntent, refuseHttp, sendFailed } from './refuse';

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

export async function runHttp(ctx: RequestContext, req: HttpRequest): Promise<HttpReply> {
  const s = ctx.services;
  s.vault(); // a locked vault refuses the request before any step
  const cfg = s.config();
  const ev: Evidence<HttpRequestFacts> = { requester: who(ctx.identity) };
  let ticket: Ticket<HttpReply> | null = null;
  try {
    const bodyHash = req.body ? sha256(req.body) : null;
    const request = (ev.request = httpRequestFacts(req, bodyHash));
    // 2. the credential exists
    const def = credentialOfKind(s, req.credential, 'http');
    Object.assign(request, computedFacts(def));
    // 3. policy and budget
    const { match, headers } = checkCredentialRules(s, def, req);
    // 4. one resolution; every address classified
    const { addresses, pinned } = await resolveChecked(s, req.target, def.allow_addresses);
    const resolved = (ev.resolution = resolutionFacts(addresses));
    // 5. approval: a covering session, else a human's decision
    const approval = (ev.approval = await approveHttp(ctx, def, match, req, pinned, bodyHash));
    const done: Complete<HttpRequestFacts> = { requester: ev.requester, request, resolution: resolved, approval };
    refuseIfRequesterLeft(ctx);
    // 6. idempotency: each-use requests are never replayed (a human saw
    // this one and approved it again)
    if (req.idempotencyKey !== null && match.approve !== 'each-use') {
      const scope = approval.approval === 'once' ? `process:${ctx.identity.process.key}` : approval.approval;
      const found = s.stores.idempotency.lookup(scope, def.name, req.idempotencyKey, requestHash(req, bodyHash));
      if (found.kind === 'replay') return await replay(s, found.outcome, done);
      ticket = found.ticket;
    }
    s.stores.budgets.take(def.name, def.rate);
    // 7. intent, durable before anything leaves the machine
    const intent = await s.journal.record(httpIntent(done));
    // 8–9. connect to the checked address, inject, send, read
    const started = Date.now();
    const timeoutMs = req.timeoutMs ?? cfg.http.timeout;
    const cap = cfg.http.max_response_body;
    const pool = pinnedPool(s, def.name, ctx.identity.process.key, req.target, pinned);
    let raw: RawResponse;
    // Taken while the secret is open; released once the response is shaped.
    const scan = responseScan();
    let readLimit = cap;
    try {
      const others = await coveringLeases(s, coveringCredentials(s, req.target), req.target, def.name);
      raw = await sendWithSecret(
        s,
        def,
        headers,
        req.target,
        req,
        scan,
        timeoutMs,
        (injected) => {
          readLimit = cap + (scan.redactor?.maxMatchLength ?? 0);
          return sendPinned(pool, req.target.host, {
            method: req.method,
            pathAndQuery: injected.pathAndQuery,
            headers: injected.headers,
            body: req.body,
            // What a token step left of the timeout.
            timeoutMs: Math.max(1, started + timeoutMs - Date.now()),
            readLimit,
          });
        },
        others,
      );
    } catch (e) {
      scan.release();
      throw settle(ticket, await sendFailed(s, intent, e, started));
    }
    let reply;
    try {
      reply = await shapeResponse(raw, def, scan.redactor, cap, readLimit, req.target.host);
    } catch (e) {
      const r = lockedMeanwhile(s, e instanceof Refusal ? e : responseFailure(e, req.target.host));
      throw settle(
        ticket,
        await refuseAfterIntent(s, intent, r, {
          kind: 'http_outcome',
          intent_seq: intent.seq,
          status: raw.status,
          error: r.code,
          maybe_executed: true,
          duration_ms: Date.now() - started,
        }),
      );
    } finally {
      scan.release();
    }
    // 10. outcome; the hash is of what the agent gets, so the journal never
    // holds a hash of a secret the upstream echoed.
    const outcome = await s.journal
      .recordOutcome({
        kind: 'http_outcome',
        intent_seq: intent.seq,
        status: raw.status,
        bytes: raw.body.length,
        truncated: reply.truncated,
        redactions: reply.redactions,
        body_sha256: sha256(Buffer.from(reply.body, reply.body_encoding)),
        duration_ms: Date.now() - started,
      })
      .catch((e: unknown) => {
        throw settle(ticket, outcomeNotJournaled(intent, e, `the upstream answered ${raw.status}`));
      });
    // 11. reply
    const result: HttpReply = {
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
    return refuseHttp(s, e, ev);
  }
}

// After the intent: a refusal that says the request may have executed is
// what a retry with the same key gets; any other frees the key.
function settle(ticket: Ticket<HttpReply> | null, r: Refusal): Refusal {
  if (ticket && r.maybeExecuted === true) ticket.finish({ kind: 'refusal', refusal: r, auditSeq: Number(r.auditSeq) });
  return r;
}

// The recorded outcome, marked as a replay; the replay itself is journaled.
async function replay(
  s: PipelineServices,
  outcome: Outcome<HttpReply>,
  done: Complete<HttpRequestFacts>,
): Promise<HttpReply> {
  const head = await s.journal.record({
    kind: 'http_replayed',
    ...done.requester,
    ...done.request,
    ...done.resolution,
    ...done.approval,
    replayed_seq: outcome.auditSeq,
  });
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
