// The journal writer changing its signing key: a signer entry and the
// checkpoint by the key it replaces, written together and durably (in one
// segment, also near a segment's end), with appends in flight; the key in
// force found again after reopening, also when the last segment does not
// show it, and not taken from a signer entry whose checkpoint a crash cut
// off; and changes that must write nothing at all.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import { Journal } from '../../daemon/audit/journal';
import { Entry, decodeEntry, encodeEntry, entryHash, segmentPath, sodiumReady } from '../../shared/audit-format';
import { VerifyReport, verifyJournal } from '../../shared/audit-verify';
import { KeyPair, ed25519Keypair } from '../../shared/crypto';
import { AuditKeys, auditKeys, decryptAll, newJournal, scratchDir } from '../helpers/journal-writer-driver';

const BIG = 64 * 1024 * 1024;

const tmpdir = (t: Test): string => scratchDir(t, 'postern-signer-');

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

const pub = (k: KeyPair): string => k.publicKey.toString('base64');

interface Line {
  entry: Entry;
  hash: string;
  segment: number;
  line: number; // 1-based within its file
}

// Every line of every segment, decoded (throws on anything that does not decode).
function readAll(file: string): Line[] {
  const out: Line[] = [];
  for (let n = 0; fs.existsSync(segmentPath(file, n)); n++) {
    const text = fs.readFileSync(segmentPath(file, n));
    let at = 0;
    let no = 0;
    for (let nl = text.indexOf(10, at); nl !== -1; nl = text.indexOf(10, at)) {
      const raw = text.subarray(at, nl);
      const d = decodeEntry(raw);
      if (!d.ok) throw new Error(`segment ${n} line ${no + 1}: ${d.why}`);
      out.push({ entry: d.entry, hash: entryHash(raw), segment: n, line: ++no });
      at = nl + 1;
    }
    if (at !== text.length) throw new Error(`segment ${n}: ${text.length - at} bytes after the last line`);
  }
  return out;
}

function segments(file: string): number {
  let n = 0;
  while (fs.existsSync(segmentPath(file, n))) n++;
  return n;
}

// The bytes of every segment file, to compare before and after.
function snapshot(file: string): Buffer[] {
  const out: Buffer[] = [];
  for (let n = 0; fs.existsSync(segmentPath(file, n)); n++) out.push(fs.readFileSync(segmentPath(file, n)));
  return out;
}

function signKeyOf(e: Entry): string | null {
  return e.type === 'checkpoint' || e.type === 'signer' || e.type === 'genesis' ? e.sign_pub : null;
}

async function verified(t: Test, file: string, pinned: KeyPair[], expectKeys: Array<[KeyPair, number]>): Promise<void> {
  const want = expectKeys.map(([k, since]) => ({ key: pub(k), since }));
  for (const p of [null, ...pinned]) {
    const r: VerifyReport = await verifyJournal(file, p ? { pubkey: pub(p) } : {});
    const label = p ? `pinned ${pub(p).slice(0, 8)}…` : 'unpinned';
    t.equal(
      r.problem,
      null,
      `${label}: no problem${r.problem ? ` (${r.problem.kind} at ${r.problem.seq}: ${r.problem.message})` : ''}`,
    );
    t.equal(r.ok, true, `${label}: verifies`);
    t.same(r.signingKeys, want, `${label}: signing keys`);
  }
}

// The signer entry naming `to`, the checkpoint after it, and what surrounds them.
function findChange(lines: Line[], to: KeyPair): { signer: Line; vouch: Line; index: number } {
  const idx = lines.findIndex((l) => l.entry.type === 'signer' && l.entry.sign_pub === pub(to));
  if (idx < 0) throw new Error('no signer entry for that key');
  return { signer: lines[idx] as Line, vouch: lines[idx + 1] as Line, index: idx };
}

