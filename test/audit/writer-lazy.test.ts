// Lazy entries (Journal.appendSoon, a request's outcome): written at once,
// synced by the next entry that must be durable or by a short timer, never
// left unsynced at close; the chain verifies whatever the mix.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Journal } from '../../daemon/audit/journal';
import { sodiumReady } from '../../shared/audit-format';
import { AuditKeys, auditKeys, newJournal, readJournal, verify } from '../helpers/journal-writer-driver';

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

async function opened(t: Test): Promise<{ file: string; j: Journal }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-journal-lazy-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = await newJournal(dir, keys);
  const j = await Journal.open({ path: file, segmentSize: 64 * 1024 * 1024 });
  await j.setSigningKey(keys.sign.privateKey);
  t.teardown(() => j.close().catch(() => undefined));
  return { file, j };
}

t.test('a lazy entry is in the file at once and synced within the timer', async (t) => {
  const { file, j } = await opened(t);
  const before = j.stats();
  const { assigned, durable } = j.appendSoon({ kind: 'http_outcome', n: 1 });
  const head = await assigned;
  // Written before any sync: readable in the file now.
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 5));
  const seqs = readJournal(file).entries.map((e) => e.entry.seq);
  t.ok(seqs.includes(head.seq), 'the entry is in the file before it is synced');
  t.equal(j.stats().syncs, before.syncs, 'no sync of its own yet');
  const started = Date.now();
  t.same(await durable, head, 'durable resolves with the same head');
  t.ok(Date.now() - started < 1000, 'the timer synced it');
  t.equal(j.stats().syncs, before.syncs + 1, 'one sync, by the timer');
});

t.test('the next durable entry syncs the lazy ones before it with one fdatasync', async (t) => {
  const { file, j } = await opened(t);
  const lazy = [1, 2, 3].map((n) => j.appendSoon({ kind: 'http_outcome', n }));
  const heads = await Promise.all(lazy.map((l) => l.assigned));
  const before = j.stats();
  const intent = await j.append({ kind: 'http_intent', n: 4 });
  t.ok(intent.seq > Math.max(...heads.map((h) => h.seq)));
  const durable = await Promise.all(lazy.map((l) => l.durable));
  t.same(durable, heads);
  t.equal(j.stats().syncs - before.syncs, 1, 'one fdatasync covered the intent and the lazy entries');
  await j.close();
  t.same(
    await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }),
    { ok: true, problem: null },
    'the journal verifies',
  );
});

t.test('close syncs what is still lazy', async (t) => {
  const { file, j } = await opened(t);
  const l = j.appendSoon({ kind: 'http_outcome', n: 1 });
  const head = await l.assigned;
  await j.close();
  t.same(await l.durable, head);
  t.ok(readJournal(file).entries.some((e) => e.entry.seq === head.seq));
});

t.test('many lazy and durable entries interleaved: the chain holds', async (t) => {
  const { file, j } = await opened(t);
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < 300; i++) {
    if (i % 3 === 0) all.push(j.append({ kind: 'http_intent', i }));
    else all.push(j.appendSoon({ kind: 'http_outcome', i }).durable);
  }
  await Promise.all(all);
  await j.close();
  t.same(
    await verify(file, { pubkey: keys.sign.publicKey.toString('base64') }),
    { ok: true, problem: null },
    'verifies',
  );
});
