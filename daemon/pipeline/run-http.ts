// POST /v1/http: the steps of SPEC §6.1, in order, each a function from the
// files beside this one. The order lives here and only here. A refusal at
// any step is journaled and carries its audit_seq; the secret is opened only
// at step 8, after everything before it passed.
import { createHash } from 'node:crypto';
import { Refusal } from '../../shared/errors';
import { DnsServer, parseDnsServer } from '../../shared/config';
import type { HttpCredentialDef } from '../../shared/credential';
import type { Controller } from '../controller';
import type { Identity } from './identify';
import { stillRunning } from './identify';
import { validateHttpRequest, parseJsonBody, HttpRequest } from './validate';
import { checkPolicy, checkHeadersForCredential, checkQueryForCredential } from './policy';
import { resolveTarget } from './resolve';
import { assertAllAllowed } from './classify';
import { formatOrigin } from './target';
import { PinnedPools } from './pin';
import { inject } from './inject';
import { sendPinned, RawResponse } from './execute-http';
import { redact, redactionPatterns, maxPatternLength } from './redact';

export interface HttpContext {
  controller: Controller;
  pools: PinnedPools;
  identity: Identity;
  signal: AbortSignal;
}

// What the journal says about the requester, on every entry of a request.
function who(identity: Identity): Record<string, unknown> {
  const p = identity.process;
  return { pid: p.pid, uid: p.uid, exe: p.exe, instance: p.key };
}

function requestFacts(req: HttpRequest): Record<string, unknown> {
  const t = req.target;
  return {
    credential: req.credential,
    method: req.method,
    scheme: t.scheme,
    host: t.host,
    port: t.port,
    path: t.path,
    body_bytes: req.body?.length ?? 0,
    body_sha256: req.body ? createHash('sha256').update(req.body).digest('hex') : null,
  };
}

async function refuse(c: Controller, e: unknown, facts: Record<string, unknown>): Promise<never> {
  const r = e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
  try {
    const head = await c.record({ kind: 'http_refused', code: r.code, ...facts });
    throw new Refusal(r.code, r.message, { ...(r.detail ?? {}), audit_seq: head.seq });
  } catch (e2) {
    if (e2 instanceof Refusal && e2.detail?.['audit_seq'] !== undefined) throw e2;
    // The journal could not record the refusal: still a refusal.
    throw r;
  }
}

// The config holds them validated and normalised ("ip:port").
function dnsServers(list: readonly string[]): DnsServer[] {
  return list.map((text) => {
    const r = parseDnsServer(text);
    if (!r.ok) throw new Refusal('bad_config', `http.dns_servers: ${text} is not usable`);
    return r.value;
  });
}

function isText(contentType: string | undefined, body: Buffer): boolean {
  const ct = (contentType ?? '').toLowerCase();
  const textual = ct.startsWith('text/') || /json|xml|javascript|x-www-form-urlencoded|charset=/.test(ct);
  if (!textual && ct !== '') return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(body);
    return true;
  } catch {
    return false;
  }
}

