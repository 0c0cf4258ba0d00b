// How a request's refusal is journaled. Before the intent: an
// `<endpoint>_refused` entry with as much of the request as was known (or,
// beyond audit.refusal_burst a second for one process instance, a count in
// a summary, SPEC §9). After the intent: the outcome entry, saying whether
// the request may have executed. Either way the refusal the agent gets
// carries the entry's seq as audit_seq.
import { Refusal } from '../../shared/errors';
import type {
  HttpOutcome,
  HttpRequestFacts,
  SshOutcome,
  SshRequestFacts,
  UncredentialedHttpFacts,
} from '../../shared/events';
import { RefusalEvent, journalRefusal } from '../audit/refusal-summary';
import type { JournalHead, PipelineServices } from './context';
import { Evidence, known } from './evidence';

function asRefusal(e: unknown): Refusal {
  return e instanceof Refusal ? e : new Refusal('internal_error', 'unexpected error; see the daemon log');
}

// A request withdrawn while it waited says so (SPEC §6.1).
function withdrawnOf(r: Refusal): { withdrawn?: string } {
  const w = r.detail?.['withdrawn'];
  return typeof w === 'string' ? { withdrawn: w } : {};
}

// A request through the proxy may carry no credential (SPEC §11).
export function refuseHttp(
  services: PipelineServices,
  e: unknown,
  ev: Evidence<HttpRequestFacts | UncredentialedHttpFacts>,
): Promise<never> {
  const r = asRefusal(e);
  return journalAndThrow(services, r, ev, { kind: 'http_refused', code: r.code, ...withdrawnOf(r), ...known(ev) });
}

export function refuseSsh(services: PipelineServices, e: unknown, ev: Evidence<SshRequestFacts>): Promise<never> {
  const r = asRefusal(e);
  return journalAndThrow(services, r, ev, { kind: 'ssh_refused', code: r.code, ...withdrawnOf(r), ...known(ev) });
}

// Throws the refusal with the entry's audit_seq (or `summarised`); if the
// journal cannot take it, the refusal stands without one.
async function journalAndThrow(
  services: PipelineServices,
  r: Refusal,
  ev: Evidence<HttpRequestFacts | UncredentialedHttpFacts | SshRequestFacts>,
  event: RefusalEvent,
): Promise<never> {
  const p = ev.requester;
  const refuser = { key: p.instance, pid: p.pid, uid: p.uid, exe: p.exe };
  const detail = await journalRefusal(
    services,
    refuser,
    event,
    ev.request && 'credential' in ev.request ? ev.request.credential : null,
  );
  if (!detail) throw r;
  throw new Refusal(r.code, r.message, { ...(r.detail ?? {}), ...detail });
}

// A failure on the way out while the vault is locked is the lock's doing
// (a lock, or the daemon stopping, closes every upstream connection): said
// so, with whether the request may have reached its target, rather than as
// a failure of the upstream.
export function lockedMeanwhile(services: PipelineServices, r: Refusal): Refusal {
  try {
    services.vault();
    return r;
  } catch (locked) {
    if (!(locked instanceof Refusal)) return r;
    const sent =
      r.maybeExecuted === false
        ? 'nothing was sent'
        : 'it may have reached its target: check its effect before repeating it';
    return new Refusal(
      locked.code,
      `the vault was locked while this request was on its way (${sent}); ${locked.message}`,
      {
        maybe_executed: r.maybeExecuted ?? true,
      },
    );
  }
}

// A failure after the intent: its outcome is journaled (durable; if the
// journal cannot take it, the intent's seq is given) and the refusal
// returned with that audit_seq, for the caller to throw.
export async function refuseAfterIntent(
  services: PipelineServices,
  intent: JournalHead,
  r: Refusal,
  outcome: HttpOutcome | SshOutcome,
): Promise<Refusal> {
  const out = await services.journal.record(outcome).catch(() => null);
  return new Refusal(r.code, r.message, { ...(r.detail ?? {}), audit_seq: out?.seq ?? intent.seq });
}

// An HTTP request that failed on its way or before its response head: the
// outcome journaled with whether it may have executed.
export function sendFailed(
  services: PipelineServices,
  intent: JournalHead,
  e: unknown,
  started: number,
): Promise<Refusal> {
  const r = lockedMeanwhile(
    services,
    e instanceof Refusal ? e : new Refusal('upstream_error', 'the request failed; see the daemon log'),
  );
  return refuseAfterIntent(services, intent, r, {
    kind: 'http_outcome',
    intent_seq: intent.seq,
    error: r.code,
    maybe_executed: r.maybeExecuted,
    duration_ms: Date.now() - started,
  });
}

// The request was sent and answered, but its outcome could not be
// journaled: nothing of the response is released (the journal could not
// show what was), and the agent is told that it executed, under its
// intent's seq, the one entry that exists.
export function outcomeNotJournaled(intent: JournalHead, e: unknown, answered: string): Refusal {
  const why = e instanceof Refusal ? String(e.detail?.['errno'] ?? e.code) : 'error';
  return new Refusal(
    'audit_unavailable',
    `the request executed (${answered}) but its outcome could not be journaled (${why}); the response is withheld. Do not repeat it before checking its effect; a human must free space for the journal or fix its disk (see the daemon log)`,
    { audit_seq: intent.seq, maybe_executed: true },
  );
}
