// The audit journal's entry format (docs/audit-format.md), shared by the
// daemon's writer, `postern audit verify|head|show` and the tests. One entry
// is one line: a JSON object with its keys in the order given here, then
// "\n". An entry's hash is BLAKE2b-256 of its line without the "\n"; each
// entry names the previous entry's hash (`prev`), so the lines form a chain.
import { aeadDecrypt, aeadEncrypt, blake2b, randomBytes, sodiumReady, AEAD_NONCE_BYTES } from './crypto';

export const AUDIT_VERSION = 1;
export const GENESIS_PREV = '0'.repeat(64);
// Lines longer than this are not entries; readers stop at it without
// buffering more (bounded memory whatever the file holds).
export const MAX_LINE_BYTES = 64 * 1024;
// The longest segment file the writer makes: daemon.audit_segment_size is
// at most 1 GiB (shared/units.ts MAX_SIZE_BYTES), a segment moves on before
// an entry would take it past that, and only its closing checkpoint (one
// line) may follow. Readers that judge a journal read no further into a
// file: what lies beyond cannot be a journal's, however long (a sparse file
// of terabytes costs no disk).
export const MAX_SEGMENT_FILE_BYTES = 1024 ** 3 + 2 * MAX_LINE_BYTES;
// A checkpoint is written at least this often (SPEC §9: every 64 entries).
export const CHECKPOINT_EVERY = 64;
export const CHECKPOINT_CONTEXT = 'postern-audit-checkpoint-v1';

export type EntryType = 'genesis' | 'segment' | 'key' | 'event' | 'vault' | 'checkpoint' | 'repair' | 'signer';

interface Common {
  v: 1;
  seq: number;
  prev: string;
  time: string;
}

// seq 1, first line of segment 0; written by `postern init`.
export interface GenesisEntry extends Common {
  type: 'genesis';
  journal_id: string;
  sign_pub: string;
  box_pub: string;
}
// first line of every later segment; chains from the last line of the previous one.
export interface SegmentEntry extends Common {
  type: 'segment';
  segment: number;
}
// a fresh symmetric key for the events that follow, sealed to the audit box key.
export interface KeyEntry extends Common {
  type: 'key';
  key_id: number;
  sealed: string;
}
// an encrypted event (payload: EventPayload as JSON).
export interface EventEntry extends Common {
  type: 'event';
  key_id: number;
  nonce: string;
  ct: string;
}
// a vault write: clear so that rollback can be checked without keys.
export interface VaultEntry extends Common {
  type: 'vault';
  generation: number;
  vault_hash: string;
}
// a signature over the head (the entry before this one).
export interface CheckpointEntry extends Common {
  type: 'checkpoint';
  head_seq: number;
  head: string;
  sign_pub: string;
  sig: string;
}
// a torn last write was cut off at start-up.
export interface RepairEntry extends Common {
  type: 'repair';
  cut_bytes: number;
  at_offset: number;
}
// the audit signing key changes to sign_pub; the checkpoint right after
// this entry is signed by the key it replaces, which vouches for the change.
export interface SignerEntry extends Common {
  type: 'signer';
  sign_pub: string;
}

export type Entry =
  GenesisEntry | SegmentEntry | KeyEntry | EventEntry | VaultEntry | CheckpointEntry | RepairEntry | SignerEntry;

// Key order of each type, after the common keys. Encoding writes exactly
// these keys in this order; decoding refuses anything else.
export const ENTRY_KEYS: Readonly<Record<EntryType, readonly string[]>> = {
  genesis: ['journal_id', 'sign_pub', 'box_pub'],
  segment: ['segment'],
  key: ['key_id', 'sealed'],
  event: ['key_id', 'nonce', 'ct'],
  vault: ['generation', 'vault_hash'],
  checkpoint: ['head_seq', 'head', 'sign_pub', 'sig'],
  repair: ['cut_bytes', 'at_offset'],
  signer: ['sign_pub'],
};
const COMMON_KEYS = ['v', 'seq', 'prev', 'time', 'type'] as const;
// The full key list of each type, made once (decoding runs for every line read).
const ALL_KEYS = Object.fromEntries(
  Object.entries(ENTRY_KEYS).map(([t, keys]) => [t, [...COMMON_KEYS, ...keys]]),
) as unknown as Record<EntryType, readonly string[]>;

