// What a batch of journal lines is made of: the cursor of the chain, the
// draft a batch builds on a copy of it, and the entries the writer puts
// into a draft (events, vault states, event keys), each encoded and
// checked against MAX_LINE_BYTES.
import {
  EntryBody,
  EventPayload,
  MAX_LINE_BYTES,
  encodeEntry,
  encryptEvent,
  entryHash,
} from '../../shared/audit-format';
import { randomBytes, sealTo, wipe } from '../../shared/crypto';
import { Refusal } from '../../shared/errors';
import * as refuse from './refusals';
import { VaultState } from './segment-scan';

export interface Head {
  seq: number;
  hash: string;
}

// Where the chain stands. The committed cursor describes durable bytes only;
// a batch works on a copy and commits it after its fdatasync.
export interface Cursor {
  segment: number;
  offset: number; // bytes in the current segment
  seq: number;
  hash: string;
  sinceCheckpoint: number;
  vault: VaultState | null;
  keyId: number;
  key: Buffer; // the event key named by keyId
  headerEnd: number; // a segment may rotate only once it holds more than its opening entries
}

// The lines of a batch not yet written, and whom to tell once they are durable.
export class Draft<P> {
  readonly work: Cursor;
  lines: Buffer[] = [];
  settled: Array<[P, Head | null]> = [];
  constructor(from: Cursor) {
    this.work = { ...from };
  }
}

export type Encoded = { line: Buffer; seq: number; body: EntryBody };

const EVENT_KEY_BYTES = 32;
const NEWLINE = Buffer.from('\n');

// The next entry after the cursor, built by `build(seq, prev)`.
export function encode(w: Cursor, now: Date, build: (seq: number, prev: string) => EntryBody, kind?: string): Encoded {
  const seq = w.seq + 1;
  const body = build(seq, w.hash);
  const line = encodeEntry(seq, w.hash, now.toISOString(), body);
  // Readers stop at MAX_LINE_BYTES; the "\n" counts.
  if (line.length + 1 > MAX_LINE_BYTES)
    throw itemError(refuse.tooLong(kind ?? body.type, line.length + 1, MAX_LINE_BYTES));
  return { line, seq, body };
}

export function encodeEvent(w: Cursor, now: Date, payload: EventPayload): Encoded {
  return encode(
    w,
    now,
    (seq, prev) => ({ type: 'event', key_id: w.keyId, ...encryptEvent(w.key, seq, prev, payload) }),
    payload.kind,
  );
}

// Adds an encoded line to the draft and moves its cursor past it.
export function accept<P>(d: Draft<P>, enc: Encoded): Head {
  const w = d.work;
  const hash = entryHash(enc.line);
  d.lines.push(enc.line, NEWLINE);
  w.seq = enc.seq;
  w.hash = hash;
  w.offset += enc.line.length + 1;
  w.sinceCheckpoint = enc.body.type === 'checkpoint' ? 0 : w.sinceCheckpoint + 1;
  if (enc.body.type === 'vault')
    w.vault = { generation: enc.body.generation, vault_hash: enc.body.vault_hash, seq: enc.seq };
  return { seq: enc.seq, hash };
}

// A fresh event key, sealed to the audit box key; events after it use it.
// `committed` is the key of the durable cursor, which stays until the
// draft is committed.
export function acceptKey<P>(d: Draft<P>, now: Date, boxKey: Buffer, committed: Buffer): void {
  const key = randomBytes(EVENT_KEY_BYTES);
  const head = accept(
    d,
    encode(d.work, now, (seq) => ({ type: 'key', key_id: seq, sealed: sealTo(key, boxKey).toString('base64') })),
  );
  if (d.work.key !== committed) wipe(d.work.key); // an earlier uncommitted key of this draft
  d.work.key = key;
  d.work.keyId = head.seq;
}

// Restates the latest vault state (at the start of a segment).
export function acceptVault<P>(d: Draft<P>, now: Date): void {
  const v = d.work.vault as VaultState;
  accept(
    d,
    encode(d.work, now, () => ({ type: 'vault', generation: v.generation, vault_hash: v.vault_hash })),
  );
}

// Errors that concern one append only (its payload), not the journal.
const ITEM_ERROR = Symbol('journal item error');
function itemError(e: Refusal): Refusal {
  return Object.assign(e, { [ITEM_ERROR]: true });
}
export function isItemError(e: unknown): boolean {
  return e instanceof TypeError || e instanceof RangeError || (typeof e === 'object' && e !== null && ITEM_ERROR in e);
}
