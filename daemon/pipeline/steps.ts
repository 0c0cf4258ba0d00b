// Steps that POST /v1/http and POST /v1/ssh take alike: how the requester
// is described in the journal, how a refusal is journaled, the DNS servers
// to ask, and approval (a covering session, else a human's decision).
import { createHash } from 'node:crypto';
import { Refusal } from '../../shared/errors';
import { DnsServer, parseDnsServer } from '../../shared/config';
import type { Approve } from '../../shared/credential';
import type { CardAction } from '../../shared/admin-protocol';
import type { Controller } from '../controller';
import type { Identity } from '../identity/identify';
import { stillRunning } from '../identity/identify';
import type { Slot } from '../stores/budgets';
import type { Card, Decision } from '../sessions/approvals';
import { journalRefusal } from '../audit/refusal-summary';

export interface RequestContext {
  controller: Controller;
  identity: Identity;
  signal: AbortSignal;
  // The request's http.max_concurrent slot, given back while it waits for
  // a human (pending approvals have their own budget, daemon.max_pending).
  slot?: Slot;
  // Told when the request starts to wait for a human (the waiting notice).
  onWaiting?: (card: Card) => void;
}

// What the journal says about the requester, on every entry of a request.
export function who(identity: Identity): Record<string, unknown> {
  const p = identity.process;
  return { pid: p.pid, uid: p.uid, exe: p.exe, instance: p.key };
}

export function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

// Journals the refusal (kind `<endpoint>_refused`) and gives it the entry's
// audit_seq; beyond audit.refusal_burst a second for this process instance
// it is counted in a summary instead (SPEC §9) and the reply says
// summarised, with the seq of the process's last refusal journaled in
// full. If the journal cannot take it, the refusal stands without one.
export async function refuse(
  c: Controller,
  endpoint: 'http' | 'ssh',
  e: unknown,
  facts: Record<string, unknown>,
): Promise<never> {
  const r = e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
  const kind = `${endpoint}_refused`;
  const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
  const refuser = {
    key: str(facts['instance']) ?? `pid:${String(facts['pid'])}`,
    pid: num(facts['pid']),
    uid: num(facts['uid']),
    exe: str(facts['exe']),
  };
  // A request withdrawn while it waited says so (SPEC §6.1).
  const withdrawn = r.detail?.['withdrawn'] !== undefined ? { withdrawn: r.detail['withdrawn'] } : {};
  const detail = await journalRefusal(c, refuser, kind, r.code, str(facts['credential']), {
    kind,
    code: r.code,
    ...withdrawn,
    ...facts,
  });
  if (!detail) throw r;
  throw new Refusal(r.code, r.message, { ...(r.detail ?? {}), ...detail });
}

// The config holds them validated and normalised ("ip:port").
export function dnsServers(list: readonly string[]): DnsServer[] {
  return list.map((text) => {
    const r = parseDnsServer(text);
    if (!r.ok) throw new Refusal('bad_config', `http.dns_servers: ${text} is not usable`);
    return r.value;
  });
}

// "session:<id>" when a session covers (or was just granted), "once" for an
// allow-once decision. The card shows `action`.
export async function approve(
  ctx: RequestContext,
  credential: string,
  mode: Approve,
  action: CardAction,
): Promise<string> {
  const c = ctx.controller;
  if (mode === 'session') {
    const s = c.sessions.covering(ctx.identity, credential);
    if (s) return `session:${s.id}`;
  }
  // Taken again once decided, even when the limit was reached meanwhile: a
  // decision a human made is never thrown away as busy.
  ctx.slot?.suspend();
  let decision: Decision;
  try {
    decision = await c.approvals.ask(
      ctx.identity,
      credential,
      mode,
      action,
      c.config.config.daemon.approval_timeout,
      ctx.signal,
      ctx.onWaiting,
    );
  } finally {
    ctx.slot?.resume();
  }
  // The requester must still be the same process instance now.
  if (!stillRunning(ctx.identity.process))
    throw new Refusal(
      'unidentified_peer',
      'the requesting process changed while it waited for approval; retry from a running process',
    );
  if (decision.kind === 'deny')
    throw new Refusal('denied_by_user', 'a human denied this request; do not retry it unchanged');
  if (decision.kind === 'once') return 'once';
  const root = [ctx.identity.process, ...ctx.identity.ancestors].find((p) => p.key === decision.rootKey)!;
  // Journaled before it is stored, so the journal knows every session that
  // ever covered a request; a lock meanwhile ends the grant with the unlock
  // it was made under.
  const unlocked = c.requireUnlocked();
  const s = c.sessions.make(credential, root, c.config.config.daemon.session_ttl);
  await c.record({
    kind: 'session_start',
    session: s.id,
    credential,
    root_pid: root.pid,
    root_exe: root.exe,
    root_instance: root.key,
    expires_at: new Date(s.expiresAt).toISOString(),
  });
  if (c.requireUnlocked() !== unlocked)
    throw new Refusal(
      'vault_locked',
      'the vault was locked while this session was being granted; a human must run `postern unlock`',
    );
  c.sessions.add(s);
  return `session:${s.id}`;
}
