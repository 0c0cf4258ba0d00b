// Redaction of a body that arrives in pieces (the proxy front door streams
// responses, SPEC §11): the same replacements as redact() over the whole
// body, and the same cut, emitted as soon as they are certain. A position is
// decided once maxMatchLength bytes follow it (no occurrence is longer, and
// a match reads nothing before its start), so at most maxMatchLength − 1
// bytes are ever held back; and sooner when its scan read nothing beyond the
// bytes that have arrived, so only what may begin an occurrence waits.
import { AMPERSAND, BACKSLASH, MIN_FORM, PERCENT, PLUS } from './forms';
import { NONE } from './match';
import { longestAt, markOf, mayStartAt, scanFrom, type Redactor } from './redactor';

export interface StreamRedactor {
  // What may be sent now for this piece of the body (possibly nothing).
  // `last`: no input follows, so the tail is decided now (end() then gives
  // nothing); a piece pushed after it throws rather than be scanned apart
  // from what came before.
  push(chunk: Buffer, last?: boolean): Buffer;
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
  let mark: Buffer | null = null; // made at the first occurrence
  const hold = r ? r.maxMatchLength : 0;
  let held: Buffer = Buffer.alloc(0); // input from position `base`, not yet decided
  let base = 0; // input position of held[0]
  let received = 0;
  let emitted = 0;
  let count = 0;
  let overflow = false; // the output would have grown beyond the cut
  let ended = false; // the last piece was pushed
  // `held` lives at the end of `own` (allocated here, with room to grow)
  // when `ownEnd` is its end: a piece is then appended in place rather
  // than the whole of `held` copied at every piece.
  let own: Buffer | null = null;
  let ownEnd = 0;
  // The tail is tried again only once this much input has arrived: a
  // position whose match read to the end of what had arrived is retried
  // when what is undecided has grown by half (at least a byte), so pieces
  // of a byte each over a long near-match cost a bounded number of scans
  // of it, not one per piece.
  let tailWaitsFor = 0;

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

  const append = (chunk: Buffer): Buffer => {
    if (held.length === 0) {
      own = null;
      return chunk;
    }
    const inPlace =
      own !== null && held.buffer === own.buffer && held.byteOffset + held.length === own.byteOffset + ownEnd;
    if (inPlace && own !== null && ownEnd + chunk.length <= own.length) {
      chunk.copy(own, ownEnd);
      ownEnd += chunk.length;
      return own.subarray(ownEnd - held.length - chunk.length, ownEnd);
    }
    const size = held.length + chunk.length;
    own = Buffer.allocUnsafe(Math.max(4096, size * 2));
    held.copy(own, 0);
    chunk.copy(own, held.length);
    ownEnd = size;
    return own.subarray(0, size);
  };

  // Decide what can be decided of `held` (start positions stop at the
  // cut), emitting what it gives.
  const decide = (last: boolean): Buffer => {
    const limit = cut - base; // start positions from here on are beyond the cut
    const found: [number, number][] = [];
    let next = Math.min(held.length, limit);
    if (r) {
      // Certain: positions with maxMatchLength bytes after them, or all at the end.
      const sure = last ? held.length - MIN_FORM + 1 : held.length - hold + 1;
      const scan = scanFrom(r, held, 0, Math.min(sure, limit));
      found.push(...scan.found);
      next = last ? Math.max(scan.next, next) : scan.next;
      // Then, one by one, those whose match read nothing beyond what has
      // arrived: text that cannot be the start of an occurrence goes out
      // now, so an event stream is not held back a whole match length.
      if (!last && base + held.length >= tailWaitsFor) {
        const until = Math.min(held.length, limit);
        next = settleTail(r, held, next, until, found);
        if (next < until) tailWaitsFor = base + held.length + Math.max(1, Math.ceil((held.length - next) / 2));
      }
    }
    const parts: Buffer[] = [];
    let from = 0;
    for (const [start, end] of found) {
      mark ??= markOf(r as Redactor);
      parts.push(held.subarray(from, start), r?.markFor ? r.markFor(held, start, end) : mark);
      count += 1;
      from = end;
    }
    // Decided bytes that are not part of an occurrence go out as they are;
    // an occurrence that starts before the cut is replaced whole.
    const plain = Math.max(from, Math.min(next, limit, held.length));
    if (plain > from) parts.push(held.subarray(from, plain));
    const consumed = Math.max(from, Math.min(next, held.length));
    held = held.subarray(consumed);
    base += consumed;
    return capped(parts);
  };

  return {
    push(chunk, last = false) {
      if (ended) {
        if (chunk.length === 0) return Buffer.alloc(0);
        throw new Error('a piece of the body arrived after the last one');
      }
      ended = last;
      received += chunk.length;
      // Once the output is full, input before the cut is still scanned:
      // its occurrences are counted, as redact() counts them.
      if (base >= cut) return Buffer.alloc(0);
      held = append(chunk);
      return decide(last);
    },
    end() {
      if (base >= cut) return Buffer.alloc(0);
      return decide(true);
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

// Positions from `i` to `until` decided while the scan at each reads only
// bytes that have arrived (a read beyond them could change its result):
// their occurrences are added to `found`; the first undecided is returned.
// The reads are watched through a Proxy only where the forms are tried:
// given to the scan's own loop, it made every later scan of the body (the
// loop that runs over each byte) several times slower.
function settleTail(r: Redactor, data: Buffer, i: number, until: number, found: [number, number][]): number {
  let readBeyond = false;
  const length = data.length;
  const watched = new Proxy(data, {
    get(target, key) {
      if (typeof key === 'string' && Number(key) >= length) readBeyond = true;
      return Reflect.get(target, key) as unknown;
    },
  });
  while (i < until) {
    // A byte no form starts with, raw or as an escape, starts nothing
    // whatever follows it (the scan would still read the next two).
    if (cannotStart(r, data[i] as number)) {
      i += 1;
      continue;
    }
    // The scan's look-up reads the next two bytes.
    if (i + 2 >= length) break;
    if (!mayStartAt(r.pairs, data, i)) {
      i += 1;
      continue;
    }
    readBeyond = false;
    const end = longestAt(r, watched, i);
    if (readBeyond) break;
    if (end > i) {
      found.push([i, end]);
      i = end;
    } else {
      i += 1;
    }
  }
  return i;
}

function cannotStart(r: Redactor, c: number): boolean {
  return r.byFirst[c] === NONE && c !== PERCENT && c !== BACKSLASH && c !== AMPERSAND && c !== PLUS;
}
