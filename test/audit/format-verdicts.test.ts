// The verdicts docs/audit-format.md lists ("Problem kinds") are exactly the
// ones the verifier gives: the list is read from the document itself, every
// kind in it is produced by a damaged journal, through the library and
// through `postern audit verify --json`, and the verifier has no kind the
// document leaves out. A kind added on one side only fails here.
import t from 'tap';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  t.same(documented, [...PROBLEM_KINDS], 'the document lists the verifier\'s kinds, in order');

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
  const signer = encodeEntry(ev, e['prev'] as string, e['time'] as string, { type: 'signer', sign_pub: b64(ed25519Keypair().publicKey) });

  const produce: Record<string, () => Case> = {
    modified: () => ({ path: tamper(j, { op: 'change', seq: ev, byte: fieldOffset(lines[ev - 1] as Buffer, 'ct') + 3 }, scratch()), seq: ev }),
    inserted: () => ({ path: tamper(j, { op: 'duplicate', seq: ev }, scratch()), seq: ev }),
    deleted: () => ({ path: tamper(j, { op: 'delete', seq: ev }, scratch()), seq: ev }),
    reordered: () => ({ path: tamper(j, { op: 'swap', seq: ev }, scratch()), seq: ev }),
    bad_signature: () => ({ path: resign(j, scratch(), { key: ed25519Keypair(), only: cp, claim: 'original' }).path, seq: cp }),
    wrong_key: () => ({ path: resign(j, scratch(), { key: ed25519Keypair(), only: cp }).path, seq: cp }),
    unsigned_rotation: () => ({ path: rechainFrom(j, ev, signer, scratch()), seq: ev }),
    unsigned_tail: () => ({ path: tamper(j, { op: 'cut', count: 3 }, scratch()), seq: last + 1 }),
    behind_expected_head: () => ({ path: tamper(j, { op: 'cut', count: 3 }, scratch()), opts: { expectHead: j.head }, seq: 298 }),
    torn_last_write: () => ({ path: torn, seq: 301 }),
    not_a_journal: () => ({ path: empty, seq: null }),
    missing_segment: () => ({ path: gap, seq: 101 }),
  };
  t.same(Object.keys(produce).sort(), [...documented].sort(), 'a damaged journal for each documented kind');

  const env = { env: cleanEnv() };
  await Promise.all(
    documented.map(async (kind) => {
      const make = produce[kind];
      if (!make) return;
      const c = make();
      const r = await verifyJournal(c.path, c.opts);
      t.match(r, { ok: false, problem: { kind, seq: c.seq } }, `${kind} at ${c.seq}: the library (${r.problem?.kind}: ${r.problem?.message})`);
      const args = ['audit', 'verify', '--log', c.path, '--json'];
      if (c.opts?.expectHead) args.push('--expect-head', `${c.opts.expectHead.seq}:${c.opts.expectHead.hash}`);
      const out = await cliAsync(env, args);
      t.equal(out.code, 1, `${kind}: the CLI exits 1`);
      t.equal(out.stderr, `postern: audit verification failed: ${kind}${c.seq === null ? '' : ` at entry ${c.seq}`}\n`, `${kind}: one line on stderr`);
      t.match(JSON.parse(out.stdout), { ok: false, problem: { kind, seq: c.seq } }, `${kind}: the CLI report`);
    }),
  );
});
