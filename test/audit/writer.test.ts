// The journal writer on real files: creation, the chain, encryption,
// checkpoints, group commit, vault entries, input limits.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Journal, createJournal } from '../../daemon/audit/journal';
import { CHECKPOINT_EVERY, GENESIS_PREV, MAX_LINE_BYTES, sodiumReady } from '../../shared/audit-format';
import { Refusal } from '../../shared/errors';
import {
  AuditKeys,
  auditKeys,
  decryptAll,
  newJournal,
  readJournal,
  verify,
  scratchDir,
} from '../helpers/journal-writer-driver';

const BIG = 64 * 1024 * 1024;

const tmpdir = (t: Test): string => scratchDir(t, 'postern-journal-');

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

async function opened(t: Test, segmentSize = BIG, now?: () => Date): Promise<{ file: string; j: Journal }> {
  const file = await newJournal(tmpdir(t), keys);
  const j = await Journal.open(now ? { path: file, segmentSize, now } : { path: file, segmentSize });
  t.teardown(() => j.close().catch(() => undefined));
  return { file, j };
}

// Gaps between checkpoints: the number of other entries before each one,
// and the unsigned entries after the last.
function checkpointGaps(file: string): { gaps: number[]; tail: number } {
  const gaps: number[] = [];
  let run = 0;
  for (const { entry } of readJournal(file).entries) {
    if (entry.type === 'checkpoint') {
      gaps.push(run);
      run = 0;
    } else run += 1;
  }
  return { gaps, tail: run };
}

t.test('createJournal: genesis on a new 0600 file, never over an existing one', async (t) => {
  const dir = tmpdir(t);
  const file = path.join(dir, 'journal');
  const pub = { signPublic: keys.sign.publicKey.toString('base64'), boxPublic: keys.box.publicKey.toString('base64') };
  const made = await createJournal(file, pub);
  t.match(made.journalId, /^[0-9a-f]{32}$/);
  t.equal(fs.statSync(file).mode & 0o777, 0o600);
  const r = readJournal(file);
  t.same(r.problems, []);
  t.equal(r.entries.length, 1);
  const g = r.entries[0]!.entry;
  t.match(g, {
    type: 'genesis',
    seq: 1,
    prev: GENESIS_PREV,
    journal_id: made.journalId,
    sign_pub: pub.signPublic,
    box_pub: pub.boxPublic,
  });
  t.same(made.head, { seq: 1, hash: r.entries[0]!.hash });

  const before = fs.readFileSync(file);
  await t.rejects(createJournal(file, pub), { code: 'conflict', message: new RegExp(`${file}.*already exists`) });
  t.ok(fs.readFileSync(file).equals(before), 'the existing journal is untouched');
  // A stray later segment also means a journal is there.
  const other = path.join(dir, 'other');
  fs.writeFileSync(`${other}.1`, 'x');
  await t.rejects(createJournal(other, pub), { code: 'conflict' });
  t.notOk(fs.existsSync(other));

  const second = await createJournal(path.join(dir, 'second'), pub);
  t.not(second.journalId, made.journalId, 'a random journal id each time');
  await t.rejects(createJournal(path.join(dir, 'missing', 'journal'), pub), {
    code: 'audit_unavailable',
    message: /ENOENT/,
  });
  await t.rejects(createJournal(path.join(dir, 'bad'), { signPublic: 'AAAA', boxPublic: pub.boxPublic }), TypeError);
});

t.test('open: genesis fields, a key entry, the head', async (t) => {
  const { file, j } = await opened(t);
  t.equal(await j.keyInForce(), keys.sign.publicKey.toString('base64'), 'the key in force is the genesis key');
  t.equal(j.boxPublic, keys.box.publicKey.toString('base64'));
  const r = readJournal(file);
  const genesis = r.entries[0]!.entry;
  t.equal(genesis.type === 'genesis' && genesis.journal_id, j.journalId);
  t.same(
    r.entries.map((e) => e.entry.type),
    ['genesis', 'key'],
  );
  const key = r.entries[1]!.entry;
  t.equal(key.type === 'key' && key.key_id, 2, 'key_id is the key entry’s own seq');
  t.same(j.head(), { seq: 2, hash: r.entries[1]!.hash });
  t.equal(j.latestVault(), null);
});

