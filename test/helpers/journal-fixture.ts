// Real audit journals for tests, built with the shared encoders
// (shared/audit-format.ts), and the ways to damage them. `buildJournal` is
// the one place that makes a journal: switch it to the daemon's writer and
// every test follows.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  CHECKPOINT_EVERY,
  Entry,
  EntryBody,
  EntryType,
  GENESIS_PREV,
  checkpointMessage,
  decodeEntry,
  encodeEntry,
  encryptEvent,
  entryHash,
  eventAd,
  segmentPath,
} from '../../shared/audit-format';
import {
  KeyPair,
  aeadEncrypt,
  ed25519Keypair,
  ed25519Sign,
  randomBytes,
  sealTo,
  sodiumReady,
  x25519Keypair,
} from '../../shared/crypto';

export interface JournalKeys {
  sign: KeyPair;
  box: KeyPair;
  journalId: string;
}

export async function makeKeys(): Promise<JournalKeys> {
  await sodiumReady();
  return { sign: ed25519Keypair(), box: x25519Keypair(), journalId: randomBytes(16).toString('hex') };
}

export const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

export interface BuildOptions {
  keys?: JournalKeys;
  // Entries per segment file; 0 or absent: a single file.
  segmentEvery?: number;
  // Entries after the final checkpoint (0: the journal ends with a checkpoint).
  unsignedTail?: number;
  // A daemon restart (a new key entry) every this many entries.
  restartEvery?: number;
  startTime?: number;
}

export interface BuiltJournal {
  dir: string;
  path: string; // segment 0
  keys: JournalKeys;
  // The lines (without "\n") of each segment file, in order.
  files: Buffer[][];
  entries: number;
  head: { seq: number; hash: string };
  hashes: string[]; // index seq - 1
  types: EntryType[]; // index seq - 1
  checkpoints: number[]; // seqs
}

function lineCount(files: Buffer[][]): number {
  return files.reduce((n, f) => n + f.length, 0);
}

// What the writer would put at `seq` (SPEC §9: a checkpoint after 63 other
// entries, before each rotation and at shutdown; a segment opens with its
// segment, key and vault entries; each start writes a key entry).
function planType(
  seq: number,
  o: Required<Pick<BuildOptions, 'segmentEvery' | 'restartEvery'>>,
  since: number,
  lastFinal: number,
): EntryType {
  if (seq === 1) return 'genesis';
  const every = o.segmentEvery;
  const inFile = every > 0 ? (seq - 1) % every : seq - 1; // 0 for a segment's first line
  if (every > 0 && inFile === 0) return 'segment';
  if (seq === lastFinal) return 'checkpoint';
  if (every > 0 && inFile === 1) return 'key';
  if (every > 0 && inFile === 2) return 'vault';
  if (seq < lastFinal && (since >= CHECKPOINT_EVERY - 1 || (every > 0 && inFile === every - 1))) return 'checkpoint';
  if (seq === 2 || (o.restartEvery > 0 && seq % o.restartEvery === 0)) return 'key';
  if (seq % 50 === 0) return 'vault';
  return 'event';
}

// A journal of exactly `n` entries in `dir` (created), file `audit.log` (+ segments).
export async function buildJournal(dir: string, n: number, opts: BuildOptions = {}): Promise<BuiltJournal> {
  if (n < 1) throw new RangeError('buildJournal: n must be at least 1');
  await sodiumReady();
  const keys = opts.keys ?? (await makeKeys());
  const o = {
    segmentEvery: opts.segmentEvery ?? 0,
    unsignedTail: opts.unsignedTail ?? 0,
    restartEvery: opts.restartEvery ?? 0,
  };
  const lastFinal = n - o.unsignedTail;
  const start = opts.startTime ?? Date.UTC(2025, 0, 1);
  const files: Buffer[][] = [[]];
  const hashes: string[] = [];
  const types: EntryType[] = [];
  const checkpoints: number[] = [];
  let prev = GENESIS_PREV;
  let since = 0;
  let eventKey = randomBytes(32);
  let keyId = 2;
  let generation = 1;
  for (let seq = 1; seq <= n; seq++) {
    const type = planType(seq, o, since, lastFinal);
    let body: EntryBody;
    switch (type) {
      case 'genesis':
        body = {
          type,
          journal_id: keys.journalId,
          sign_pub: b64(keys.sign.publicKey),
          box_pub: b64(keys.box.publicKey),
        };
        break;
      case 'segment':
        files.push([]);
        body = { type, segment: files.length - 1 };
        break;
      case 'key':
        eventKey = randomBytes(32);
        keyId = seq;
        body = { type, key_id: seq, sealed: b64(sealTo(eventKey, keys.box.publicKey)) };
        break;
      case 'vault':
        body = { type, generation, vault_hash: entryHash(Buffer.from(`vault ${generation}`)) };
        generation += 1;
        break;
      case 'checkpoint':
        body = checkpointBody(keys.journalId, seq, prev, keys.sign, keys.sign.publicKey);
        checkpoints.push(seq);
        break;
      default:
        body = {
          type: 'event',
          key_id: keyId,
          ...encryptEvent(eventKey, seq, prev, { kind: 'http_request', credential: 'github', method: 'GET', n: seq }),
        };
    }
    const line = encodeEntry(seq, prev, new Date(start + seq * 1000).toISOString(), body);
    (files[files.length - 1] as Buffer[]).push(line);
    prev = entryHash(line);
    hashes.push(prev);
    types.push(type);
    since = type === 'checkpoint' ? 0 : since + 1;
  }
  const path = join(dir, 'audit.log');
  const j: BuiltJournal = {
    dir,
    path,
    keys,
    files,
    entries: n,
    head: { seq: n, hash: prev },
    hashes,
    types,
    checkpoints,
  };
  writeFiles(dir, files);
  return j;
}

