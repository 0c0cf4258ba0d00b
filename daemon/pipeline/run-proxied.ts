// A request read by the proxy front door (SPEC §11) through the steps of
// SPEC §6.1, the shared ones of http-steps.ts, its response streamed to the
// client. With a credential (designated by its placeholder): POST
// /v1/http's steps exactly, but for idempotency, which a proxied request
// has no key for. Without one: no policy and no approval (no credential's
// rules to apply or to ask about), but still the one resolution with every
// address classified (no allow_addresses), the pinned connection, and the
// journaled intent and outcome; the request goes as the client sent it
// (with accept-encoding: identity, as every request postern sends).
//
// A refusal before the response head is thrown (with its audit_seq) for the
// front door to answer as an HTTP response; once the head is out, a failure
// aborts the message and is the outcome's error.
import { refuseIfRequesterLeft } from './requester-gone';
import type { HttpCredentialDef } from '../../shared/credential';
import { Refusal } from '../../shared/errors';
import { responseFailure } from './http-failures';
import type { HttpRequestFacts, JournalEvent, UncredentialedHttpFacts } from '../../shared/events';
import { credentialOfKind } from './credential';
import { sendStreaming, type StreamingResponse } from './execute-http';
import { streamResponse, type ResponseSink } from './stream-response';
import type { ProxiedRequest } from './proxied';
import type { RequestContext } from './context';
import { Evidence, computedFacts, httpRequestFacts, resolutionFacts, sha256, who } from './evidence';
import { lockedMeanwhile, refuseAfterIntent, refuseHttp, sendFailed } from './refuse';
import {
  approveHttp,
  checkCredentialRules,
  coveringLeases,
  responseScan,
  scanForCovering,
  sendWithSecret,
} from './http-steps';
import { coveringCredentials } from './coverage';
import { pinnedPool, resolveChecked } from './pinned-address';

type Facts = HttpRequestFacts | UncredentialedHttpFacts;

// What the front door knows of the connection.
export interface ProxyDoor {
  // Without a credential: the addresses the request may reach beyond public
  // ones (those the credentials covering its host allow).
  coveredAddresses?: HttpCredentialDef['allow_addresses'];
  // Without a credential: the credentials covering its host (whose values
  // its response is searched for).
  covering?: HttpCredentialDef[];
  // The connecting descendant of `postern run`, as it reported it.
  clientPid?: number | null;
}

// httpRequestFacts reads the request's fields without keeping it, so the
// request is passed as it is (no copy to give it a credential's name): a
// request without one has its credential left out of the facts.
function proxiedFacts(req: ProxiedRequest, bodyHash: string | null): Facts {
  const facts = httpRequestFacts(req as ProxiedRequest & { credential: string }, bodyHash);
  if (req.credential !== null) return { ...facts, via: 'proxy' };
  const { credential: _none, ...uncredentialed } = facts;
  return { ...uncredentialed, via: 'proxy' };
}