t.test('1000 appends: a valid chain, every event decrypts with the box key, times from `now`', async (t) => {
  let tick = Date.parse('2030-01-02T03:04:05.000Z');
  const { file, j } = await opened(t, BIG, () => new Date((tick += 1000)));
  await j.setSigningKey(keys.sign.privateKey);
  const heads = [];
  for (let i = 0; i < 1000; i++) heads.push(await j.append({ kind: 'request', i, host: 'api.example.com' }));
  await j.close();
  const r = readJournal(file);
  t.same(r.problems, []);
  t.same(
    await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }),
    { ok: true, problem: null },
    'verifier agrees',
  );
  const bySeq = new Map(r.entries.map((e) => [e.entry.seq, e]));
  for (const [i, h] of heads.entries()) {
    if (bySeq.get(h.seq)?.hash !== h.hash) {
      t.fail(`append ${i} resolved with ${h.seq}:${h.hash}, not in the file`);
      break;
    }
  }
  const events = decryptAll(r.entries, keys.box.publicKey, keys.box.privateKey);
  t.equal(events.size, 1000);
  t.same(events.get(heads[500]!.seq), { kind: 'request', i: 500, host: 'api.example.com' });
  // The key entry (seq 2) took the first tick; seq 6 the fifth.
  t.equal(
    r.entries[5]!.entry.time,
    new Date(Date.parse('2030-01-02T03:04:05.000Z') + 5000).toISOString(),
    'time comes from opts.now',
  );
  // The ciphertext does not show the payload.
  t.notOk(fs.readFileSync(file, 'utf8').includes('api.example.com'));
});

t.test('an event moved elsewhere in the chain no longer decrypts', async (t) => {
  const { file, j } = await opened(t);
  await j.append({ kind: 'a' });
  await j.append({ kind: 'b' });
  await j.close();
  const r = readJournal(file);
  const [e1, e2] = r.entries.filter((e) => e.entry.type === 'event').map((e) => e.entry);
  // e2's ciphertext under e1's place: the associated data (seq, prev) differs.
  const swapped = {
    ...e1!,
    nonce: (e2 as typeof e1 & { nonce: string }).nonce,
    ct: (e2 as typeof e1 & { ct: string }).ct,
  };
  t.throws(
    () =>
      decryptAll(
        [r.entries[0]!, r.entries[1]!, { ...r.entries[2]!, entry: swapped }],
        keys.box.publicKey,
        keys.box.privateKey,
      ),
    /does not decrypt/,
  );
});

t.test('group commit: 64 concurrent appenders share fdatasyncs, seq order is line order', async (t) => {
  const { file, j } = await opened(t);
  await j.setSigningKey(keys.sign.privateKey);
  const before = j.stats();
  const heads = await Promise.all(Array.from({ length: 64 }, (_, i) => j.append({ kind: 'concurrent', i })));
  const one = j.stats();
  t.equal(one.syncs - before.syncs, 1, '64 appends made together: one batch, one fdatasync');
  t.equal(one.entries - before.entries, 65, '64 events and the checkpoint due after 63 entries');

  // 64 appenders, each appending 30 times in a row as soon as its last one resolved.
  const perWriter = await Promise.all(
    Array.from({ length: 64 }, async (_, w) => {
      const mine = [];
      for (let i = 0; i < 30; i++) mine.push(await j.append({ kind: 'writer', w, i }));
      return mine;
    }),
  );
  const two = j.stats();
  t.ok(two.syncs - one.syncs <= 40, `1920 appends took ${two.syncs - one.syncs} fdatasyncs`);
  for (const mine of perWriter) {
    for (let i = 1; i < mine.length; i++)
      if (mine[i]!.seq <= mine[i - 1]!.seq) t.fail('one writer’s appends out of order');
  }
  const all = [...heads, ...perWriter.flat()].map((h) => h.seq);
  t.equal(new Set(all).size, all.length, 'every append has its own seq');
  await j.close();
  const r = readJournal(file);
  t.same(r.problems, []);
  const events = decryptAll(r.entries, keys.box.publicKey, keys.box.privateKey);
  // Line order is seq order, and each writer's events appear in its own order.
  const lastSeen = new Map<number, number>();
  let ordered = true;
  for (const { entry } of r.entries) {
    const p = events.get(entry.seq);
    if (p?.['kind'] !== 'writer') continue;
    const w = p['w'] as number;
    if ((lastSeen.get(w) ?? -1) + 1 !== p['i']) ordered = false;
    lastSeen.set(w, p['i'] as number);
  }
  t.ok(ordered, 'each writer’s events are in the file in the order it made them');
});

