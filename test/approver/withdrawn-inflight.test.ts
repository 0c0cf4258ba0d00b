// A card withdrawn while the human's decision on it is on its way: the
// decision comes back not taken, and the note says the daemon's reason
// (the vault was locked), not a guess. The moment cannot be timed against a
// real daemon, so the card source here withdraws the card before it
// answers, as the daemon does when a lock comes first.
import t from 'tap';
import { PassThrough } from 'node:stream';
import { runInteractive, KEY_GRACE_MS } from '../../cli/approver/run';
import type { CardSource, SourceEvents } from '../../cli/approver/session';
import type { DecideArgs } from '../../shared/admin-protocol';
import type { Card } from '../../cli/approver/card';
import { testCard } from '../helpers/card';

const CARD: Card = testCard({ id: 'c1', pid: 7, credential: 'api' });

t.test('a decision overtaken by a lock names the lock', async (t) => {
  let events!: SourceEvents;
  let end = (): void => undefined;
  const reasons = ['the vault was locked (locked by `postern lock`)', 'decided'];
  const source: CardSource = {
    run: (e) => new Promise<void>((r) => ((events = e), (end = r))),
    decide: async (a: DecideArgs) => {
      events.withdrawn(a.id, reasons.shift()!);
      return { taken: false };
    },
    close: () => end(),
  };
  let out = '';
  let now = 0;
  const input = new PassThrough();
  const done = runInteractive(source, { input, write: (s) => void (out += s) }, new AbortController().signal, {
    now: () => now,
  });
  const screen = (): string => out.slice(out.lastIndexOf('\x1b[2J'));
  const press = async (key: string): Promise<void> => {
    now += KEY_GRACE_MS;
    input.write(key);
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  };

  events.pending(CARD);
  await press('o');
  t.match(screen(), 'request c1: your decision was not taken (the vault was locked (locked by `postern lock`))');
  t.notMatch(screen(), /withdrawn:/, 'said once, as the answer to the decision');

  events.pending(CARD);
  await press('o');
  t.match(
    screen(),
    'request c1: your decision was not taken (decided by another approver)',
    'the reason of the first card is not kept for the next',
  );

  input.write('q');
  await done;
});
