// The one journal reader (shared/journal-read.ts) that both the daemon's
// start-up scan and `postern audit verify` use: lines split the same way
// across chunk boundaries, the longest line an entry can be and one byte
// more, the last complete line, and a segment that is a link or a FIFO.
import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { open } from 'node:fs/promises';
import { MAX_LINE_BYTES } from '../../shared/audit-format';
import { journalLines } from '../../shared/audit-verify';
import { LONGEST_LINE, READ_CHUNK, openSegment, readLastLine, walkLines } from '../../shared/journal-read';
import { scratchDir } from '../helpers/journal-writer-driver';

const dir = (t: Test): string => scratchDir(t, 'postern-journal-read-');

interface Seen {
  line: string | null;
  offset?: number;
  terminated?: boolean;
}

// What the daemon's walk reads from a file, and where it stops.
async function walk(file: string): Promise<{ seen: Seen[]; end: number; overlong: boolean }> {
  const fh = await open(file, 'r');
  try {
    const seen: Seen[] = [];
    const size = (await fh.stat()).size;
    const w = await walkLines(fh, 0, size, (line, offset) => {
      seen.push({ line: line.toString('latin1'), offset });
    });
    return { seen, end: w.end, overlong: w.overlong };
  } finally {
    await fh.close();
  }
}

// What the verifier reads from the same file (as segment 0).
async function verifierLines(file: string): Promise<Seen[]> {
  const seen: Seen[] = [];
  for await (const l of journalLines(file))
    seen.push({ line: l.bytes && l.bytes.toString('latin1'), terminated: l.terminated });
  return seen;
}

t.test('lines that straddle chunk boundaries are read whole, at their offsets, by both readers', async (t) => {
  const file = path.join(dir(t), 'audit.log');
  // Lines of many lengths, so that "\n"s fall just before, on and just
  // after chunk boundaries; then one "\n" as the last byte of a chunk, and
  // the longest line across the next boundary.
  const lines: string[] = [];
  let size = 0;
  const add = (line: string): void => {
    lines.push(line);
    size += line.length + 1;
  };
  for (let i = 0; size < 3 * READ_CHUNK; i++) add(String.fromCharCode(97 + (i % 26)).repeat((i * 7919) % 5000));
  while (READ_CHUNK - (size % READ_CHUNK) > 2000) add('z'.repeat(999));
  add('x'.repeat(READ_CHUNK - (size % READ_CHUNK) - 1));
  t.equal(size % READ_CHUNK, 0, 'a line ends on a chunk boundary');
  add('y'.repeat(LONGEST_LINE));
  fs.writeFileSync(file, lines.map((l) => l + '\n').join('') + 'tail');
  const w = await walk(file);
  t.equal(w.seen.length, lines.length);
  t.notOk(w.overlong);
  let offset = 0;
  const want = lines.map((line) => {
    const s = { line, offset };
    offset += line.length + 1;
    return s;
  });
  t.same(w.seen, want);
  t.equal(w.end, offset, 'the walk ends where the unterminated tail begins');
  const v = await verifierLines(file);
  t.same(
    v,
    [...lines.map((line) => ({ line, terminated: true })), { line: 'tail', terminated: false }],
    'the verifier reads the same lines, and the tail as incomplete',
  );
});

t.test('a line of LONGEST_LINE bytes is read; one byte more is over-long for both readers', async (t) => {
  t.equal(LONGEST_LINE, MAX_LINE_BYTES - 1, 'a line and its "\\n" fit in MAX_LINE_BYTES');
  const longest = 'a'.repeat(LONGEST_LINE);
  const tooLong = 'b'.repeat(LONGEST_LINE + 1);
  for (const [name, body, overlongAt] of [
    ['the longest line', `x\n${longest}\ny\n`, null],
    ['one byte more', `x\n${tooLong}\ny\n`, 2],
    ['one byte more, unterminated', `x\n${tooLong}`, 2],
  ] as const) {
    await t.test(name, async (t) => {
      const file = path.join(dir(t), 'audit.log');
      fs.writeFileSync(file, body);
      const w = await walk(file);
      const v = await verifierLines(file);
      if (overlongAt === null) {
        t.notOk(w.overlong);
        t.same(
          w.seen.map((s) => s.line),
          ['x', longest, 'y'],
        );
        t.same(
          v.map((s) => s.line),
          ['x', longest, 'y'],
        );
      } else {
        t.ok(w.overlong, 'the walk stops at the over-long line');
        t.equal(w.end, overlongAt, 'and names where it starts');
        t.same(
          w.seen.map((s) => s.line),
          ['x'],
        );
        t.same(v[1], { line: null, terminated: !name.endsWith('unterminated') }, 'the verifier keeps none of it');
      }
    });
  }
});

t.test("the last complete line: only a line that ends the file, within an entry's length", async (t) => {
  const cases: Array<[string, string, string | null]> = [
    ['ends with "\\n"', 'one\ntwo\n', 'two'],
    ['a single line', 'one\n', 'one'],
    ['does not end with "\\n"', 'one\ntwo', null],
    ['empty', '', null],
    ['the longest line', `one\n${'c'.repeat(LONGEST_LINE)}\n`, 'c'.repeat(LONGEST_LINE)],
    ['one byte more', `one\n${'d'.repeat(LONGEST_LINE + 1)}\n`, null],
    ['a last line longer than a chunk', `one\n${'e'.repeat(READ_CHUNK + 5)}\n`, null],
  ];
  for (const [name, body, want] of cases) {
    const file = path.join(dir(t), `last-${cases.findIndex((c) => c[0] === name)}`);
    fs.writeFileSync(file, body);
    const fh = await open(file, 'r');
    try {
      const got = await readLastLine(fh, (await fh.stat()).size);
      t.equal(got === null ? null : got.toString('latin1'), want, name);
    } finally {
      await fh.close();
    }
  }
});

t.test('a segment that is a symbolic link or a FIFO is refused at once, never followed or waited on', async (t) => {
  const d = dir(t);
  const real = path.join(d, 'real');
  fs.writeFileSync(real, 'x\n');
  const link = path.join(d, 'link');
  fs.symlinkSync(real, link);
  const fifo = path.join(d, 'fifo');
  execFileSync('mkfifo', [fifo]);
  for (const mode of ['read', 'append'] as const) {
    await t.rejects(openSegment(link, mode), { code: 'ELOOP' }, `${mode}: a link`);
    await t.rejects(openSegment(fifo, mode), { code: 'ENOTREG' }, `${mode}: a FIFO`);
    const fh = await openSegment(real, mode);
    await fh.close();
  }
  await t.rejects(openSegment(real, 'create'), { code: 'EEXIST' }, 'create never opens an existing file');
  const made = path.join(d, 'made');
  await (await openSegment(made, 'create')).close();
  t.equal(fs.statSync(made).mode & 0o777, 0o600, 'a new segment is 0600');
});