function checkpointBody(journalId: string, seq: number, prev: string, signer: KeyPair, claim: Uint8Array): EntryBody {
  return {
    type: 'checkpoint',
    head_seq: seq - 1,
    head: prev,
    sign_pub: b64(claim),
    sig: b64(ed25519Sign(checkpointMessage(journalId, seq - 1, prev), signer.privateKey)),
  };
}

// Writes segment files into dir (replacing what was there under that name).
export function writeFiles(dir: string, files: Buffer[][], name = 'audit.log'): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  for (let k = files.length; existsSync(segmentPath(path, k)); k++) rmSync(segmentPath(path, k));
  files.forEach((lines, k) => {
    writeFileSync(segmentPath(path, k), lines.length ? Buffer.concat(lines.flatMap((l) => [l, NL])) : Buffer.alloc(0), {
      mode: 0o600,
    });
  });
  return path;
}

const NL = Buffer.from('\n');

// ---------------------------------------------------------------------------
// Tampering. Entries are addressed by seq in the untouched journal.

export type TamperOp =
  | { op: 'flip'; seq: number; byte: number; mask?: number } // XOR one byte of entry seq (default mask 0x01)
  | { op: 'change'; seq: number; byte: number } // one character replaced by another of its class (digit, a-f, A-Z, a-z), so the line still decodes
  | { op: 'delete'; seq: number }
  | { op: 'duplicate'; seq: number } // a copy right after it
  | { op: 'swap'; seq: number } // seq and seq + 1 change places
  | { op: 'cut'; count: number } // the last `count` entries removed
  | { op: 'insert'; before: number; line: Buffer } // an extra line before entry `before` (entries + 1: at the end)
  | { op: 'replace'; seq: number; line: Buffer };

interface Slot {
  file: number;
  line: Buffer;
}

// A damaged copy of `j` written to `dir` (segment files keep their names); returns its segment 0 path.
export function tamper(j: BuiltJournal, t: TamperOp, dir: string): string {
  const slots: Slot[] = j.files.flatMap((lines, file) => lines.map((line) => ({ file, line })));
  const at = (seq: number): Slot => {
    const s = slots[seq - 1];
    if (!s) throw new RangeError(`tamper: no entry ${seq}`);
    return s;
  };
  switch (t.op) {
    case 'flip': {
      const s = at(t.seq);
      if (t.byte < 0 || t.byte >= s.line.length)
        throw new RangeError(`tamper: entry ${t.seq} has ${s.line.length} bytes`);
      const line = Buffer.from(s.line);
      line[t.byte] = (line[t.byte] as number) ^ (t.mask ?? 0x01);
      slots[t.seq - 1] = { file: s.file, line };
      break;
    }
    case 'change': {
      const s = at(t.seq);
      slots[t.seq - 1] = { file: s.file, line: withCharChanged(s.line, t.byte) };
      break;
    }
    case 'delete':
      at(t.seq);
      slots.splice(t.seq - 1, 1);
      break;
    case 'duplicate': {
      const s = at(t.seq);
      slots.splice(t.seq, 0, { file: s.file, line: s.line });
      break;
    }
    case 'swap': {
      const a = at(t.seq);
      const b = at(t.seq + 1);
      slots[t.seq - 1] = { file: a.file, line: b.line };
      slots[t.seq] = { file: b.file, line: a.line };
      break;
    }
    case 'cut':
      slots.splice(slots.length - t.count, t.count);
      break;
    case 'insert': {
      const near = slots[Math.min(t.before, slots.length) - 1] ?? at(1);
      slots.splice(t.before - 1, 0, { file: near.file, line: t.line });
      break;
    }
    case 'replace': {
      const s = at(t.seq);
      slots[t.seq - 1] = { file: s.file, line: t.line };
      break;
    }
  }
  const files: Buffer[][] = j.files.map(() => []);
  for (const s of slots) (files[s.file] as Buffer[]).push(s.line);
  // A cut removes whole trailing files rather than leaving them empty.
  if (t.op === 'cut') while (files.length > 1 && (files[files.length - 1] as Buffer[]).length === 0) files.pop();
  return writeFiles(dir, files, basename(j.path));
}

