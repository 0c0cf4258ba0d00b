// A card's rows on a real terminal (SPEC §7): East Asian wide characters
// (CJK, Hangul, fullwidth forms) take two columns each. An agent can put
// them in what the card shows (its command line, cwd, a path), so the
// approver's sums of what fits must count columns, not code points:
// - a card that wraps past the bottom of the window scrolls its top (the
//   credential and the action) out of sight, so the last line must say it is
//   taller than the terminal;
// - an ancestor line cut "to one row" must fit one row.
import t from 'tap';
import { PassThrough } from 'node:stream';
import { runInteractive } from '../../cli/approver/run';
import type { CardSource, SourceEvents } from '../../cli/approver/session';
import type { DecideArgs } from '../../shared/admin-protocol';
import type { Card, CardProcess } from '../../cli/approver/card';
import { renderCard } from '../../cli/approver/render';
import { testCard } from '../helpers/card';

// Columns a string takes on a terminal: two for a wide character (the
// ranges of East Asian Width W and F that matter here), one otherwise.
const WIDE =
  /[\u{1100}-\u{115f}\u{2e80}-\u{303e}\u{3041}-\u{33ff}\u{3400}-\u{4dbf}\u{4e00}-\u{9fff}\u{a000}-\u{a4cf}\u{ac00}-\u{d7a3}\u{f900}-\u{faff}\u{fe30}-\u{fe4f}\u{ff00}-\u{ff60}\u{ffe0}-\u{ffe6}\u{1f300}-\u{1f64f}\u{1f900}-\u{1f9ff}\u{20000}-\u{3fffd}]/u;
const width = (s: string): number => [...s].reduce((n, ch) => n + (WIDE.test(ch) ? 2 : 1), 0);
const rowsOf = (lines: string[], columns: number): number =>
  lines.reduce((n, l) => n + Math.max(1, Math.ceil(width(l) / columns)), 0);

class Source implements CardSource {
  events!: SourceEvents;
  private done: (() => void) | null = null;
  run(e: SourceEvents): Promise<void> {
    this.events = e;
    return new Promise((r) => (this.done = r));
  }
  decide(_a: DecideArgs): Promise<{ taken: boolean }> {
    return Promise.resolve({ taken: false });
  }
  close(): void {
    this.done?.();
  }
}

function screenOf(size: { rows: number; columns: number }) {
  const src = new Source();
  const input = Object.assign(new PassThrough(), { setRawMode: () => undefined });
  let out = '';
  const stop = new AbortController();
  const done = runInteractive(src, { input, write: (s) => void (out += s), size: () => size }, stop.signal, {
    now: () => 0,
  });
  const screen = (): string[] => {
    const frames = out.split('\x1b[H\x1b[2J');
    return (frames[frames.length - 1] ?? '').trimEnd().split('\n');
  };
  return { src, screen, stop, done };
}

const CJK = '\u6f22'; // 漢, two columns

t.test('a card that wraps past the window because of wide characters says so', async (t) => {
  const size = { rows: 40, columns: 80 };
  const first = screenOf(size);
  first.src.events.pending(testCard({ id: 'w1', pid: 10 }));
  const base = rowsOf(first.screen(), size.columns);
  first.stop.abort();
  await first.done;
  t.ok(base + 6 < size.rows, `the plain card fits (${base} rows)`);
  // An argument that, counted in code points, leaves a spare row; counted
  // in columns, it takes twice as many rows.
  const spare = size.rows - base - 2;
  const arg = CJK.repeat(spare * size.columns - 40);
  const wide: Card = { ...testCard({ id: 'w2', pid: 10 }) };
  wide.process = { ...wide.process, cmdline: ['agent', arg] };
  const { src, screen, stop, done } = screenOf(size);
  src.events.pending(wide);
  const lines = screen();
  t.match(lines[0], /^postern approver/, 'the card is on screen');
  const rows = rowsOf(lines, size.columns);
  t.ok(rows > size.rows, `on a real terminal it takes ${rows} rows of ${size.rows}`);
  // What scrolls away first is the top: the card's id and its credential.
  t.ok(lines.findIndex((l) => /^ {2}credential /.test(l)) < rows - size.rows, 'the credential line is out of sight');
  t.match(
    lines[lines.length - 1],
    /^!! this card is taller than the terminal \(40 rows\)/,
    'the last line says the top is out of sight',
  );
  stop.abort();
  await done;
});

t.test('an ancestor line cut to one row fits one row when it holds wide characters', async (t) => {
  const columns = 120;
  const ancestor: CardProcess = {
    key: 'k5',
    pid: 5,
    uid: 1000,
    exe: '/usr/bin/node',
    exe_deleted: false,
    exe_memfd: false,
    cwd: `/home/dev/${CJK.repeat(30)}`,
    cmdline: ['node', CJK.repeat(300)],
  };
  const lines = renderCard({ ...testCard({ id: 'w3', pid: 6 }), ancestors: [ancestor] }, { columns });
  const line = lines.find((l) => /ancestor 1 +pid 5/.test(l))!;
  t.match(line, / … \[\+\d+ chars\]/, 'the line was cut');
  t.ok(width(line) < columns, `one row: ${width(line)} columns of ${columns}`);
});