t.test('checkpoints: one after every 63 other entries, signed, and at close', async (t) => {
  const { file, j } = await opened(t);
  await j.setSigningKey(keys.sign.privateKey);
  for (let i = 0; i < 300; i++) await j.append({ kind: 'seq', i });
  await Promise.all(Array.from({ length: 300 }, (_, i) => j.append({ kind: 'par', i })));
  await j.close();
  const r = readJournal(file);
  t.same(r.problems, [], 'every checkpoint signs the entry before it with the genesis key');
  const { gaps, tail } = checkpointGaps(file);
  t.ok(gaps.length >= Math.floor(602 / CHECKPOINT_EVERY), `${gaps.length} checkpoints`);
  t.ok(
    gaps.every((g) => g <= CHECKPOINT_EVERY - 1),
    `at most 63 entries between checkpoints: ${gaps.join(',')}`,
  );
  t.same(gaps.slice(0, 5), [63, 63, 63, 63, 63]);
  t.equal(tail, 0, 'close wrote a checkpoint: nothing unsigned');
  t.same(await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }), { ok: true, problem: null });
});

t.test('no signing key: an unsigned tail, no checkpoints; they start once the key is set', async (t) => {
  const { file, j } = await opened(t);
  for (let i = 0; i < 100; i++) await j.append({ kind: 'locked', i });
  t.equal(await j.checkpoint(), null, 'checkpoint() without a key writes nothing');
  t.equal(checkpointGaps(file).gaps.length, 0, 'no checkpoint before the key');
  t.match(
    await verify(file, {}),
    { ok: false, problem: /^unsigned_tail: entries 1 to 102 / },
    'an unsigned tail fails verification…',
  );
  t.same(await verify(file, { allowUnsignedTail: true }), { ok: true, problem: null }, '…unless allowed');

  await j.setSigningKey(keys.sign.privateKey);
  await j.append({ kind: 'unlocked' });
  const after = checkpointGaps(file);
  t.same(after.gaps, [103], 'the first append after the key ends the unsigned stretch');
  const head = await j.checkpoint();
  t.equal(head, null, 'nothing new since that checkpoint');
  await j.append({ kind: 'one more' });
  const cp = await j.checkpoint();
  t.same(cp, j.head(), 'checkpoint() resolves with the checkpoint entry');
  const last = readJournal(file).entries.at(-1)!;
  t.equal(last.entry.type, 'checkpoint');
  t.equal(last.hash, cp!.hash);
  await j.close();
  t.equal(checkpointGaps(file).tail, 0);
});

t.test('close without a key leaves the tail unsigned; a later run signs it', async (t) => {
  const { file, j } = await opened(t);
  await j.append({ kind: 'x' });
  await j.close();
  t.equal(readJournal(file).entries.at(-1)!.entry.type, 'event');
  await t.rejects(j.append({ kind: 'late' }), { code: 'audit_unavailable', message: /closed/ });
  t.throws(() => j.assertSameFile(), { code: 'audit_unavailable' });
  const j2 = await Journal.open({ path: file, segmentSize: BIG });
  await j2.setSigningKey(keys.sign.privateKey);
  await j2.close();
  t.same(
    readJournal(file).entries.map((e) => e.entry.type),
    ['genesis', 'key', 'event', 'key', 'checkpoint'],
  );
  t.same(await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }), { ok: true, problem: null });
});