export async function runProxied(
  ctx: RequestContext,
  req: ProxiedRequest,
  sink: ResponseSink,
  door: ProxyDoor = {},
): Promise<{ auditSeq: number }> {
  const s = ctx.services;
  s.vault(); // a locked vault refuses the request before any step
  const cfg = s.config();
  const ev: Evidence<Facts> = { requester: who(ctx.identity) };
  try {
    const bodyHash = req.body ? sha256(req.body) : null;
    const request = (ev.request = proxiedFacts(req, bodyHash));
    // 2–3. the credential, its policy and budget (none without one)
    const def = req.credential !== null ? credentialOfKind(s, req.credential, 'http') : null;
    if (def) Object.assign(request, computedFacts(def));
    const credentialed = def ? { def, ...checkCredentialRules(s, def, { ...req, credential: def.name }) } : null;
    // 4. one resolution; every address classified
    const { addresses, pinned } = await resolveChecked(
      s,
      req.target,
      def ? def.allow_addresses : (door.coveredAddresses ?? []),
    );
    const resolution = (ev.resolution = resolutionFacts(addresses));
    // 5. approval, for a credential only; 6. no idempotency key
    let intentEvent: JournalEvent;
    if (credentialed) {
      const { def: d, match } = credentialed;
      const approval = (ev.approval = await approveHttp(ctx, d, match, req, pinned, bodyHash, {
        via: 'proxy',
        proxy_client_pid: door.clientPid ?? null,
      }));
      refuseIfRequesterLeft(ctx);
      s.stores.budgets.take(d.name, d.rate);
      intentEvent = {
        kind: 'http_intent',
        ...ev.requester,
        ...(request as HttpRequestFacts),
        ...resolution,
        ...approval,
      };
    } else {
      intentEvent = { kind: 'http_intent', ...ev.requester, ...(request as UncredentialedHttpFacts), ...resolution };
    }
    if (!credentialed) refuseIfRequesterLeft(ctx);
    // 7. intent, durable before anything leaves the machine
    const intent = await s.journal.record(intentEvent);
    // 8. connect to the checked address, inject (with a credential), send
    const started = Date.now();
    const pool = pinnedPool(s, def?.name ?? null, ctx.identity.process.key, req.target, pinned);
    const scan = responseScan();
    const send = (headers: Record<string, string>, pathAndQuery: string): Promise<StreamingResponse> =>
      sendStreaming(pool, req.target.host, {
        method: req.method,
        pathAndQuery,
        headers,
        body: req.body,
        timeoutMs: cfg.http.timeout,
      });
    let res: StreamingResponse;
    try {
      res = credentialed
        ? await sendWithSecret(
            s,
            credentialed.def,
            credentialed.headers,
            req.target,
            req,
            scan,
            cfg.http.timeout,
            (injected) => send(injected.headers, injected.pathAndQuery),
            await coveringLeases(s, coveringCredentials(s, req.target), req.target, credentialed.def.name),
          )
        : await scanForCovering(s, door.covering ?? [], req.target, scan).then(() =>
            send(
              { ...Object.fromEntries(req.headers), 'accept-encoding': 'identity' },
              req.target.path + req.target.query,
            ),
          );
    } catch (e) {
      scan.release();
      throw await sendFailed(s, intent, e, started);
    }
    // 9. streamed: decoded, redacted, cut; 10. the outcome when it ends
    let streamed;
    try {
      streamed = await streamResponse(
        res,
        {
          passSetCookie: def?.pass_set_cookie ?? false,
          redactor: scan.redactor,
          cap: cfg.http.max_response_body,
          host: req.target.host,
        },
        sink,
      );
    } catch (e) {
      const r = lockedMeanwhile(s, e instanceof Refusal ? e : responseFailure(e, req.target.host));
      throw await refuseAfterIntent(s, intent, r, {
        kind: 'http_outcome',
        intent_seq: intent.seq,
        status: res.status,
        error: r.code,
        maybe_executed: true,
        duration_ms: Date.now() - started,
      });
    } finally {
      scan.release();
    }
    const duration_ms = Date.now() - started;
    // A body cut by a lock (or the daemon stopping) is the lock's doing.
    const cut = streamed.error && lockedMeanwhile(s, streamed.error);
    const outcome = await s.journal.recordOutcome(
      cut
        ? {
            kind: 'http_outcome',
            intent_seq: intent.seq,
            status: streamed.status,
            error: cut.code,
            maybe_executed: true,
            duration_ms,
          }
        : {
            kind: 'http_outcome',
            intent_seq: intent.seq,
            status: streamed.status,
            bytes: streamed.bytes,
            truncated: streamed.truncated,
            redactions: streamed.redactions,
            body_sha256: streamed.bodySha256,
            duration_ms,
          },
    );
    return { auditSeq: outcome.seq };
  } catch (e) {
    if (e instanceof Refusal && e.auditSeq !== undefined) throw e;
    return refuseHttp(s, e, ev);
  }
}