// What an event says, before encryption. Never a secret: names, codes,
// hashes, sizes, addresses.
export interface EventPayload {
  kind: string;
  [field: string]: unknown;
}

export type EntryBody<T extends Entry = Entry> = T extends Entry ? Omit<T, keyof Common> : never;

export function encodeEntry(seq: number, prev: string, time: string, body: EntryBody): Buffer {
  return Buffer.from(canonicalText(seq, prev, time, body), 'utf8');
}

function canonicalText(seq: number, prev: string, time: string, body: EntryBody): string {
  const obj: Record<string, unknown> = { v: AUDIT_VERSION, seq, prev, time, type: body.type };
  const src = body as unknown as Record<string, unknown>;
  for (const k of ENTRY_KEYS[body.type]) obj[k] = src[k];
  return JSON.stringify(obj);
}

// The hash of a line (without its "\n"), hex. Requires sodiumReady().
export function entryHash(line: Uint8Array): string {
  return blake2b(line, 32).toString('hex');
}

export type DecodeResult = { ok: true; entry: Entry } | { ok: false; why: string };

const HEX64 = /^[0-9a-f]{64}$/;

// Strict decoding: the exact keys in the exact order with the right types,
// so that two different lines can never decode to the same entry.
export function decodeEntry(line: Buffer): DecodeResult {
  try {
    return decodeLine(line);
  } catch {
    // Whatever a hostile line does to the checks (a stack overflow), it is
    // a line that is not an entry, never a crash of the reader.
    return { ok: false, why: 'not an entry' };
  }
}

function decodeLine(line: Buffer): DecodeResult {
  // Nearly every line read is in canonical form: scanning it directly is
  // several times faster than JSON.parse and re-encoding. Anything else
  // goes through the general path, which also says what is wrong.
  const scanned = scanCanonical(line);
  if (scanned) return checkValues(scanned);
  const text = line.toString('utf8');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, why: 'not JSON' };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: false, why: 'not a JSON object' };
  const o = raw as Record<string, unknown>;
  const type = o['type'];
  if (typeof type !== 'string' || !Object.prototype.hasOwnProperty.call(ENTRY_KEYS, type))
    return { ok: false, why: 'unknown entry type' };
  const expected = ALL_KEYS[type as EntryType];
  const keys = Object.keys(o);
  if (keys.length !== expected.length || keys.some((k, i) => k !== expected[i]))
    return { ok: false, why: 'unexpected keys or key order' };
  const checked = checkValues(o);
  if (!checked.ok) return checked;
  // Re-encoding must give the same bytes (no whitespace, escapes or number
  // spellings that JSON would also accept). Comparing text is comparing
  // bytes here: every value that passed the checks above is ASCII, so the
  // canonical text is ASCII, and UTF-8 decoding turns any byte >= 0x80 of
  // the line into a non-ASCII character that cannot match it.
  if (canonicalText(o['seq'] as number, o['prev'] as string, o['time'] as string, o as unknown as EntryBody) !== text) {
    return { ok: false, why: 'not in canonical form' };
  }
  return checked;
}

// The values of an object that has exactly the keys of its type, in order.
function checkValues(o: Record<string, unknown>): DecodeResult {
  // Only a number is named: a reason is printed, and the line's own text
  // (escape sequences, nesting deep enough to overflow String()) is not.
  if (o['v'] !== AUDIT_VERSION)
    return {
      ok: false,
      why: Number.isSafeInteger(o['v']) ? `unsupported version ${o['v'] as number}` : 'unsupported version',
    };
  if (!isCount(o['seq']) || (o['seq'] as number) < 1) return { ok: false, why: 'bad seq' };
  if (typeof o['prev'] !== 'string' || !HEX64.test(o['prev'])) return { ok: false, why: 'bad prev' };
  if (!isIsoTime(o['time'])) return { ok: false, why: 'bad time' };
  const bad = checkBody(o['type'] as EntryType, o);
  if (bad) return { ok: false, why: bad };
  return { ok: true, entry: o as unknown as Entry };
}