t.test('changeSigner with 64 appends in flight, then more until it resolves', async (t) => {
  const dir = tmpdir(t);
  const file = await newJournal(dir, keys);
  const k0 = keys.sign;
  const k1 = ed25519Keypair();
  const j = await Journal.open({ path: file, segmentSize: BIG });
  t.teardown(() => j.close().catch(() => undefined));
  await j.setSigningKey(k0.privateKey);
  for (let i = 0; i < 70; i++) await j.append({ kind: 'before', i }); // past the first checkpoint
  t.equal(await j.keyInForce(), pub(k0));

  const secret = Buffer.from(k1.privateKey);
  const wave: Array<Promise<{ seq: number; hash: string }>> = [];
  for (let i = 0; i < 32; i++) wave.push(j.append({ kind: 'wave', i }));
  const change = j.changeSigner(secret);
  secret.fill(0); // the caller wipes its copy at once: the journal took its own
  for (let i = 32; i < 64; i++) wave.push(j.append({ kind: 'wave', i }));
  // Appends made while the change is being written.
  let settled = false;
  void change.then(
    () => (settled = true),
    () => (settled = true),
  );
  const during: Array<Promise<{ seq: number; hash: string }>> = [];
  while (!settled && during.length < 500) {
    during.push(j.append({ kind: 'during', i: during.length }));
    await new Promise((r) => setImmediate(r));
  }
  const cpHead = await change;
  const heads = [...(await Promise.all(wave)), ...(await Promise.all(during))];
  t.equal(await j.keyInForce(), pub(k1), 'the new key is in force once the change resolved');
  for (let i = 0; i < 150; i++) await j.append({ kind: 'after', i });
  await j.close();

  const lines = readAll(file);
  const bySeq = new Map(lines.map((l) => [l.entry.seq, l]));
  t.ok(
    lines.every((l, i) => l.entry.seq === i + 1),
    'line order is seq order',
  );
  for (const h of heads) {
    if (bySeq.get(h.seq)?.hash !== h.hash)
      t.fail(`append resolved with ${h.seq}:${h.hash} but that line hashes otherwise`);
  }
  t.equal(new Set(heads.map((h) => h.seq)).size, heads.length, 'every append has its own seq');
  t.equal(lines.filter((l) => l.entry.type === 'signer').length, 1, 'one signer entry');
  const { signer, vouch, index } = findChange(lines, k1);
  t.equal(vouch.entry.type, 'checkpoint', 'the line right after the signer entry is a checkpoint');
  t.equal(signKeyOf(vouch.entry), pub(k0), 'naming the key it replaces');
  t.same(cpHead, { seq: vouch.entry.seq, hash: vouch.hash }, 'changeSigner resolves with that checkpoint');
  t.equal(signer.segment, vouch.segment, 'in the same segment');
  const before = lines.slice(0, index).filter((l) => l.entry.type === 'checkpoint');
  const after = lines.slice(index + 2).filter((l) => l.entry.type === 'checkpoint');
  t.ok(before.length >= 1, `${before.length} checkpoints before the change`);
  t.ok(
    before.every((l) => signKeyOf(l.entry) === pub(k0)),
    'checkpoints before the change name the old key',
  );
  t.ok(after.length >= 2, `${after.length} checkpoints after the change`);
  t.ok(
    after.every((l) => signKeyOf(l.entry) === pub(k1)),
    'checkpoints after the change name the new key',
  );
  t.equal(lines.at(-1)?.entry.type, 'checkpoint', 'close signed the end');
  const events = decryptAll(
    lines.map((l) => ({ ...l, offset: 0, end: 0 })),
    keys.box.publicKey,
    keys.box.privateKey,
  );
  t.equal(
    [...events.values()].filter((p) => p['kind'] === 'wave').length,
    64,
    'all 64 events of the wave are in the journal',
  );
  t.equal(
    [...events.values()].filter((p) => p['kind'] === 'during').length,
    during.length,
    `and the ${during.length} made during the change`,
  );
  await verified(
    t,
    file,
    [k0, k1],
    [
      [k0, 1],
      [k1, signer.entry.seq],
    ],
  );

  t.test('reopened: the new key is in force', async (t) => {
    const j2 = await Journal.open({ path: file, segmentSize: BIG });
    t.teardown(() => j2.close().catch(() => undefined));
    t.equal(await j2.keyInForce(), pub(k1));
    await t.rejects(
      j2.setSigningKey(k0.privateKey),
      { code: 'audit_unavailable', message: /not the key in force/ },
      'the retired key is refused',
    );
    await j2.setSigningKey(k1.privateKey);
    await j2.append({ kind: 'reopened' });
    // A second change, K1 -> K2, from the reopened journal.
    const k2 = ed25519Keypair();
    const cp2 = await j2.changeSigner(k2.privateKey);
    await j2.append({ kind: 'after second change' });
    await j2.close();
    const all = readAll(file);
    const second = findChange(all, k2);
    t.same(cp2, { seq: second.vouch.entry.seq, hash: second.vouch.hash });
    t.equal(signKeyOf(second.vouch.entry), pub(k1), 'the second change is vouched for by K1');
    t.equal(signKeyOf(all.at(-1)!.entry), pub(k2), 'the final checkpoint names K2');
    await verified(
      t,
      file,
      [k0, k1, k2],
      [
        [k0, 1],
        [k1, signer.entry.seq],
        [k2, second.signer.entry.seq],
      ],
    );
  });
});

