// verifyJournal against real journals and every kind of damage, at the
// first, a middle, a checkpoint, a segment boundary and the last entry:
// the first problem must carry the right kind and entry number. And the
// head, past a torn last write.
import t, { Test } from 'tap';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeEntry, segmentPath } from '../../shared/audit-format';
import { ProblemKind, VerifyOptions, VerifyReport, journalHead, verifyJournal } from '../../shared/audit-verify';
import { ed25519Keypair } from '../../shared/crypto';
import {
  TamperOp,
  b64,
  buildJournal,
  fieldOffset,
  makeKeys,
  rechainFrom,
  resign,
  tamper,
} from '../helpers/journal-fixture';

const N = 1000;
const SEGMENT = 400; // entries per file: audit.log 1-400, .1 401-800, .2 801-1000

const root = mkdtempSync(join(tmpdir(), 'pt-audit-verify-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const scratch = (): string => join(root, `c${++counter}`);

function expectProblem(tt: Test, r: VerifyReport, kind: ProblemKind, seq: number | null, what: string): void {
  tt.equal(r.ok, false, `${what}: fails`);
  tt.equal(r.problem?.kind, kind, `${what}: kind ${kind} (${r.problem?.message})`);
  tt.equal(r.problem?.seq, seq, `${what}: entry ${seq} (${r.problem?.message})`);
}

t.test('verifyJournal', async (t) => {
  const j = await buildJournal(join(root, 'base'), N, { segmentEvery: SEGMENT, restartEvery: 300 });
  const mid = 555;
  const cp = j.checkpoints.find((s) => s > 500 && s < 800) as number;
  const cpLastOf0 = 400; // the checkpoint that closes segment 0
  const prevCp = j.checkpoints[j.checkpoints.length - 2] as number;
  t.equal(j.types[mid - 1], 'event');
  t.equal(j.types[cp - 1], 'checkpoint');
  t.equal(j.types[cpLastOf0 - 1], 'checkpoint');
  t.equal(j.types[400], 'segment');
  t.equal(j.types[N - 1], 'checkpoint');
  const pubkey = b64(j.keys.sign.publicKey);
  const head = j.head;

  const check = async (p: string, opts?: VerifyOptions): Promise<VerifyReport> => verifyJournal(p, opts);

  t.test('the untouched journal verifies, with and without pins', async (t) => {
    for (const opts of [
      {},
      { pubkey },
      { pubkey, expectHead: head },
      { expectHead: { seq: 300, hash: j.hashes[299] as string } },
    ]) {
      const r = await check(j.path, opts);
      t.same(r, {
        ok: true,
        entries: N,
        checkpoints: j.checkpoints.length,
        segments: 3,
        head,
        keyPinned: 'pubkey' in opts,
        signingKeys: [{ key: pubkey, since: 1 }],
        signedThrough: N - 1,
        unsignedTail: 0,
        problem: null,
      });
    }
    // The directory stands for the journal in it.
    t.equal((await check(j.dir)).ok, true);
  });

  interface Row {
    name: string;
    op: TamperOp;
    kind: ProblemKind;
    seq: number | null;
    opts?: VerifyOptions;
  }
  // A character a few places into a field's value, changed so that the line still decodes.
  const flipAt = (seq: number, key: string): TamperOp => ({
    op: 'change',
    seq,
    byte: fieldOffset(j.files.flat()[seq - 1] as Buffer, key) + 3,
  });
  const rows: Row[] = [
    // modified
    { name: 'genesis journal_id changed', op: flipAt(1, 'journal_id'), kind: 'modified', seq: 1 },
    { name: 'genesis no longer decodes', op: { op: 'flip', seq: 1, byte: 0 }, kind: 'modified', seq: 1 },
    { name: 'genesis prev changed', op: flipAt(1, 'prev'), kind: 'modified', seq: 1 },
    { name: 'middle event ct changed', op: flipAt(mid, 'ct'), kind: 'modified', seq: mid },
    { name: 'middle event time changed', op: flipAt(mid, 'time'), kind: 'modified', seq: mid },
    { name: 'middle event prev changed', op: flipAt(mid, 'prev'), kind: 'modified', seq: mid },
    { name: 'checkpoint sig changed', op: flipAt(cp, 'sig'), kind: 'modified', seq: cp },
    { name: 'checkpoint head changed', op: flipAt(cp, 'head'), kind: 'modified', seq: cp },
    { name: 'segment entry changed', op: { op: 'flip', seq: 401, byte: 20 }, kind: 'modified', seq: 401 },
    { name: 'last entry of segment 0 changed', op: flipAt(400, 'sig'), kind: 'modified', seq: 400 },
    { name: 'last entry prev changed', op: flipAt(N, 'prev'), kind: 'modified', seq: N },
    { name: 'last entry (checkpoint) sig changed', op: flipAt(N, 'sig'), kind: 'bad_signature', seq: N },
    {
      name: 'last entry time changed, expected head',
      op: flipAt(N, 'time'),
      kind: 'behind_expected_head',
      seq: N,
      opts: { expectHead: head },
    },
    // deleted
    { name: 'genesis deleted', op: { op: 'delete', seq: 1 }, kind: 'deleted', seq: 1 },
    { name: 'entry 2 deleted', op: { op: 'delete', seq: 2 }, kind: 'deleted', seq: 2 },
    { name: 'middle entry deleted', op: { op: 'delete', seq: mid }, kind: 'deleted', seq: mid },
    { name: 'checkpoint deleted', op: { op: 'delete', seq: cp }, kind: 'deleted', seq: cp },
    { name: 'segment entry deleted', op: { op: 'delete', seq: 401 }, kind: 'deleted', seq: 401 },
    { name: 'last entry deleted', op: { op: 'delete', seq: N }, kind: 'unsigned_tail', seq: prevCp + 1 },
    {
      name: 'last entry deleted, expected head',
      op: { op: 'delete', seq: N },
      kind: 'behind_expected_head',
      seq: N,
      opts: { expectHead: head },
    },
    // inserted
    { name: 'genesis duplicated', op: { op: 'duplicate', seq: 1 }, kind: 'inserted', seq: 1 },
    { name: 'middle entry duplicated', op: { op: 'duplicate', seq: mid }, kind: 'inserted', seq: mid },
    { name: 'checkpoint duplicated', op: { op: 'duplicate', seq: cp }, kind: 'inserted', seq: cp },
    { name: 'last of segment 0 duplicated', op: { op: 'duplicate', seq: 400 }, kind: 'inserted', seq: 400 },
    { name: 'last entry duplicated', op: { op: 'duplicate', seq: N }, kind: 'inserted', seq: N },
    {
      name: 'a non-entry line inserted',
      op: { op: 'insert', before: mid, line: Buffer.from('hello') },
      kind: 'inserted',
      seq: null,
    },
    {
      name: 'a line before the genesis',
      op: { op: 'insert', before: 1, line: Buffer.from('{}') },
      kind: 'inserted',
      seq: null,
    },
    // reordered
    { name: 'genesis and entry 2 swapped', op: { op: 'swap', seq: 1 }, kind: 'reordered', seq: 1 },
    { name: 'middle entries swapped', op: { op: 'swap', seq: mid }, kind: 'reordered', seq: mid },
    { name: 'checkpoint and the next swapped', op: { op: 'swap', seq: cp }, kind: 'reordered', seq: cp },
    {
      name: 'entry before a checkpoint and it swapped',
      op: { op: 'swap', seq: cp - 1 },
      kind: 'reordered',
      seq: cp - 1,
    },
    { name: 'swapped across the segment boundary', op: { op: 'swap', seq: 400 }, kind: 'reordered', seq: 400 },
    { name: 'the last two swapped', op: { op: 'swap', seq: N - 1 }, kind: 'reordered', seq: N - 1 },
    // cut
    { name: 'last 3 cut', op: { op: 'cut', count: 3 }, kind: 'unsigned_tail', seq: prevCp + 1 },
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
    {
      name: 'cut into segment 1, expected head',
      op: { op: 'cut', count: 300 },
      kind: 'behind_expected_head',
      seq: N - 299,
      opts: { expectHead: head, allowUnsignedTail: true },
    },
    // pins
    {
      name: 'a pin that is not the journal key',
      op: { op: 'cut', count: 0 },
      kind: 'wrong_key',
      seq: 1,
      opts: { pubkey: b64(Buffer.alloc(32, 7)) },
    },
    {
      name: 'an expected head beyond the journal',
      op: { op: 'cut', count: 0 },
      kind: 'behind_expected_head',
      seq: N + 1,
      opts: { expectHead: { seq: N + 5, hash: head.hash } },
    },
    {
      name: 'an expected head with another hash',
      op: { op: 'cut', count: 0 },
      kind: 'behind_expected_head',
      seq: 300,
      opts: { expectHead: { seq: 300, hash: head.hash } },
    },
  ];
  t.test('damage table', async (t) => {
    for (const row of rows) {
      const p = tamper(j, row.op, scratch());
      expectProblem(t, await check(p, row.opts), row.kind, row.seq, row.name);
    }
  });

  t.test('signatures and keys', async (t) => {
    const other = ed25519Keypair();
    const wrongKey = resign(j, scratch(), { key: other, only: cp });
    expectProblem(t, await check(wrongKey.path), 'wrong_key', cp, 'one checkpoint signed by another key, naming it');
    expectProblem(t, await check(wrongKey.path, { pubkey }), 'wrong_key', cp, 'same, pinned');
    const badSig = resign(j, scratch(), { key: other, only: cp, claim: 'original' });
    expectProblem(
      t,
      await check(badSig.path),
      'bad_signature',
      cp,
      'one checkpoint signed by another key, naming the journal key',
    );
    const lastBad = resign(j, scratch(), { key: other, only: N, claim: 'original' });
    expectProblem(t, await check(lastBad.path), 'bad_signature', N, 'the last checkpoint forged');
    const allOther = resign(j, scratch(), { key: other });
    expectProblem(
      t,
      await check(allOther.path),
      'wrong_key',
      j.checkpoints[0] as number,
      'every checkpoint re-signed, genesis kept',
    );
    // Re-signed from the genesis on: consistent, so only the pinned key shows it.
    const whole = resign(j, scratch(), { key: other, genesis: true });
    t.equal((await check(whole.path)).ok, true, 'a journal rewritten under another key verifies without a pin');
    expectProblem(t, await check(whole.path, { pubkey }), 'wrong_key', 1, 'and is caught with --pubkey');
    t.equal((await check(whole.path, { pubkey: b64(other.publicKey) })).ok, true, 'pinned to its own key it verifies');
    // A journal from another vault.
    const foreign = await buildJournal(scratch(), 200, { keys: await makeKeys() });
    t.equal((await check(foreign.path)).ok, true);
    expectProblem(t, await check(foreign.path, { pubkey }), 'wrong_key', 1, 'another vault, pinned');
    // A checkpoint that signs another head than the entry before it.
    const lines = j.files.flat();
    const c = JSON.parse((lines[cp - 1] as Buffer).toString()) as Record<string, unknown>;
    const forged = encodeEntry(cp, c['prev'] as string, c['time'] as string, {
      type: 'checkpoint',
      head_seq: cp - 2,
      head: c['head'] as string,
      sign_pub: c['sign_pub'] as string,
      sig: c['sig'] as string,
    });
    expectProblem(
      t,
      await check(rechainFrom(j, cp, forged, scratch())),
      'bad_signature',
      cp,
      'a checkpoint naming another head',
    );
    // The same chain with a valid checkpoint verifies: the table above is not vacuous.
    t.equal((await check(rechainFrom(j, cp, lines[cp - 1] as Buffer, scratch()))).ok, true);
  });

  t.test('unsigned tails', async (t) => {
    const tail = await buildJournal(scratch(), 300, { unsignedTail: 10 });
    const r = await check(tail.path);
    expectProblem(t, r, 'unsigned_tail', 291, 'ten entries after the last checkpoint');
    t.equal(r.unsignedTail, 10);
    t.equal(r.signedThrough, 289);
    const allowed = await check(tail.path, { allowUnsignedTail: true });
    t.equal(allowed.ok, true);
    t.equal(allowed.unsignedTail, 10);
    const fresh = await buildJournal(scratch(), 1);
    expectProblem(t, await check(fresh.path), 'unsigned_tail', 1, 'a journal of only its genesis');
    t.match(await check(fresh.path, { allowUnsignedTail: true }), {
      ok: true,
      entries: 1,
      checkpoints: 0,
      signedThrough: null,
      unsignedTail: 1,
    });
    // A forged entry appended after the last checkpoint chains, but is unsigned.
    const extra = encodeEntry(N + 1, head.hash, '2025-01-01T01:00:00.000Z', {
      type: 'vault',
      generation: 99,
      vault_hash: head.hash,
    });
    const p = tamper(j, { op: 'insert', before: N + 1, line: extra }, scratch());
    expectProblem(t, await check(p), 'unsigned_tail', N + 1, 'an appended forged entry');
  });

  t.test('torn writes and segments', async (t) => {
    const torn = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(torn, 2), '{"v":1,"seq":1001,"prev":"');
    const r = await check(torn);
    expectProblem(t, r, 'torn_last_write', N + 1, 'half a line at the end');
    t.equal(r.entries, N);
    t.equal(r.problem?.file, segmentPath(torn, 2));
    t.equal(r.problem?.line, 201);

    const noNewline = tamper(j, { op: 'cut', count: 0 }, scratch());
    const last = segmentPath(noNewline, 2);
    truncateSync(last, Buffer.concat(j.files[2] as Buffer[]).length + (j.files[2] as Buffer[]).length - 1);
    expectProblem(t, await check(noNewline), 'torn_last_write', N, 'the final "\\n" missing');

    const emptyNext = tamper(j, { op: 'cut', count: 0 }, scratch());
    writeFileSync(segmentPath(emptyNext, 3), '');
    expectProblem(t, await check(emptyNext), 'torn_last_write', N + 1, 'an empty last segment');

    // One last line that is not an entry: what a crash can leave, cut by the daemon at its next start.
    for (const [what, junk] of [
      ['half an entry and its "\\n"', '{"v":1,"seq":\n'],
      ['zeros and a "\\n"', '\0'.repeat(300) + '\n'],
      ['an empty line', '\n'],
    ] as const) {
      const p = tamper(j, { op: 'cut', count: 0 }, scratch());
      appendFileSync(segmentPath(p, 2), junk);
      const g = await check(p);
      expectProblem(t, g, 'torn_last_write', N + 1, `a last line of ${what}`);
      t.equal(g.problem?.line, 201, `${what}: its line`);
      t.match(g.problem?.message, /start the daemon once, it cuts the torn line/, `${what}: the advice`);
    }
    const startTorn = tamper(j, { op: 'cut', count: 0 }, scratch());
    writeFileSync(segmentPath(startTorn, 3), '{"v":1,"seq":1001,"pr\n');
    expectProblem(
      t,
      await check(startTorn),
      'torn_last_write',
      N + 1,
      'a new last segment holding only a line that is not an entry',
    );
    // More than one write's worth, or an entry, is damage.
    const twoLines = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(twoLines, 2), '{"v":1,"seq":\n{"v":1,');
    expectProblem(t, await check(twoLines), 'modified', N + 1, 'a line that is not an entry, then part of another');
    const twoFull = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(twoFull, 2), 'junk\njunk\n');
    expectProblem(t, await check(twoFull), 'modified', N + 1, 'two last lines that are not entries');
    const overlong = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(overlong, 2), 'a'.repeat(70_000) + '\n');
    expectProblem(t, await check(overlong), 'modified', N + 1, 'a last line longer than MAX_LINE_BYTES');
    const earlier = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(earlier, 1), '{"v":1,"seq":\n');
    expectProblem(
      t,
      await check(earlier),
      'inserted',
      null,
      'a line that is not an entry at the end of an earlier segment',
    );
    // A last entry that decodes but does not chain was put there.
    const near = head.hash.slice(0, 63) + (head.hash.endsWith('0') ? '1' : '0');
    const closeForgery = tamper(
      j,
      {
        op: 'insert',
        before: N + 1,
        line: encodeEntry(N + 1, near, '2025-01-01T01:00:00.000Z', {
          type: 'vault',
          generation: 99,
          vault_hash: head.hash,
        }),
      },
      scratch(),
    );
    expectProblem(t, await check(closeForgery), 'modified', N + 1, 'a last entry one digit of prev away from chaining');
    const farForgery = tamper(
      j,
      {
        op: 'insert',
        before: N + 1,
        line: encodeEntry(N + 1, j.hashes[N - 2] as string, '2025-01-01T01:00:00.000Z', {
          type: 'vault',
          generation: 99,
          vault_hash: head.hash,
        }),
      },
      scratch(),
    );
    expectProblem(
      t,
      await check(farForgery),
      'modified',
      N,
      'a last entry naming an unrelated hash: the entry before it is blamed',
    );

    const midTorn = tamper(j, { op: 'cut', count: 0 }, scratch());
    const s0 = Buffer.concat((j.files[0] as Buffer[]).flatMap((l) => [l, Buffer.from('\n')]));
    writeFileSync(midTorn, s0.subarray(0, s0.length - 1));
    expectProblem(t, await check(midTorn), 'modified', 400, 'segment 0 ends mid-line while segment 1 follows');

    const gap = tamper(j, { op: 'cut', count: 0 }, scratch());
    rmSync(segmentPath(gap, 1));
    const g = await check(gap);
    expectProblem(t, g, 'missing_segment', 401, 'segment 1 removed, segment 2 present');
    t.equal(g.entries, 400);

    const renumbered = tamper(j, { op: 'cut', count: 0 }, scratch());
    rmSync(segmentPath(renumbered, 1));
    renameSync(segmentPath(renumbered, 2), segmentPath(renumbered, 1));
    expectProblem(t, await check(renumbered), 'missing_segment', 401, 'segment 1 removed, the others renumbered');

    const emptyMid = tamper(j, { op: 'cut', count: 0 }, scratch());
    writeFileSync(segmentPath(emptyMid, 1), '');
    expectProblem(t, await check(emptyMid), 'missing_segment', 401, 'segment 1 emptied');

    const lost = tamper(j, { op: 'cut', count: 0 }, scratch());
    rmSync(segmentPath(lost, 2));
    expectProblem(
      t,
      await check(lost, { expectHead: head }),
      'behind_expected_head',
      801,
      'the last segment removed, expected head',
    );

    // A segment file that does not begin with its segment entry, though the chain holds.
    const split = tamper(j, { op: 'cut', count: 0 }, scratch());
    const f0 = j.files[0] as Buffer[];
    const f1 = j.files[1] as Buffer[];
    writeFileSync(split, Buffer.concat(f0.slice(0, 399).flatMap((l) => [l, Buffer.from('\n')])));
    writeFileSync(
      segmentPath(split, 1),
      Buffer.concat([f0[399] as Buffer, ...f1].flatMap((l) => [l, Buffer.from('\n')])),
    );
    expectProblem(t, await check(split), 'missing_segment', 400, 'segment 1 begins with another entry');
  });

  t.test('the head skips a torn last write as the daemon cuts it, and nothing else', async (t) => {
    const at = (seq: number): { seq: number; hash: string } => ({ seq, hash: j.hashes[seq - 1] as string });
    const headOf = async (p: string): Promise<{ seq: number; hash: string }> => {
      const h = await journalHead(p);
      return { seq: h.seq, hash: h.hash };
    };
    const copy = (): string => tamper(j, { op: 'cut', count: 0 }, scratch());
    t.same(await headOf(copy()), head, 'untouched');
    for (const [what, junk] of [
      ['part of a line', '{"v":1,"seq":1001'],
      ['a last line that is not an entry', '{"v":1,"seq":\n'],
      ['zeros and a "\\n"', '\0'.repeat(64) + '\n'],
    ] as const) {
      const p = copy();
      appendFileSync(segmentPath(p, 2), junk);
      t.same(await headOf(p), head, what);
    }
    const onlyTorn = copy();
    writeFileSync(segmentPath(onlyTorn, 3), 'junk\n');
    t.same(await headOf(onlyTorn), head, 'a new last segment holding only a line that is not an entry');
    const cut = tamper(j, { op: 'cut', count: 3 }, scratch());
    appendFileSync(segmentPath(cut, 2), 'junk\n');
    t.same(await headOf(cut), at(N - 3), 'after a cut');
    for (const [what, junk] of [
      ['two lines that are not entries', 'junk\njunk\n'],
      ['a line that is not an entry, then part of one', 'junk\n{"v"'],
      ['a line longer than any entry', 'a'.repeat(70_000) + '\n'],
    ] as const) {
      const p = copy();
      appendFileSync(segmentPath(p, 2), junk);
      await t.rejects(
        journalHead(p),
        { code: 'not_found', message: /is not a journal entry; run `postern audit verify/ },
        what,
      );
    }
  });

  t.test('not a journal', async (t) => {
    const d = scratch();
    mkdirSync(d);
    const empty = join(d, 'empty');
    writeFileSync(empty, '');
    expectProblem(t, await check(empty), 'not_a_journal', null, 'an empty file');
    expectProblem(t, await check(join(d, 'missing')), 'not_a_journal', null, 'a missing file');
    expectProblem(t, await check(d), 'not_a_journal', null, 'a directory without audit.log');
    const json = join(d, 'json');
    writeFileSync(json, '{"hello":"world"}\n');
    expectProblem(t, await check(json), 'not_a_journal', null, 'some JSON');
    const noLine = join(d, 'noline');
    writeFileSync(noLine, (j.files[0] as Buffer[])[0] as Buffer);
    expectProblem(t, await check(noLine), 'not_a_journal', null, 'a genesis without its "\\n"');
    // A later segment given in place of segment 0.
    expectProblem(t, await check(segmentPath(j.path, 1)), 'not_a_journal', null, 'segment 1 given as the journal');
    // An entry that is not the genesis, but claims seq 1.
    const one = join(d, 'one');
    writeFileSync(
      one,
      encodeEntry(1, '0'.repeat(64), '2025-01-01T00:00:00.000Z', {
        type: 'vault',
        generation: 1,
        vault_hash: head.hash,
      }) + '\n',
    );
    expectProblem(t, await check(one), 'not_a_journal', null, 'a vault entry with seq 1');
  });

  t.test('the first entries removed', async (t) => {
    const d = scratch();
    mkdirSync(d);
    const second = join(d, 'second');
    writeFileSync(second, Buffer.concat([(j.files[0] as Buffer[])[1] as Buffer, Buffer.from('\n')]));
    const r = await check(second);
    expectProblem(t, r, 'deleted', 1, 'a journal of entry 2 alone');
    t.match(
      r.problem?.message,
      /^entry 1 \(the genesis entry\) is missing: the first line \(second line 1\) is entry 2;/,
    );
    const from5 = join(d, 'from5');
    writeFileSync(from5, Buffer.concat((j.files[0] as Buffer[]).slice(4).flatMap((l) => [l, Buffer.from('\n')])));
    const r5 = await check(from5);
    expectProblem(t, r5, 'deleted', 1, 'a journal starting at entry 5');
    t.match(r5.problem?.message, /^entries 1 \(the genesis entry\) to 4 are missing/);
    t.equal(r5.entries, 0);
  });

  t.test('bad options are refused', async (t) => {
    await t.rejects(check(j.path, { pubkey: 'abc' }), { code: 'bad_request' });
    await t.rejects(check(j.path, { expectHead: { seq: 0, hash: head.hash } }), { code: 'bad_request' });
    await t.rejects(check(j.path, { expectHead: { seq: 5, hash: 'ABC' } }), { code: 'bad_request' });
  });

  t.test('the report points at the file and line', async (t) => {
    const r = await check(tamper(j, { op: 'delete', seq: 650 }, scratch()));
    t.equal(r.problem?.file.endsWith('audit.log.1'), true);
    t.equal(r.problem?.line, 650 - 400);
    t.equal(r.entries, 649);
    t.same(r.head, { seq: 649, hash: j.hashes[648] });
    t.match(r.problem?.message, /entry 650 is missing/);
  });
});