// `body` is the raw request body: a body that is not JSON is refused inside
// the pipeline, so that refusal is journaled and carries its audit_seq too.
export async function runHttp(ctx: HttpContext, body: Buffer): Promise<Record<string, unknown>> {
  const c = ctx.controller;
  const vault = c.requireUnlocked();
  const cfg = c.config.config;
  let facts: Record<string, unknown> = { ...who(ctx.identity) };
  try {
    // 1. validate
    const req = validateHttpRequest(parseJsonBody(body), { maxRequestBody: cfg.http.max_request_body, maxTimeout: cfg.http.max_timeout });
    facts = { ...facts, ...requestFacts(req) };
    // 2. the credential exists
    const stored = vault.credential(req.credential);
    if (!stored) throw new Refusal('unknown_credential', `no credential named "${req.credential}"; see GET /v1/credentials`);
    if (stored.entry.kind !== 'http') throw new Refusal('bad_request', `credential "${req.credential}" is an ${stored.entry.kind} credential; use POST /v1/ssh`);
    const def = stored.entry.definition as unknown as HttpCredentialDef;
    // 3. policy
    const match = checkPolicy(def, req);
    const headers = checkHeadersForCredential(req, def);
    checkQueryForCredential(req, def);
    // 4. one resolution; every address classified
    const resolution = await resolveTarget(req.target.host.replace(/^\[|\]$/g, ''), req.target.hostKind, { dnsServers: dnsServers(cfg.http.dns_servers), timeoutMs: Math.min(cfg.http.timeout, 10_000) });
    assertAllAllowed(req.target.host, resolution.addresses.map((a) => a.address), def.allow_addresses);
    const pinned = resolution.addresses[0]!;
    facts = { ...facts, address: pinned.address, addresses: resolution.addresses.map((a) => a.address) };
    // 5. approval: a covering session, else a human's decision
    const approval = await approve(ctx, req, def, match.approve, pinned.address);
    facts = { ...facts, approval };
    // 7. intent, durable before anything leaves the machine
    c.journalHandle.assertSameFile();
    const intent = await c.record({ kind: 'http_intent', ...facts });
    // 8–9. connect to the checked address, inject, send, read
    const started = Date.now();
    const timeoutMs = req.timeoutMs ?? cfg.http.timeout;
    const pool = ctx.pools.get({ credential: def.name, origin: formatOrigin(req.target), address: pinned.address, family: pinned.family });
    let raw: RawResponse;
    let patterns: Buffer[] = [];
    try {
      raw = await vault.withCredentialSecret(def.name, async (secret) => {
        const injected = inject(def, secret, headers, req.target);
        try {
          patterns = def.redact_response ? redactionPatterns(injected.needles) : [];
          const readLimit = cfg.http.max_response_body + maxPatternLength(patterns);
          return await sendPinned(pool, req.target.host, { method: req.method, pathAndQuery: injected.pathAndQuery, headers: injected.headers, body: req.body, timeoutMs, readLimit });
        } finally {
          for (const n of injected.needles) n.fill(0);
        }
      });
    } catch (e) {
      const r = e instanceof Refusal ? e : new Refusal('upstream_error', 'the request failed; see the daemon log');
      const out = await c.record({ kind: 'http_outcome', intent_seq: intent.seq, error: r.code, maybe_executed: r.detail?.['maybe_executed'] ?? null, duration_ms: Date.now() - started }).catch(() => null);
      throw new Refusal(r.code, r.message, { ...(r.detail ?? {}), audit_seq: out?.seq ?? intent.seq });
    }
    const reply = shapeResponse(raw, def, patterns, cfg.http.max_response_body);
    for (const p of patterns) p.fill(0);
    // 10. outcome
    const outcome = await c.record({
      kind: 'http_outcome', intent_seq: intent.seq, status: raw.status, bytes: raw.body.length, truncated: reply['truncated'],
      redactions: reply['redactions'], body_sha256: createHash('sha256').update(raw.body).digest('hex'), duration_ms: Date.now() - started,
    });
    // 11. reply
    return { ...reply, target: { host: req.target.host, address: pinned.address, port: req.target.port }, audit_seq: outcome.seq };
  } catch (e) {
    if (e instanceof Refusal && e.detail?.['audit_seq'] !== undefined) throw e;
    return refuse(c, e, facts);
  }
}

async function approve(ctx: HttpContext, req: HttpRequest, def: HttpCredentialDef, mode: 'session' | 'each-use', address: string): Promise<string> {
  const c = ctx.controller;
  if (mode === 'session') {
    const s = c.sessions.covering(ctx.identity, def.name);
    if (s) return `session:${s.id}`;
  }
  const t = req.target;
  const decision = await c.approvals.ask(ctx.identity, def.name, mode, {
    kind: 'http', method: req.method, scheme: t.scheme, host: t.host, address, port: t.port, path: t.path, query: t.query,
    body_bytes: req.body?.length ?? 0, body_sha256: req.body ? createHash('sha256').update(req.body).digest('hex') : null,
  }, c.config.config.daemon.approval_timeout, ctx.signal);
  // The requester must still be the same process instance now.
  if (!stillRunning(ctx.identity.process)) throw new Refusal('unidentified_peer', 'the requesting process changed while it waited for approval; retry from a running process');
  if (decision.kind === 'deny') throw new Refusal('denied_by_user', 'a human denied this request; do not retry it unchanged');
  if (decision.kind === 'once') return 'once';
  const root = [ctx.identity.process, ...ctx.identity.ancestors].find((p) => p.key === decision.rootKey)!;
  const s = c.sessions.add(def.name, root, c.config.config.daemon.session_ttl);
  await c.record({ kind: 'session_start', session: s.id, credential: def.name, root_pid: root.pid, root_exe: root.exe, root_instance: root.key, expires_at: new Date(s.expiresAt).toISOString() });
  return `session:${s.id}`;
}

function shapeResponse(raw: RawResponse, def: HttpCredentialDef, patterns: Buffer[], cap: number): Record<string, unknown> {
  let redactions = 0;
  const scrub = (b: Buffer): Buffer => {
    if (patterns.length === 0) return b;
    const r = redact(b, patterns, def.name);
    redactions += r.count;
    return r.data;
  };
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(raw.headers)) {
    if (name === 'set-cookie' && !def.pass_set_cookie) continue;
    headers[name] = Array.isArray(value) ? value.map((v) => scrub(Buffer.from(v, 'latin1')).toString('latin1')) : scrub(Buffer.from(value, 'latin1')).toString('latin1');
  }
  // Redact first (over the bytes read beyond the cap), then truncate.
  let body = scrub(raw.body);
  let truncated = !raw.complete;
  if (body.length > cap) {
    body = body.subarray(0, cap);
    truncated = true;
  }
  const location = headers['location'];
  const redirect = raw.status >= 300 && raw.status < 400 && typeof location === 'string' ? { location } : null;
  const text = isText(typeof headers['content-type'] === 'string' ? headers['content-type'] : undefined, body);
  return {
    status: raw.status,
    headers,
    body: text ? body.toString('utf8') : body.toString('base64'),
    body_encoding: text ? 'utf8' : 'base64',
    truncated,
    redactions,
    redirect,
  };
}
