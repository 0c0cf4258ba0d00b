// Redaction of a body that arrives in pieces (the proxy front door streams
// responses, SPEC §11): the same replacements as redact() over the whole
// body, and the same cut, emitted as soon as they are certain. A position is
// decided once maxMatchLength bytes follow it (no occurrence is longer, and
// a match reads nothing before its start), so at most maxMatchLength − 1
// bytes are ever held back.
import { MIN_FORM } from './forms';
import { scanFrom, type Redactor } from './redactor';

export interface StreamRedactor {
  // What may be sent now for this piece of the body (possibly nothing).
  push(chunk: Buffer): Buffer;
  // The rest, at the end of the body.
  end(): Buffer;
  // Replacements so far.
  readonly count: number;
  // True once the cut is reached: nothing more will be emitted, and input
  // beyond it only tells whether the body was truncated.
  readonly full: boolean;
  // True when something was left out to respect the cut (as redact()'s cut).
  readonly truncated: boolean;
}

export function streamRedactor(r: Redactor | null, cut = Infinity): StreamRedactor {
  const mark = r ? Buffer.from(`[REDACTED:${r.label}]`) : Buffer.alloc(0);
  const hold = r ? r.maxMatchLength : 0;
  let held: Buffer = Buffer.alloc(0); // input from position `base`, not yet decided
  let base = 0; // input position of held[0]
  let received = 0;
  let emitted = 0;
  let count = 0;
  let overflow = false; // the output would have grown beyond the cut

  // Output kept to at most `cut` bytes in all.
  const capped = (parts: Buffer[]): Buffer => {
    const out = Buffer.concat(parts);
    const room = cut - emitted;
    if (out.length > room) {
      overflow = true;
      emitted = cut;
      return out.subarray(0, room);
    }
    emitted += out.length;
    return out;
  };

  // Decide the positions of `held` before `until` (input positions also
  // stop at the cut), emitting what they give.
  const decide = (until: number, last: boolean): Buffer => {
    const keep = Math.min(until, cut - base); // relative to held
    const parts: Buffer[] = [];
    let from = 0;
    if (r && keep > 0) {
      for (const [start, end] of scanFrom(r, held, 0, last ? Math.min(keep, held.length - MIN_FORM + 1) : keep).found) {
        parts.push(held.subarray(from, start), mark);
        count += 1;
        from = end;
      }
    }
    // Decided bytes that are not part of an occurrence go out as they are;
    // an occurrence that starts before `keep` is replaced whole.
    const stop = Math.min(Math.max(from, keep), held.length);
    if (stop > from) parts.push(held.subarray(from, stop));
    held = held.subarray(stop);
    base += stop;
    return capped(parts);
  };

  return {
    push(chunk) {
      received += chunk.length;
      if (base >= cut || emitted >= cut) return Buffer.alloc(0);
      held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      return decide(held.length - hold + 1, false);
    },
    end() {
      if (base >= cut || emitted >= cut) return Buffer.alloc(0);
      return decide(held.length, true);
    },
    get count() {
      return count;
    },
    get full() {
      return base >= cut || emitted >= cut;
    },
    get truncated() {
      return overflow || received > cut;
    },
  };
}
