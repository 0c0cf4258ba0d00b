// The tamper suite over a journal written by the daemon's own writer (not
// the fixture encoder): at least 1,000 entries over several segments and
// daemon runs. For each kind of damage, at the first, a middle, a
// checkpoint and the last entry, verify names the right entry and kind (a
// torn last write exactly as the daemon's start-up cuts it); the untouched journal verifies. Flipping every byte of one entry in turn is
// caught each time. Also through the real CLI for a representative few.
import t from 'tap';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { segmentPath } from '../../shared/audit-format';
import { verifyJournal, VerifyOptions, ProblemKind } from '../../shared/audit-verify';
import { ed25519Keypair } from '../../shared/crypto';
import { b64, fieldOffset, resign, tamper, TamperOp } from '../helpers/journal-fixture';
import { buildJournalWithWriter } from '../helpers/journal-by-writer';
import { Journal } from '../../daemon/audit/journal';
import { cleanEnv, cli } from '../helpers/postern';

const root = mkdtempSync(join(tmpdir(), 'pt-tamper-writer-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const scratch = (): string => join(root, `c${++counter}`);

t.test('damage to a journal the writer made', async (t) => {
  const j = await buildJournalWithWriter(join(root, 'base'), 1000);
  const N = j.entries;
  t.ok(N >= 1000, `${N} entries`);
  t.ok(j.files.length >= 3, `${j.files.length} segments`);
  t.equal(j.types[N - 1], 'checkpoint', 'the writer closes with a checkpoint');
  const pubkey = b64(j.keys.sign.publicKey);
  const head = j.head;
  const mid = j.types.findIndex((ty, i) => i > N / 2 && ty === 'event') + 1;
  const cp = j.checkpoints.find((s) => s > N / 3) as number;
  const prevCp = j.checkpoints[j.checkpoints.length - 2] as number;
  const lastOf0 = j.files[0]!.length;

  const ok = await verifyJournal(j.path, { pubkey, expectHead: head });
  t.equal(ok.ok, true, JSON.stringify(ok.problem));
  t.equal(ok.entries, N);

  const change = (seq: number, key: string): TamperOp => ({
    op: 'change',
    seq,
    byte: fieldOffset(j.files.flat()[seq - 1] as Buffer, key) + 3,
  });
  const rows: { name: string; op: TamperOp; kind: ProblemKind; seq: number | null; opts?: VerifyOptions }[] = [
    { name: 'first entry changed', op: change(1, 'journal_id'), kind: 'modified', seq: 1 },
    { name: 'middle event changed', op: change(mid, 'ct'), kind: 'modified', seq: mid },
    { name: 'checkpoint changed', op: change(cp, 'head'), kind: 'modified', seq: cp },
    { name: 'last entry of segment 0 changed', op: change(lastOf0, 'prev'), kind: 'modified', seq: lastOf0 },
    { name: 'last entry signature changed', op: change(N, 'sig'), kind: 'bad_signature', seq: N },
    { name: 'last entry prev changed', op: change(N, 'prev'), kind: 'modified', seq: N },
    { name: 'first entry deleted', op: { op: 'delete', seq: 1 }, kind: 'deleted', seq: 1 },
    { name: 'entry 2 deleted', op: { op: 'delete', seq: 2 }, kind: 'deleted', seq: 2 },
    { name: 'middle deleted', op: { op: 'delete', seq: mid }, kind: 'deleted', seq: mid },
    { name: 'checkpoint deleted', op: { op: 'delete', seq: cp }, kind: 'deleted', seq: cp },
    {
      name: 'last deleted, expected head',
      op: { op: 'delete', seq: N },
      kind: 'behind_expected_head',
      seq: N,
      opts: { expectHead: head },
    },
    { name: 'first duplicated', op: { op: 'duplicate', seq: 1 }, kind: 'inserted', seq: 1 },
    { name: 'middle duplicated', op: { op: 'duplicate', seq: mid }, kind: 'inserted', seq: mid },
    { name: 'checkpoint duplicated', op: { op: 'duplicate', seq: cp }, kind: 'inserted', seq: cp },
    { name: 'last duplicated', op: { op: 'duplicate', seq: N }, kind: 'inserted', seq: N },
    { name: 'first two swapped', op: { op: 'swap', seq: 1 }, kind: 'reordered', seq: 1 },
    { name: 'middle swapped', op: { op: 'swap', seq: mid }, kind: 'reordered', seq: mid },
    { name: 'checkpoint swapped with the next', op: { op: 'swap', seq: cp }, kind: 'reordered', seq: cp },
    { name: 'last two swapped', op: { op: 'swap', seq: N - 1 }, kind: 'reordered', seq: N - 1 },
    { name: 'last 3 cut: an unsigned tail', op: { op: 'cut', count: 3 }, kind: 'unsigned_tail', seq: prevCp + 1 },
    {
      name: 'last 3 cut, expected head',
      op: { op: 'cut', count: 3 },
      kind: 'behind_expected_head',
      seq: N - 2,
      opts: { expectHead: head },
    },
    {
      name: 'cut back to a checkpoint, expected head',
      op: { op: 'cut', count: N - prevCp },
      kind: 'behind_expected_head',
      seq: prevCp + 1,
      opts: { expectHead: head },
    },
    // One last complete line that is not an entry: a write cut short, as the daemon sees it.
    {
      name: 'half an entry and its "\\n" appended',
      op: { op: 'insert', before: N + 1, line: Buffer.from('{"v":1,"seq":') },
      kind: 'torn_last_write',
      seq: N + 1,
    },
    {
      name: 'zeros and a "\\n" appended',
      op: { op: 'insert', before: N + 1, line: Buffer.alloc(512) },
      kind: 'torn_last_write',
      seq: N + 1,
    },
    {
      name: 'the same line before the last entry',
      op: { op: 'insert', before: N, line: Buffer.from('{"v":1,"seq":') },
      kind: 'inserted',
      seq: null,
    },
  ];
  for (const row of rows) {
    const path = tamper(j, row.op, scratch());
    const r = await verifyJournal(path, row.opts);
    t.equal(r.ok, false, `${row.name}: fails`);
    t.equal(r.problem?.kind, row.kind, `${row.name}: kind`);
    t.equal(r.problem?.seq ?? null, row.seq, `${row.name}: entry`);
  }

  // Part of a line appended after the last entry (no "\n"): a torn write.
  const torn = tamper(j, { op: 'cut', count: 0 }, scratch());
  appendFileSync(segmentPath(torn, j.files.length - 1), '{"v":1,"seq":' + (N + 1) + ',"prev":"');
  const tr = await verifyJournal(torn, { pubkey, expectHead: head });
  t.equal(tr.problem?.kind, 'torn_last_write', 'an appended partial line: kind');
  t.equal(tr.problem?.seq, N + 1, 'an appended partial line: entry');
  t.equal(tr.entries, N, 'every entry before it checked');

  // One checkpoint re-signed with another key: naming that key, or claiming the journal's.
  const stranger = ed25519Keypair();
  const named = await verifyJournal(resign(j, scratch(), { key: stranger, only: cp }).path);
  t.equal(named.problem?.kind, 'wrong_key', 're-signed, naming the other key: kind');
  t.equal(named.problem?.seq, cp, 're-signed, naming the other key: entry');
  const claimed = await verifyJournal(resign(j, scratch(), { key: stranger, only: cp, claim: 'original' }).path);
  t.equal(claimed.problem?.kind, 'bad_signature', 're-signed, claiming the journal key: kind');
  t.equal(claimed.problem?.seq, cp, 're-signed, claiming the journal key: entry');

  // The daemon's start-up agrees: what verify calls a torn last write it
  // cuts (and records as a repair entry, after which the journal verifies);
  // what verify calls damage it refuses to open, leaving it untouched.
  const lastFile = (p: string): string => segmentPath(p, j.files.length - 1);
  const agreement: { name: string; make: () => string; torn: boolean }[] = [
    { name: 'part of a line', make: () => torn, torn: true },
    {
      name: 'a last line that is not an entry',
      make: () => tamper(j, { op: 'insert', before: N + 1, line: Buffer.from('{"v":1,"seq":') }, scratch()),
      torn: true,
    },
    {
      name: 'a last line of zeros',
      make: () => tamper(j, { op: 'insert', before: N + 1, line: Buffer.alloc(512) }, scratch()),
      torn: true,
    },
    { name: 'the last entry modified', make: () => tamper(j, change(N, 'prev'), scratch()), torn: false },
    {
      name: 'a line that is not an entry before the last entry',
      make: () => tamper(j, { op: 'insert', before: N, line: Buffer.from('{"v":1,"seq":') }, scratch()),
      torn: false,
    },
    {
      name: 'a line that is not an entry, then part of another',
      make: () => {
        const p = tamper(j, { op: 'cut', count: 0 }, scratch());
        appendFileSync(lastFile(p), '{"v":1,"seq":\n{"v":1,');
        return p;
      },
      torn: false,
    },
  ];
  for (const a of agreement) {
    const path = a.make();
    const before = await verifyJournal(path);
    t.equal(before.problem?.kind === 'torn_last_write', a.torn, `${a.name}: verify says ${before.problem?.kind}`);
    const size = statSync(lastFile(path)).size;
    const opened = await Journal.open({ path, segmentSize: 96 * 1024 }).then(
      async (w) => {
        await w.close();
        return null;
      },
      (e: unknown) => e,
    );
    if (a.torn) {
      t.equal(opened, null, `${a.name}: the daemon opens it`);
      const after = await verifyJournal(path, { allowUnsignedTail: true });
      t.equal(after.ok, true, `${a.name}: repaired, it verifies (${JSON.stringify(after.problem)})`);
      const lines = readFileSync(lastFile(path), 'utf8').split('\n');
      t.match(
        lines.find((l) => l.includes('"type":"repair"')),
        `"seq":${N + 1},`,
        `${a.name}: entry ${N + 1} is the repair`,
      );
    } else {
      t.match(opened, { code: 'audit_unavailable' }, `${a.name}: the daemon refuses it`);
      t.equal(statSync(lastFile(path)).size, size, `${a.name}: left untouched`);
    }
  }

  // Every byte of one middle event, flipped in turn.
  const line = j.files.flat()[mid - 1] as Buffer;
  let caught = 0;
  for (let b = 0; b < line.length; b++) {
    const r = await verifyJournal(tamper(j, { op: 'flip', seq: mid, byte: b }, join(root, 'flip')));
    if (!r.ok && r.problem?.seq === mid && r.problem.kind === 'modified') caught += 1;
  }
  t.equal(caught, line.length, `all ${line.length} flips of entry ${mid} caught as modified`);

  // Re-signed with another key: caught by the pinned key.
  const other = ed25519Keypair();
  const resigned = resign(j, scratch(), { key: other, genesis: true });
  const free = await verifyJournal(resigned.path);
  t.equal(free.ok, true, 'consistent on its own');
  const pinned = await verifyJournal(resigned.path, { pubkey });
  t.equal(pinned.problem?.kind, 'wrong_key', 'caught by --pubkey');

  // Through the CLI: untouched, and one damaged copy.
  const env = { env: cleanEnv() };
  let c = cli(env, [
    'audit',
    'verify',
    '--log',
    j.path,
    '--pubkey',
    pubkey,
    '--expect-head',
    `${head.seq}:${head.hash}`,
  ]);
  t.equal(c.code, 0, c.stdout + c.stderr);
  c = cli(env, ['audit', 'verify', '--log', tamper(j, { op: 'delete', seq: mid }, scratch())]);
  t.equal(c.code, 1);
  t.match(c.stderr, `deleted at entry ${mid}`);
});