// Keys whose values are JSON numbers; every other value is a string.
const NUMBER_KEYS = new Set(['v', 'seq', 'segment', 'key_id', 'generation', 'head_seq', 'cut_bytes', 'at_offset']);
const KEY_PREFIX = new Map(
  [...COMMON_KEYS, ...Object.values(ENTRY_KEYS).flat()].map((k) => [k, k === 'v' ? '{"v":' : `,"${k}":`]),
);

// A line that is exactly `{"v":N,"seq":N,"prev":"S","time":"S","type":"T"`,
// then `,"key":value` for each key of type T in order, then `}`, where a
// number N is 0 or a digit 1-9 followed by digits, and a string S holds only
// printable ASCII other than `"` and `\`. Such a text is exactly what
// JSON.stringify writes for the object read from it, so it needs no
// re-encoding to prove it canonical. Anything else: null.
function scanCanonical(line: Buffer): Record<string, unknown> | null {
  const s = line.toString('latin1');
  const o: Record<string, unknown> = {};
  let p = 0;
  const field = (key: string): boolean => {
    const prefix = KEY_PREFIX.get(key) as string;
    if (!s.startsWith(prefix, p)) return false;
    p += prefix.length;
    const start = p;
    if (NUMBER_KEYS.has(key)) {
      let c = s.charCodeAt(p);
      if (c === 0x30) p += 1;
      else if (c >= 0x31 && c <= 0x39) {
        do p += 1;
        while (p < s.length && (c = s.charCodeAt(p)) >= 0x30 && c <= 0x39);
      } else return false;
      // Longer numbers are never safe integers; the general path refuses them.
      if (p - start > 16) return false;
      o[key] = Number(s.slice(start, p));
      return true;
    }
    if (s.charCodeAt(p) !== 0x22) return false;
    const end = s.indexOf('"', p + 1);
    if (end < 0) return false;
    for (let i = p + 1; i < end; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === 0x5c) return false;
    }
    o[key] = s.slice(p + 1, end);
    p = end + 1;
    return true;
  };
  for (const k of COMMON_KEYS) if (!field(k)) return null;
  const type = o['type'] as string;
  if (!Object.prototype.hasOwnProperty.call(ENTRY_KEYS, type)) return null;
  for (const k of ENTRY_KEYS[type as EntryType]) if (!field(k)) return null;
  return p === s.length - 1 && s.charCodeAt(p) === 0x7d ? o : null;
}

function isCount(x: unknown): boolean {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
}

// Canonical base64 only (what Buffer#toString('base64') writes): the
// standard alphabet, padded, and the unused low bits of the last character
// zero; otherwise two spellings would decode to the same bytes. Checked
// without decoding: this runs for every line a reader reads.
const B64_VALUE = new Int8Array(128).fill(-1);
[...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].forEach(
  (c, i) => (B64_VALUE[c.charCodeAt(0)] = i),
);
function isB64(x: unknown, bytes?: number): boolean {
  if (typeof x !== 'string' || x.length % 4 !== 0) return false;
  const n = x.length;
  const pad = n === 0 || x.charCodeAt(n - 1) !== 0x3d ? 0 : x.charCodeAt(n - 2) === 0x3d ? 2 : 1;
  for (let i = 0; i < n - pad; i++) {
    const c = x.charCodeAt(i);
    if (c > 127 || (B64_VALUE[c] as number) < 0) return false;
  }
  if (pad > 0 && ((B64_VALUE[x.charCodeAt(n - pad - 1)] as number) & (pad === 1 ? 0x03 : 0x0f)) !== 0) return false;
  return bytes === undefined || (n / 4) * 3 - pad === bytes;
}