t.test('two changes in one batch: K0 -> K1 -> K2', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const k0 = keys.sign;
  const k1 = ed25519Keypair();
  const k2 = ed25519Keypair();
  const j = await Journal.open({ path: file, segmentSize: BIG });
  t.teardown(() => j.close().catch(() => undefined));
  await j.setSigningKey(k0.privateKey);
  await j.append({ kind: 'x' });
  const [a, , b] = await Promise.all([
    j.changeSigner(k1.privateKey),
    j.append({ kind: 'between' }),
    j.changeSigner(k2.privateKey),
    j.append({ kind: 'after' }),
  ]);
  await j.close();
  const lines = readAll(file);
  const c1 = findChange(lines, k1);
  const c2 = findChange(lines, k2);
  t.same(a, { seq: c1.vouch.entry.seq, hash: c1.vouch.hash });
  t.same(b, { seq: c2.vouch.entry.seq, hash: c2.vouch.hash });
  t.equal(signKeyOf(c1.vouch.entry), pub(k0));
  t.equal(signKeyOf(c2.vouch.entry), pub(k1), 'the second change is vouched for by the key the first one put in force');
  await verified(
    t,
    file,
    [k0, k1, k2],
    [
      [k0, 1],
      [k1, c1.signer.entry.seq],
      [k2, c2.signer.entry.seq],
    ],
  );
});