export interface ResignOptions {
  key: KeyPair;
  // Only this checkpoint (seq) is signed with `key`; the others keep the journal's key.
  only?: number;
  // What the re-signed checkpoints name as sign_pub: the key that signed
  // (default), or the journal's own key (so the signature does not verify).
  claim?: 'signer' | 'original';
  // Also put `key` in the genesis entry: the whole journal then looks like another key's.
  genesis?: boolean;
}

// Re-signs checkpoints with another key and re-chains everything after the
// first change, as someone holding that key (and write access) could.
export function resign(j: BuiltJournal, dir: string, o: ResignOptions): BuiltJournal {
  const out: Buffer[][] = [];
  const hashes: string[] = [];
  let prev = GENESIS_PREV;
  for (const lines of j.files) {
    const file: Buffer[] = [];
    out.push(file);
    for (const old of lines) {
      const d = decodeEntry(old);
      if (!d.ok) throw new Error(`resign: a line does not decode (${d.why})`);
      const e: Entry = d.entry;
      let body = stripCommon(e);
      if (e.type === 'genesis' && o.genesis) body = { ...body, sign_pub: b64(o.key.publicKey) } as EntryBody;
      if (e.type === 'checkpoint') {
        const mine = o.only === undefined || o.only === e.seq;
        const signer = mine ? o.key : j.keys.sign;
        const claim = mine && o.claim !== 'original' ? o.key.publicKey : j.keys.sign.publicKey;
        body = checkpointBody(j.keys.journalId, e.seq, prev, signer, o.genesis ? o.key.publicKey : claim);
      }
      const line = encodeEntry(e.seq, prev, e.time, body);
      file.push(line);
      prev = entryHash(line);
      hashes.push(prev);
    }
  }
  writeFiles(dir, out, basename(j.path));
  return { ...j, dir, path: join(dir, basename(j.path)), files: out, hashes, head: { seq: j.head.seq, hash: prev } };
}

function stripCommon(e: Entry): EntryBody {
  const { v: _v, seq: _s, prev: _p, time: _t, ...body } = e;
  return body as EntryBody;
}

// Where a field's value begins in a line (after the opening quote of a
// string value), for targeted changes.
export function fieldOffset(line: Buffer, key: string): number {
  const i = line.indexOf(`"${key}":`);
  if (i < 0) throw new Error(`fieldOffset: no ${key}`);
  const v = i + key.length + 3;
  return line[v] === 0x22 ? v + 1 : v;
}

