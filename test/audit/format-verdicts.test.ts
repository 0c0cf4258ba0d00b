// The verdicts docs/audit-format.md lists ("Problem kinds") are exactly the
// ones the verifier gives: the list is read from the document itself, and
// every kind in it is produced by damaged journals (each way the document
// says it is told apart), through the library and through
// `postern audit verify --json`; the verifier has no kind the document
// leaves out. A kind added on one side only fails here.
import t from 'tap';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeEntry, segmentPath } from '../../shared/audit-format';
import { PROBLEM_KINDS, VerifyOptions, verifyJournal } from '../../shared/audit-verify';
import { ed25519Keypair } from '../../shared/crypto';
import { ROOT, cleanEnv, cliAsync } from '../helpers/postern';
import { b64, buildJournal, fieldOffset, rechainFrom, resign, tamper } from '../helpers/journal-fixture';

// The kinds in the first column of the table under "### Problem kinds".
function documentedKinds(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'audit-format.md'), 'utf8');
  const start = doc.indexOf('\n### Problem kinds\n');
  if (start < 0) return [];
  const table = doc.slice(start).split('\n').slice(2);
  const rows: string[] = [];
  for (const line of table) {
    if (rows.length > 0 && !line.startsWith('|')) break;
    const m = /^\| `([a-z_]+)` \|/.exec(line);
    if (m) rows.push(m[1] as string);
  }
  return rows;
}

interface Case {
  path: string;
  opts?: VerifyOptions;
  seq: number | null;
}