t.test('a change near a segment end; the key in force read back through segments', async (t) => {
  const SEGMENT = 8192;
  const file = await newJournal(tmpdir(t), keys);
  const k0 = keys.sign;
  const k1 = ed25519Keypair();
  const j = await Journal.open({ path: file, segmentSize: SEGMENT });
  t.teardown(() => j.close().catch(() => undefined));
  await j.setSigningKey(k0.privateKey);

  // Line lengths (with "\n") of the signer entry and its checkpoint at about this seq.
  const time = new Date().toISOString();
  const signerLen = encodeEntry(100, '0'.repeat(64), time, { type: 'signer', sign_pub: pub(k1) }).length + 1;
  const cpLen =
    encodeEntry(100, '0'.repeat(64), time, {
      type: 'checkpoint',
      head_seq: 99,
      head: '0'.repeat(64),
      sign_pub: pub(k0),
      sig: Buffer.alloc(64).toString('base64'),
    }).length + 1;
  // Leave room for the signer entry but not for both.
  const target = signerLen + Math.floor(cpLen / 2);
  const size = (): number => fs.statSync(segmentPath(file, 0)).size;
  // An event's line length grows by 4 bytes for every 3 bytes of padding.
  const s0 = size();
  await j.append({ kind: 'fill', pad: '' });
  const base = size() - s0;
  for (let room = SEGMENT - size(); room - target > 40; room = SEGMENT - size()) {
    const want = Math.min(1500, room - target);
    await j.append({ kind: 'fill', pad: 'p'.repeat(Math.max(0, Math.floor(((want - base) * 3) / 4))) });
  }
  const room = SEGMENT - size();
  t.equal(segments(file), 1, 'still in segment 0');
  t.ok(
    room >= signerLen && room < signerLen + cpLen,
    `${room} bytes left: the signer entry (${signerLen}) fits, with its checkpoint (${cpLen}) it does not`,
  );

  const cpHead = await j.changeSigner(k1.privateKey);
  let lines = readAll(file);
  const change = findChange(lines, k1);
  t.equal(change.signer.segment, change.vouch.segment, 'the signer entry and its checkpoint are in the same file');
  t.equal(change.vouch.entry.type, 'checkpoint');
  t.equal(signKeyOf(change.vouch.entry), pub(k0));
  t.same(cpHead, { seq: change.vouch.entry.seq, hash: change.vouch.hash });
  t.equal(change.signer.segment, 1, 'the change moved to a new segment first');
  const endOf0 = lines.filter((l) => l.segment === 0).at(-1)!;
  t.same(
    { type: endOf0.entry.type, key: signKeyOf(endOf0.entry) },
    { type: 'checkpoint', key: pub(k0) },
    'segment 0 ends with a checkpoint by the old key',
  );
  await j.close();
  const signerSeq = change.signer.entry.seq;
  // Nothing after the vouching checkpoint yet: K1 has signed nothing, so only K0 can be pinned.
  await verified(
    t,
    file,
    [k0],
    [
      [k0, 1],
      [k1, signerSeq],
    ],
  );
  t.match(
    await verifyJournal(file, { pubkey: pub(k1) }),
    { ok: false, problem: { kind: 'wrong_key', seq: 1 } },
    'pinned K1 before K1 signed anything',
  );

  // Without a signing key: segments that hold no checkpoint and no signer entry.
  const locked = await Journal.open({ path: file, segmentSize: SEGMENT });
  t.teardown(() => locked.close().catch(() => undefined));
  t.equal(
    await locked.keyInForce(),
    pub(k1),
    'read from the last segment, whose checkpoint after the signer names the old key',
  );
  for (let i = 0; segments(file) < 4; i++) await locked.append({ kind: 'locked', i, pad: 'q'.repeat(600) });
  await locked.close();
  lines = readAll(file);
  const last = segments(file) - 1;
  t.equal(last, 3);
  for (const n of [2, 3]) {
    t.notOk(
      lines.some((l) => l.segment === n && signKeyOf(l.entry) !== null),
      `segment ${n} holds no checkpoint and no signer entry`,
    );
  }

  const j3 = await Journal.open({ path: file, segmentSize: SEGMENT });
  t.teardown(() => j3.close().catch(() => undefined));
  t.equal(await j3.keyInForce(), pub(k1), 'keyInForce reads back to segment 1');
  await t.rejects(j3.setSigningKey(k0.privateKey), { code: 'audit_unavailable', message: /not the key in force/ });
  await j3.setSigningKey(k1.privateKey);
  await j3.append({ kind: 'signed again' });
  await j3.close();
  lines = readAll(file);
  t.equal(signKeyOf(lines.at(-1)!.entry), pub(k1), 'the new checkpoint names the new key');
  await verified(
    t,
    file,
    [k0, k1],
    [
      [k0, 1],
      [k1, signerSeq],
    ],
  );
});