// The next character of the same class, so hex stays hex and base64 stays
// canonical base64 (away from its last two characters).
const CLASSES = ['0123456789', 'abcdef', 'ghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '+/'];
export function withCharChanged(line: Buffer, byte: number): Buffer {
  const c = String.fromCharCode(line[byte] as number);
  const cls = CLASSES.find((k) => k.includes(c));
  if (!cls)
    throw new Error(`withCharChanged: byte ${byte} is ${JSON.stringify(c)}, not a hex, base64 or time character`);
  const out = Buffer.from(line);
  out[byte] = cls.charCodeAt((cls.indexOf(c) + 1) % cls.length);
  return out;
}

// A copy of `j` in `dir` whose entry `seq` is `line`, with every later entry
// chained again and its checkpoints signed again with the journal's key: a
// change made by someone holding the signing key. Returns segment 0's path.
export function rechainFrom(j: BuiltJournal, seq: number, line: Buffer, dir: string): string {
  const flat = j.files.flat();
  flat[seq - 1] = line;
  let prev = entryHash(line);
  for (let s = seq + 1; s <= flat.length; s++) {
    const d = decodeEntry(flat[s - 1] as Buffer);
    if (!d.ok) throw new Error(`rechainFrom: entry ${s} does not decode (${d.why})`);
    let body = stripCommon(d.entry);
    if (body.type === 'checkpoint')
      body = checkpointBody(j.keys.journalId, s, prev, j.keys.sign, j.keys.sign.publicKey);
    const next = encodeEntry(s, prev, d.entry.time, body);
    flat[s - 1] = next;
    prev = entryHash(next);
  }
  let k = 0;
  return writeFiles(
    dir,
    j.files.map((f) => f.map(() => flat[k++] as Buffer)),
    basename(j.path),
  );
}

export { lineCount };

// ---------------------------------------------------------------------------
// The test vector of docs/audit-format.md: fixed keys, times, nonces and a
// deterministic crypto_box_seal, so the document can be regenerated exactly.

export interface TestVector {
  signSeedHex: string;
  signPublic: string;
  signSecretHex: string; // libsodium's 64-byte form: seed || public key
  boxSecretHex: string;
  boxPublic: string;
  ephemeralSeedHex: string;
  eventKeyHex: string;
  journalId: string;
  lines: string[];
  hashes: string[];
  payloads: Record<number, unknown>;
}

export async function makeTestVector(): Promise<TestVector> {
  const s = await sodiumReady();
  const fill = (byte: number, n: number): Buffer => Buffer.alloc(n, byte);
  const signSeed = fill(0x11, 32);
  const sign = s.crypto_sign_seed_keypair(signSeed);
  const box = s.crypto_box_seed_keypair(fill(0x22, 32));
  const ephemeralSeed = fill(0x33, 32);
  const eph = s.crypto_box_seed_keypair(ephemeralSeed);
  const eventKey = fill(0x44, 32);
  const journalId = '00112233445566778899aabbccddeeff';
  // crypto_box_seal(m, pk) = epk || crypto_box_easy(m, blake2b-192(epk || pk), pk, esk),
  // with a fixed ephemeral key pair instead of a random one.
  const sealNonce = s.crypto_generichash(24, Buffer.concat([eph.publicKey, box.publicKey]), null);
  const sealed = Buffer.concat([
    Buffer.from(eph.publicKey),
    Buffer.from(s.crypto_box_easy(eventKey, sealNonce, box.publicKey, eph.privateKey)),
  ]);
  const payloads: Record<number, unknown> = {
    3: { kind: 'daemon_start', pid: 4242 },
    5: { kind: 'http_request', credential: 'github', method: 'GET', host: 'api.github.com', decision: 'allowed' },
  };
  const lines: string[] = [];
  const hashes: string[] = [];
  let prev = GENESIS_PREV;
  const time = (seq: number): string => new Date(Date.UTC(2025, 0, 2, 3, 4, seq)).toISOString();
  const event = (seq: number, nonceByte: number): EntryBody => {
    const nonce = fill(nonceByte, 24);
    const ct = aeadEncrypt(eventKey, nonce, Buffer.from(JSON.stringify(payloads[seq]), 'utf8'), eventAd(seq, prev));
    return { type: 'event', key_id: 2, nonce: b64(nonce), ct: b64(ct) };
  };
  const bodies: Array<() => EntryBody> = [
    () => ({ type: 'genesis', journal_id: journalId, sign_pub: b64(sign.publicKey), box_pub: b64(box.publicKey) }),
    () => ({ type: 'key', key_id: 2, sealed: b64(sealed) }),
    () => event(3, 0x55),
    () => ({ type: 'vault', generation: 1, vault_hash: 'ab'.repeat(32) }),
    () => event(5, 0x66),
    () =>
      checkpointBody(
        journalId,
        6,
        prev,
        { publicKey: Buffer.from(sign.publicKey), privateKey: Buffer.from(sign.privateKey) },
        sign.publicKey,
      ),
  ];
  bodies.forEach((make, i) => {
    const seq = i + 1;
    const line = encodeEntry(seq, prev, time(seq), make());
    lines.push(line.toString('utf8'));
    prev = entryHash(line);
    hashes.push(prev);
  });
  return {
    signSeedHex: signSeed.toString('hex'),
    signPublic: b64(sign.publicKey),
    signSecretHex: Buffer.from(sign.privateKey).toString('hex'),
    boxSecretHex: Buffer.from(box.privateKey).toString('hex'),
    boxPublic: b64(box.publicKey),
    ephemeralSeedHex: ephemeralSeed.toString('hex'),
    eventKeyHex: eventKey.toString('hex'),
    journalId,
    lines,
    hashes,
    payloads,
  };
}