t.test('every verdict the document lists, and no other', async (t) => {
  const documented = documentedKinds();
  t.ok(documented.length > 0, 'the document has a table of problem kinds');
  t.same(documented, [...PROBLEM_KINDS], "the document lists the verifier's kinds, in order");

  const root = mkdtempSync(join(tmpdir(), 'pt-audit-verdicts-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  let counter = 0;
  const scratch = (): string => join(root, `c${++counter}`);
  // audit.log 1-100, .1 101-200, .2 201-300.
  const j = await buildJournal(join(root, 'base'), 300, { segmentEvery: 100 });
  const lines = j.files.flat();
  const ev = j.types.findIndex((type, i) => type === 'event' && i > 140 && j.types[i + 1] === 'event') + 1;
  const cp = j.checkpoints.find((s) => s > 101 && s < 190) as number;
  const last = j.checkpoints[j.checkpoints.length - 2] as number;
  const copy = (): string => tamper(j, { op: 'cut', count: 0 }, scratch());
  const empty = scratch();
  writeFileSync(empty, '');
  const torn = copy();
  appendFileSync(segmentPath(torn, 2), '{"v":1,"seq":301,"prev":"');
  const gap = copy();
  rmSync(segmentPath(gap, 1));
  const e = JSON.parse((lines[ev - 1] as Buffer).toString()) as Record<string, string>;
  const signer = encodeEntry(ev, e['prev'] as string, e['time'] as string, {
    type: 'signer',
    sign_pub: b64(ed25519Keypair().publicKey),
  });

  const vaultAt = (seq: number, prev: string): Buffer =>
    encodeEntry(seq, prev, '2025-01-01T01:00:00.000Z', { type: 'vault', generation: 9, vault_hash: j.head.hash });
  const genesis = JSON.parse((lines[0] as Buffer).toString()) as Record<string, string>;
  const notRegular = scratch();
  mkdirSync(notRegular);
  mkdirSync(join(notRegular, 'audit.log'));
  const fifo = copy();
  rmSync(segmentPath(fifo, 1));
  execFileSync('mkfifo', [segmentPath(fifo, 1)]);
  const emptied = copy();
  writeFileSync(segmentPath(emptied, 1), '');
  const first = (...l: Buffer[]): string => {
    const p = scratch();
    writeFileSync(p, Buffer.concat(l.flatMap((x) => [x, Buffer.from('\n')])));
    return p;
  };

  // For each documented kind, the ways the document says it is told apart.
  const produce: Record<string, Array<[string, () => Case]>> = {
    modified: [
      [
        'an event changed in place',
        () => ({
          path: tamper(j, { op: 'change', seq: ev, byte: fieldOffset(lines[ev - 1] as Buffer, 'ct') + 3 }, scratch()),
          seq: ev,
        }),
      ],
      [
        'a line that does not decode, the chain not going on after it',
        () => ({ path: tamper(j, { op: 'flip', seq: ev, byte: 0 }, scratch()), seq: ev }),
      ],
      [
        'an older entry in place of the next',
        () => ({ path: tamper(j, { op: 'replace', seq: ev, line: lines[ev - 3] as Buffer }, scratch()), seq: ev }),
      ],
      [
        'an entry that chains but claims another seq',
        () => ({
          path: tamper(j, { op: 'replace', seq: ev, line: vaultAt(ev + 5, j.hashes[ev - 2] as string) }, scratch()),
          seq: ev,
        }),
      ],
      [
        'a line longer than MAX_LINE_BYTES at the end',
        () => ({
          path: tamper(j, { op: 'insert', before: 301, line: Buffer.alloc(70_000, 0x61) }, scratch()),
          seq: 301,
        }),
      ],
    ],
    inserted: [
      ['an entry duplicated', () => ({ path: tamper(j, { op: 'duplicate', seq: ev }, scratch()), seq: ev })],
      [
        'a line that is not an entry, the chain going on after it',
        () => ({ path: tamper(j, { op: 'insert', before: ev, line: Buffer.from('hello') }, scratch()), seq: null }),
      ],
      [
        'a line longer than MAX_LINE_BYTES, the chain going on after it',
        () => ({
          path: tamper(j, { op: 'insert', before: ev, line: Buffer.alloc(70_000, 0x61) }, scratch()),
          seq: null,
        }),
      ],
      [
        'a segment entry inside a segment, in the chain',
        () => ({
          path: rechainFrom(
            j,
            ev,
            encodeEntry(ev, e['prev'] as string, e['time'] as string, { type: 'segment', segment: 1 }),
            scratch(),
          ),
          seq: ev,
        }),
      ],
      [
        'a genesis entry after the first line, in the chain',
        () => ({
          path: rechainFrom(
            j,
            ev,
            encodeEntry(ev, e['prev'] as string, e['time'] as string, {
              type: 'genesis',
              journal_id: genesis['journal_id'] as string,
              sign_pub: genesis['sign_pub'] as string,
              box_pub: genesis['box_pub'] as string,
            }),
            scratch(),
          ),
          seq: ev,
        }),
      ],
      [
        'a line before a valid genesis entry',
        () => ({ path: tamper(j, { op: 'insert', before: 1, line: Buffer.from('{}') }, scratch()), seq: null }),
      ],
    ],
    deleted: [
      ['an entry deleted', () => ({ path: tamper(j, { op: 'delete', seq: ev }, scratch()), seq: ev })],
      ['the genesis entry deleted', () => ({ path: tamper(j, { op: 'delete', seq: 1 }, scratch()), seq: 1 })],
    ],
    reordered: [
      ['two entries swapped', () => ({ path: tamper(j, { op: 'swap', seq: ev }, scratch()), seq: ev })],
      ['entry 2 before the genesis entry', () => ({ path: tamper(j, { op: 'swap', seq: 1 }, scratch()), seq: 1 })],
    ],
    bad_signature: [
      [
        "a checkpoint signed by another key, naming the journal's",
        () => ({ path: resign(j, scratch(), { key: ed25519Keypair(), only: cp, claim: 'original' }).path, seq: cp }),
      ],
    ],
    wrong_key: [
      [
        'a checkpoint signed by another key, naming it',
        () => ({ path: resign(j, scratch(), { key: ed25519Keypair(), only: cp }).path, seq: cp }),
      ],
      [
        'a pinned key the journal never uses',
        () => ({ path: j.path, opts: { pubkey: b64(ed25519Keypair().publicKey) }, seq: 1 }),
      ],
    ],
    unsigned_rotation: [
      ['a signer entry followed by an event', () => ({ path: rechainFrom(j, ev, signer, scratch()), seq: ev })],
    ],
    unsigned_tail: [
      ['the last entries cut', () => ({ path: tamper(j, { op: 'cut', count: 3 }, scratch()), seq: last + 1 })],
    ],
    behind_expected_head: [
      [
        'cut before the expected head',
        () => ({ path: tamper(j, { op: 'cut', count: 3 }, scratch()), opts: { expectHead: j.head }, seq: 298 }),
      ],
      [
        'the expected entry with another hash',
        () => ({ path: j.path, opts: { expectHead: { seq: 250, hash: j.head.hash } }, seq: 250 }),
      ],
    ],
    torn_last_write: [
      ['part of a line at the end', () => ({ path: torn, seq: 301 })],
      [
        'one last line that is not an entry',
        () => ({
          path: tamper(j, { op: 'insert', before: 301, line: Buffer.from('{"v":1,"seq":') }, scratch()),
          seq: 301,
        }),
      ],
    ],
    not_a_journal: [
      ['an empty file', () => ({ path: empty, seq: null })],
      ['a directory named audit.log', () => ({ path: notRegular, seq: null })],
      ['a vault entry claiming seq 1', () => ({ path: first(vaultAt(1, '0'.repeat(64))), seq: null })],
      ['segment 1 given as the journal', () => ({ path: segmentPath(j.path, 1), seq: null })],
    ],
    missing_segment: [
      ['segment 1 removed, segment 2 there', () => ({ path: gap, seq: 101 })],
      ['segment 1 emptied', () => ({ path: emptied, seq: 101 })],
      ['a FIFO in place of segment 1', () => ({ path: fifo, seq: 101 })],
    ],
  };
  t.same(Object.keys(produce).sort(), [...documented].sort(), 'a damaged journal for each documented kind');

  const env = { env: cleanEnv() };
  const jobs = documented.flatMap((kind) =>
    (produce[kind] ?? []).map(([what, make]) => async (): Promise<void> => {
      const c = make();
      const r = await verifyJournal(c.path, c.opts);
      t.match(
        r,
        { ok: false, problem: { kind, seq: c.seq } },
        `${kind} at ${c.seq}, ${what}: the library (${r.problem?.kind}: ${r.problem?.message})`,
      );
      const args = ['audit', 'verify', '--log', c.path, '--json'];
      if (c.opts?.expectHead) args.push('--expect-head', `${c.opts.expectHead.seq}:${c.opts.expectHead.hash}`);
      if (c.opts?.pubkey) args.push('--pubkey', c.opts.pubkey);
      const out = await cliAsync(env, args);
      t.equal(out.code, 1, `${kind}, ${what}: the CLI exits 1`);
      t.equal(
        out.stderr,
        `postern: audit verification failed: ${kind}${c.seq === null ? '' : ` at entry ${c.seq}`}\n`,
        `${kind}, ${what}: one line on stderr`,
      );
      t.match(JSON.parse(out.stdout), { ok: false, problem: { kind, seq: c.seq } }, `${kind}, ${what}: the CLI report`);
    }),
  );
  // A few CLI processes at a time: the machine is shared.
  const running = Array.from({ length: 3 }, async () => {
    for (let job = jobs.shift(); job; job = jobs.shift()) await job();
  });
  await Promise.all(running);
});