t.test('setSigningKey: copies the key, checks it against the key in force, ignores later calls', async (t) => {
  const { file, j } = await opened(t);
  await t.rejects(j.setSigningKey(Buffer.alloc(32)), TypeError);
  const other = auditKeys();
  const mismatched = Buffer.concat([keys.sign.privateKey.subarray(0, 32), other.sign.publicKey]);
  await t.rejects(
    j.setSigningKey(mismatched),
    { name: 'TypeError', message: /do not belong together/ },
    'a secret half with another public half',
  );
  await t.rejects(j.setSigningKey(other.sign.privateKey), {
    code: 'audit_unavailable',
    message: /not the key in force .*\(\S+=\)/,
  });
  const mine = Buffer.from(keys.sign.privateKey);
  await j.setSigningKey(mine);
  mine.fill(0); // the caller wipes its copy: the journal kept its own
  await j.setSigningKey(other.sign.privateKey); // ignored, not an error
  await j.append({ kind: 'x' });
  await j.close();
  t.same(readJournal(file).problems, []);
  t.equal(checkpointGaps(file).tail, 0);
});

t.test('vault entries: latestVault, survives reopening', async (t) => {
  const { file, j } = await opened(t);
  const h1 = await j.appendVault(1, 'a'.repeat(64));
  await j.append({ kind: 'x' });
  const h2 = await j.appendVault(2, 'b'.repeat(64));
  t.same(j.latestVault(), { generation: 2, vault_hash: 'b'.repeat(64), seq: h2.seq });
  t.ok(h1.seq < h2.seq);
  await j.close();
  const j2 = await Journal.open({ path: file, segmentSize: BIG });
  t.same(j2.latestVault(), { generation: 2, vault_hash: 'b'.repeat(64), seq: h2.seq });
  await j2.close();
  await t.rejects(j.appendVault(-1, 'a'.repeat(64)), TypeError);
  await t.rejects(j2.appendVault(1, 'A'.repeat(64)), TypeError);
});

t.test('contains: exact seq and hash, any segment', async (t) => {
  const { file, j } = await opened(t, 4096);
  const heads = [];
  for (let i = 0; i < 200; i++) heads.push(await j.append({ kind: 'c', i }));
  t.ok(fs.existsSync(`${file}.3`), 'spans several segments');
  for (const h of [heads[0]!, heads[77]!, heads[199]!, { seq: 1, hash: readJournal(file).entries[0]!.hash }])
    t.ok(await j.contains(h.seq, h.hash), `contains ${h.seq}`);
  t.notOk(await j.contains(heads[77]!.seq, heads[78]!.hash), 'the wrong hash for that seq');
  t.notOk(await j.contains(j.head().seq + 1, heads[0]!.hash), 'past the head');
  t.notOk(await j.contains(0, heads[0]!.hash));
  t.notOk(await j.contains(heads[5]!.seq, 'not a hash'));
});

t.test('an event over the line limit is refused alone; the rest of its batch is written', async (t) => {
  const { file, j } = await opened(t);
  const results = await Promise.allSettled([
    j.append({ kind: 'small', i: 1 }),
    j.append({ kind: 'huge', pad: 'x'.repeat(MAX_LINE_BYTES) }),
    j.append({ kind: 'small', i: 2 }),
  ]);
  t.equal(results[0]!.status, 'fulfilled');
  t.equal(results[2]!.status, 'fulfilled');
  const huge = results[1] as PromiseRejectedResult;
  t.ok(huge.reason instanceof Refusal);
  t.match(huge.reason, { code: 'audit_unavailable', message: /"huge".*over the journal's limit.*not performed/ });
  // A payload JSON cannot encode (a programming error) fails that append only.
  await t.rejects(j.append({ kind: 'bigint', n: 1n as unknown as number }), TypeError);
  await j.append({ kind: 'small', i: 3 });
  await j.close();
  const r = readJournal(file);
  t.same(r.problems, []);
  t.equal(r.entries.filter((e) => e.entry.type === 'event').length, 3);
  t.ok(
    fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .every((l) => l.length < MAX_LINE_BYTES),
  );
});