// Exactly what Date#toISOString writes for years 0000-9999 (UTC,
// milliseconds): a valid proleptic Gregorian date and time, no leap second.
// Checked by hand rather than with V8's lenient Date.parse, so that an
// independent reader can apply the same rule.
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
function isIsoTime(x: unknown): boolean {
  if (typeof x !== 'string' || !ISO_TIME.test(x)) return false;
  const num = (at: number, len: number): number => Number(x.slice(at, at + len));
  const year = num(0, 4);
  const month = num(5, 2);
  const day = num(8, 2);
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leap ? 29 : (DAYS_IN_MONTH[month - 1] as number))) return false;
  return num(11, 2) <= 23 && num(14, 2) <= 59 && num(17, 2) <= 59;
}

function checkBody(type: EntryType, o: Record<string, unknown>): string | null {
  switch (type) {
    case 'genesis':
      if (typeof o['journal_id'] !== 'string' || !/^[0-9a-f]{32}$/.test(o['journal_id'])) return 'bad journal_id';
      if (!isB64(o['sign_pub'], 32) || !isB64(o['box_pub'], 32)) return 'bad public key';
      return null;
    case 'segment':
      return isCount(o['segment']) && (o['segment'] as number) >= 1 ? null : 'bad segment number';
    case 'key':
      return isCount(o['key_id']) && isB64(o['sealed'], 32 + 48) ? null : 'bad key entry';
    case 'event':
      return isCount(o['key_id']) && isB64(o['nonce'], AEAD_NONCE_BYTES) && isB64(o['ct']) ? null : 'bad event entry';
    case 'vault':
      return isCount(o['generation']) && typeof o['vault_hash'] === 'string' && HEX64.test(o['vault_hash'])
        ? null
        : 'bad vault entry';
    case 'checkpoint':
      return isCount(o['head_seq']) &&
        typeof o['head'] === 'string' &&
        HEX64.test(o['head']) &&
        isB64(o['sign_pub'], 32) &&
        isB64(o['sig'], 64)
        ? null
        : 'bad checkpoint';
    case 'repair':
      return isCount(o['cut_bytes']) && isCount(o['at_offset']) ? null : 'bad repair entry';
    case 'signer':
      return isB64(o['sign_pub'], 32) ? null : 'bad public key';
  }
}

// The bytes a checkpoint signs: the journal it belongs to and its head.
export function checkpointMessage(journalId: string, headSeq: number, head: string): Buffer {
  return Buffer.from(`${CHECKPOINT_CONTEXT}\n${journalId}\n${headSeq}\n${head}`, 'utf8');
}

// Associated data of an event's encryption: its place in the chain.
export function eventAd(seq: number, prev: string): Buffer {
  return Buffer.from(`${seq}:${prev}`, 'utf8');
}

export function encryptEvent(
  key: Uint8Array,
  seq: number,
  prev: string,
  payload: EventPayload,
): { nonce: string; ct: string } {
  const nonce = randomBytes(AEAD_NONCE_BYTES);
  const ct = aeadEncrypt(key, nonce, Buffer.from(JSON.stringify(payload), 'utf8'), eventAd(seq, prev));
  return { nonce: nonce.toString('base64'), ct: ct.toString('base64') };
}

export function decryptEvent(key: Uint8Array, entry: EventEntry): EventPayload | null {
  const pt = aeadDecrypt(
    key,
    Buffer.from(entry.nonce, 'base64'),
    Buffer.from(entry.ct, 'base64'),
    eventAd(entry.seq, entry.prev),
  );
  if (!pt) return null;
  try {
    const p = JSON.parse(pt.toString('utf8')) as EventPayload;
    return typeof p === 'object' && p !== null && typeof p.kind === 'string' ? p : null;
  } finally {
    pt.fill(0);
  }
}

// Segment n's file: the journal path itself for segment 0, then PATH.1, PATH.2, ...
export function segmentPath(journalPath: string, n: number): string {
  return n === 0 ? journalPath : `${journalPath}.${n}`;
}

export function formatHead(seq: number, hash: string): string {
  return `${seq}:${hash}`;
}

export function parseHead(text: string): { seq: number; hash: string } | null {
  const m = /^(\d{1,15}):([0-9a-f]{64})$/.exec(text);
  return m ? { seq: Number(m[1]), hash: m[2] as string } : null;
}

export { sodiumReady };