// The signer entry and its checkpoint are one write: if a crash keeps the
// signer entry but not all of its checkpoint, the change did not happen.
t.test('a change cut short: signer entry kept, its checkpoint torn or missing', async (t) => {
  for (const cut of ['torn', 'whole line'] as const) {
    t.test(cut, async (t) => {
      const file = await newJournal(tmpdir(t), keys);
      const k0 = keys.sign;
      const k1 = ed25519Keypair();
      const j = await Journal.open({ path: file, segmentSize: BIG });
      t.teardown(() => j.close().catch(() => undefined));
      await j.setSigningKey(k0.privateKey);
      await j.append({ kind: 'x' });
      await j.changeSigner(k1.privateKey);
      await j.close();
      const lines = readAll(file);
      const change = findChange(lines, k1);
      t.equal(lines.at(-1), change.vouch, 'the vouching checkpoint is the last line');
      const text = fs.readFileSync(file);
      const vouchStart = text.lastIndexOf(10, text.length - 2) + 1;
      fs.truncateSync(file, cut === 'torn' ? vouchStart + 100 : vouchStart);
      const cutShort = await verifyJournal(file, { allowUnsignedTail: true });
      t.same(
        { kind: cutShort.problem?.kind, seq: cutShort.problem?.seq, keys: cutShort.signingKeys },
        cut === 'torn'
          ? { kind: 'torn_last_write', seq: change.vouch.entry.seq, keys: [{ key: pub(k0), since: 1 }] }
          : { kind: undefined, seq: undefined, keys: [{ key: pub(k0), since: 1 }] },
        'as left by the crash: the change is not in force',
      );

      const j2 = await Journal.open({ path: file, segmentSize: BIG });
      t.teardown(() => j2.close().catch(() => undefined));
      t.equal(await j2.keyInForce(), pub(k0), 'the key in force is still the old one');
      await t.rejects(
        j2.setSigningKey(k1.privateKey),
        { code: 'audit_unavailable', message: /not the key in force/ },
        'the key never vouched for is refused',
      );
      await j2.setSigningKey(k0.privateKey);
      await j2.append({ kind: 'after restart' });
      await j2.close();
      await verified(t, file, [k0], [[k0, 1]]);
    });
  }
});

t.test('changeSigner without a signing key: vault_locked, nothing written', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: BIG });
  t.teardown(() => j.close().catch(() => undefined));
  await j.append({ kind: 'x' });
  const before = snapshot(file);
  const head = j.head();
  await t.rejects(j.changeSigner(ed25519Keypair().privateKey), { code: 'vault_locked' });
  t.same(snapshot(file), before, 'the files are unchanged byte for byte');
  t.same(j.head(), head);
  t.equal(await j.keyInForce(), pub(keys.sign), 'the genesis key is still in force');
  // The journal still works, and the genesis key can still be set.
  await j.setSigningKey(keys.sign.privateKey);
  await j.append({ kind: 'y' });
  await j.close();
  t.equal(readAll(file).filter((l) => l.entry.type === 'signer').length, 0, 'no signer entry at all');
  await verified(t, file, [keys.sign], [[keys.sign, 1]]);
});

t.test('changeSigner with a malformed key: TypeError, nothing written', async (t) => {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open({ path: file, segmentSize: BIG });
  t.teardown(() => j.close().catch(() => undefined));
  await j.setSigningKey(keys.sign.privateKey);
  await j.append({ kind: 'x' });
  const before = snapshot(file);
  const k1 = ed25519Keypair();
  const other = ed25519Keypair();
  const bad: Array<[string, unknown]> = [
    ['32 bytes', Buffer.from(k1.privateKey.subarray(0, 32))],
    ['mismatched halves', Buffer.concat([k1.privateKey.subarray(0, 32), other.publicKey])],
    ['64 zero bytes', Buffer.alloc(64)],
    ['a string', k1.privateKey.toString('base64')],
  ];
  for (const [what, key] of bad) {
    await t.rejects(j.changeSigner(key as Buffer), TypeError, what);
  }
  await t.rejects(j.changeSigner(Buffer.concat([k1.privateKey.subarray(0, 32), other.publicKey])), {
    name: 'TypeError',
    message: /do not belong together/,
  });
  t.same(snapshot(file), before, 'the files are unchanged byte for byte');
  t.equal(await j.keyInForce(), pub(keys.sign));
  await j.close();
  t.equal(readAll(file).filter((l) => l.entry.type === 'signer').length, 0, 'no signer entry at all');
  await verified(t, file, [keys.sign], [[keys.sign, 1]]);
});
