// What a hostile line puts in front of the verifier's own code: the text
// of a value that fails decoding, and JSON nested deeper than the call
// stack. The verifier, `audit head` and the daemon's start-up scan must
// treat such a line as one more line that is not an entry (a torn last
// write at the end, damage elsewhere): never crash on it, and never copy
// terminal control characters from the file into what they print.
import t from 'tap';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, statSync, truncateSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Journal } from '../../daemon/audit/journal';
import { encodeEntry, sodiumReady } from '../../shared/audit-format';
import { verifyJournal } from '../../shared/audit-verify';
import { CLI, cleanEnv, cli } from '../helpers/postern';
import { buildJournal, tamper } from '../helpers/journal-fixture';
import { auditKeys, newJournal, readJournal } from '../helpers/journal-writer-driver';

const N = 130;
const root = mkdtempSync(join(tmpdir(), 'pt-audit-content-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const scratch = (): string => join(root, `c${++counter}`);
const env = { env: cleanEnv() };

// A vault entry for `seq` after `prev` whose `v` is the raw JSON text `v`:
// the keys and types of a real entry, so only the version check refuses it.
function withVersion(seq: number, prev: string, v: string): Buffer {
  const real = encodeEntry(seq, prev, '2025-01-01T02:00:00.000Z', {
    type: 'vault',
    generation: 3,
    vault_hash: 'ab'.repeat(32),
  }).toString('latin1');
  return Buffer.from(real.replace('{"v":1,', `{"v":${v},`), 'latin1');
}

// ESC ] 0 ; … BEL sets the terminal's title; ESC [ 8 m hides what follows
// (the real "result: FAILED"); CR and ESC [ 2 K rewrite the line shown.
const ESCAPES = '"\\u001b]0;journal ok\\u0007\\r\\u001b[2Kresult: ok\\u001b[8m"';
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
// Deeper than V8's stack allows a recursive walk (about 10 000 frames), well within a line.
// A journal the daemon's writer made, with five entries; its file.
async function fiveEntries(): Promise<string> {
  await sodiumReady();
  const keys = auditKeys();
  const dir = scratch();
  mkdirSync(dir);
  const file = await newJournal(dir, keys);
  const w = await Journal.open({ path: file, segmentSize: 64 * 1024 * 1024 });
  await w.setSigningKey(keys.sign.privateKey);
  for (let i = 0; i < 5; i++) await w.append({ kind: 'before', i });
  await w.close();
  return file;
}

const DEEP = '['.repeat(30_000) + ']'.repeat(30_000);

t.test('text from a line that does not decode reaches no report as control characters', async (t) => {
  const j = await buildJournal(join(root, 'esc'), N);
  const last = tamper(j, { op: 'insert', before: N + 1, line: withVersion(N + 1, j.head.hash, ESCAPES) }, scratch());
  const inside = tamper(
    j,
    { op: 'insert', before: 60, line: withVersion(60, j.hashes[58] as string, ESCAPES) },
    scratch(),
  );
  for (const [what, path, kind, seq] of [
    ['as the last line', last, 'torn_last_write', N + 1],
    ['between two entries', inside, 'inserted', null],
  ] as const) {
    const r = await verifyJournal(path);
    t.match(r, { ok: false, problem: { kind, seq } }, `${what}: ${kind}`);
    t.notMatch(r.problem?.message ?? '', CONTROL, `${what}: no control character in the message`);
    const out = cli(env, ['audit', 'verify', '--log', path]);
    t.equal(out.code, 1, `${what}: the CLI exits 1`);
    t.notMatch(out.stdout, CONTROL, `${what}: no control character on stdout`);
    t.notMatch(out.stderr, CONTROL, `${what}: no control character on stderr`);
    t.match(out.stdout, /\nresult: FAILED\n$/, `${what}: the result line ends the report`);
  }
});

t.test('a line nested deeper than the call stack is a line that is not an entry', async (t) => {
  const j = await buildJournal(join(root, 'deep'), N);
  const last = tamper(j, { op: 'insert', before: N + 1, line: withVersion(N + 1, j.head.hash, DEEP) }, scratch());
  const inside = tamper(
    j,
    { op: 'insert', before: 60, line: withVersion(60, j.hashes[58] as string, DEEP) },
    scratch(),
  );

  t.test('verify: a verdict, not an exception', async (t) => {
    for (const [what, path, kind, seq] of [
      ['as the last line', last, 'torn_last_write', N + 1],
      ['between two entries', inside, 'inserted', null],
    ] as const) {
      const r = await verifyJournal(path).catch((e: unknown) => ({ threw: String(e) }));
      t.match(r, { ok: false, problem: { kind, seq } }, `${what}: ${kind}`);
    }
    const out = cli(env, ['audit', 'verify', '--log', last]);
    t.equal(out.code, 1, 'the CLI exits 1');
    t.match(out.stdout, `problem: entry ${N + 1}: torn_last_write (`, 'the CLI names the torn last write');
    t.equal(
      out.stderr,
      `postern: audit verification failed: torn_last_write at entry ${N + 1}\n`,
      'one line on stderr',
    );
  });

  t.test('head: the torn last line is skipped, as for any line that is not an entry', async (t) => {
    const out = cli(env, ['audit', 'head', '--log', last]);
    t.equal(out.code, 0, `exit 0 (${out.stderr.trim()})`);
    t.equal(out.stdout, `${N}:${j.head.hash}\n`, 'the head is the last entry');
  });

  t.test('the daemon cuts it at start-up like any torn last write', async (t) => {
    const file = await fiveEntries();
    const before = readJournal(file).entries;
    const head = before[before.length - 1];
    const tail = Buffer.concat([withVersion((head?.entry.seq ?? 0) + 1, head?.hash ?? '', DEEP), Buffer.from('\n')]);
    appendFileSync(file, tail);
    const opened = await Journal.open({ path: file, segmentSize: 64 * 1024 * 1024 }).catch((e: unknown) => e);
    t.ok(opened instanceof Journal, `the journal opens (${String((opened as Error).message ?? '')})`);
    if (!(opened instanceof Journal)) return;
    await opened.close();
    const after = readJournal(file).entries;
    t.match(
      after.find((e) => e.entry.type === 'repair')?.entry,
      { type: 'repair', cut_bytes: tail.length, at_offset: head?.end },
      'a repair entry counts the bytes cut',
    );
  });
});

// No segment the writer makes is longer than the largest segment size
// (1 GiB) plus its closing checkpoint, so nothing beyond that can be an
// entry. A sparse file costs no disk space at any length: the verdict must
// not wait for every byte of it to be read.
t.test('a line a TiB long (a sparse file) is reported without reading it all', async (t) => {
  const j = await buildJournal(join(root, 'sparse'), N);
  const path = tamper(j, { op: 'cut', count: 0 }, scratch());
  truncateSync(path, statSync(path).size + 1024 ** 4);
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, [CLI, 'audit', 'verify', '--log', path], {
    env: cleanEnv(),
    encoding: 'utf8',
    timeout: 30_000,
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  t.equal(r.signal, null, `finished by itself (${seconds.toFixed(1)} s)`);
  t.equal(r.status, 1, 'exit 1');
  t.match(r.stdout, `problem: entry ${N + 1}: modified (`, `the line after the last entry is named: ${r.stdout}`);
  // `audit head` reads the end of the file, backwards: it too stops.
  const head = spawnSync(process.execPath, [CLI, 'audit', 'head', '--log', path], {
    env: cleanEnv(),
    encoding: 'utf8',
    timeout: 30_000,
  });
  t.equal(head.signal, null, 'audit head finished by itself');
  t.equal(head.status, 1, 'audit head: exit 1');
  t.match(
    head.stderr,
    /ends in more than 65536 bytes without a newline[^\n]*; run `postern audit verify --log /,
    `audit head says what to run: ${head.stderr}`,
  );
});

// The daemon's start-up reads the last segment to its end to find the last
// entry. A last line longer than any entry is not a write cut short (no
// write is longer than an entry): the daemon refuses to start on it, leaves
// the file as it is and says what to do, and it says so at once, without
// reading the rest of the line (a sparse TiB took hours).
t.test('the daemon refuses at once a journal whose last line is a TiB of sparse file', async (t) => {
  const file = await fiveEntries();
  const size = statSync(file).size;
  truncateSync(file, size + 1024 ** 4);
  const started = process.hrtime.bigint();
  const opened = await Journal.open({ path: file, segmentSize: 64 * 1024 * 1024 }).catch((e: unknown) => e);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (opened instanceof Journal) await opened.close();
  t.ok(seconds < 20, `answered in ${seconds.toFixed(1)} s, not the hours a TiB takes to read`);
  t.match(
    (opened as Error).message,
    new RegExp(`damaged at byte ${size} \\(a line longer than any entry\\).*postern audit verify`),
    'refused, naming where and what to run',
  );
  t.equal(statSync(file).size, size + 1024 ** 4, 'the file is left as it was');
});
