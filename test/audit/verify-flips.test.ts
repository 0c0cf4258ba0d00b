// Every byte of an entry, changed in turn, is caught and blamed on that
// entry: the genesis, an event, a checkpoint in the middle, and (with the
// expected head, the only thing that covers it) the last checkpoint.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyJournal } from '../../shared/audit-verify';
import { buildJournal, tamper } from '../helpers/journal-fixture';

const N = 80; // checkpoints at 64 and 80

t.test('flipping every byte', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'pt-audit-flips-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const j = await buildJournal(join(root, 'base'), N);
  t.same(j.checkpoints, [64, 80]);
  const lines = j.files.flat();
  const event = 40;
  t.equal(j.types[event - 1], 'event');
  const scratch = join(root, 'flip');

  // XOR 0x01 keeps most bytes printable (the subtle case); 0x80 makes them non-ASCII.
  const plan: Array<[number, number[]]> = [
    [1, [0x01]],
    [event, [0x01, 0x80]],
    [64, [0x01]],
  ];
  for (const [seq, masks] of plan) {
    const line = lines[seq - 1] as Buffer;
    let caught = 0;
    for (let byte = 0; byte < line.length; byte++) {
      for (const mask of masks) {
        const r = await verifyJournal(tamper(j, { op: 'flip', seq, byte, mask }, scratch));
        if (!r.ok && r.problem?.kind === 'modified' && r.problem.seq === seq) caught += 1;
        else t.fail(`entry ${seq} byte ${byte} ^0x${mask.toString(16)}: ${JSON.stringify(r.problem)}`);
      }
    }
    t.equal(
      caught,
      line.length * masks.length,
      `all ${line.length * masks.length} flips of entry ${seq} (${j.types[seq - 1]}) are reported as modified at ${seq}`,
    );
  }

  // The last checkpoint's own bytes are committed to only by an expected head
  // (docs/audit-format.md, "What verification cannot show").
  const last = lines[N - 1] as Buffer;
  const timeStart = last.indexOf('"time":"') + 8;
  const kinds = new Map<string, number>();
  let unseen = 0;
  for (let byte = 0; byte < last.length; byte++) {
    const damaged = tamper(j, { op: 'flip', seq: N, byte }, scratch);
    const r = await verifyJournal(damaged, { expectHead: j.head });
    if (r.ok || r.problem?.seq !== N) t.fail(`last entry byte ${byte}: ${JSON.stringify(r.problem)}`);
    kinds.set(r.problem?.kind ?? 'none', (kinds.get(r.problem?.kind ?? 'none') ?? 0) + 1);
    if ((await verifyJournal(damaged)).ok) {
      unseen += 1;
      // Without the expected head only changes to its time can go unseen.
      if (byte < timeStart || byte >= timeStart + 24)
        t.fail(`last entry byte ${byte} (outside the time) passes without --expect-head`);
    }
  }
  t.equal(
    [...kinds.values()].reduce((a, b) => a + b, 0),
    last.length,
    `every flip of the last entry caught with --expect-head: ${JSON.stringify([...kinds])}`,
  );
  t.ok(
    kinds.has('modified') && kinds.has('bad_signature') && kinds.has('behind_expected_head'),
    'as modified, bad signature or a different head',
  );
  t.ok(unseen > 0 && unseen <= 24, `${unseen} flips, all within the 24-character time, pass without --expect-head`);
});
