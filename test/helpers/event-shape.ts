// Every event of a decrypted journal (`postern audit show --json`) against
// shared/events.ts: a known kind, only the fields its type names, in the
// order written, each a JSON scalar, a list of them or a list of flat
// records. The helpers that read journals for other tests check this too,
// so every journal a test produces is held to the typed events.
import { EVENT_FIELDS, EventKind } from '../../shared/events';

const ENVELOPE = new Set(['seq', 'time', 'type', 'kind']);

function isScalar(v: unknown): boolean {
  return v === null || ['string', 'number', 'boolean'].includes(typeof v);
}

function isField(v: unknown): boolean {
  if (isScalar(v)) return true;
  if (!Array.isArray(v)) return false;
  return v.every(
    (x) =>
      isScalar(x) ||
      (typeof x === 'object' && x !== null && !Array.isArray(x) && Object.values(x as object).every(isScalar)),
  );
}

export function eventShapeProblems(entries: readonly Record<string, unknown>[]): string[] {
  const problems: string[] = [];
  for (const e of entries) {
    if (e['type'] !== 'event' || e['undecryptable'] === true) continue;
    const at = `entry ${String(e['seq'])}`;
    const kind = e['kind'];
    if (typeof kind !== 'string' || !Object.prototype.hasOwnProperty.call(EVENT_FIELDS, kind)) {
      problems.push(`${at}: unknown kind ${JSON.stringify(kind)}`);
      continue;
    }
    const order = EVENT_FIELDS[kind as EventKind];
    let last = -1;
    for (const [k, v] of Object.entries(e)) {
      if (ENVELOPE.has(k)) continue;
      const i = order.indexOf(k);
      if (i < 0) problems.push(`${at} (${kind}): field ${k} is not one of its type's`);
      else if (i < last) problems.push(`${at} (${kind}): field ${k} is out of order`);
      else last = i;
      if (!isField(v)) problems.push(`${at} (${kind}): field ${k} is not a JSON scalar or a list of them`);
    }
  }
  return problems;
}

export function assertEventShapes(entries: readonly Record<string, unknown>[]): void {
  const problems = eventShapeProblems(entries);
  if (problems.length > 0) throw new Error(`journal events that are not typed events: ${problems.join('; ')}`);
}
