// The interactive loop over an injected card source and a terminal stand-in
// (the daemon and a real TTY are exercised in card-tmux.test.ts): the oldest
// card is shown with a count of the others, withdrawals are noted, a key
// pressed right after the card changed is ignored, a decision not taken is
// reported, and q ends the loop with the terminal restored.
import t from 'tap';
import { PassThrough } from 'node:stream';
import { runInteractive, KEY_GRACE_MS } from '../../cli/approver/run';
import type { CardSource, SourceEvents } from '../../cli/approver/session';
import type { DecideArgs } from '../../shared/admin-protocol';
import type { Card } from '../../cli/approver/card';
import { testCard } from '../helpers/card';
import { DaemonRefusal } from '../../cli/errors';

class Fixture implements CardSource {
  events!: SourceEvents;
  decided: DecideArgs[] = [];
  answer: (a: DecideArgs) => Promise<{ taken: boolean }> = async () => ({ taken: true });
  closed = false;
  private done: (() => void) | null = null;
  run(e: SourceEvents): Promise<void> {
    this.events = e;
    return new Promise((r) => (this.done = r));
  }
  decide(a: DecideArgs): Promise<{ taken: boolean }> {
    this.decided.push(a);
    return this.answer(a);
  }
  close(): void {
    this.closed = true;
    this.done?.();
  }
}

// Each card has the same parent, pid 1.
const PARENT: Card['ancestors'] = [
  {
    key: 'kparent',
    pid: 1,
    uid: 0,
    exe: '/bin/sh',
    exe_deleted: false,
    exe_memfd: false,
    cwd: '/',
    cmdline: ['sh'],
  },
];

function card(id: string, pid: number, approve: 'session' | 'each-use' = 'session'): Card {
  return testCard({ id, pid, approve, ancestors: PARENT });
}

function setup(size?: { rows: number; columns: number }): {
  src: Fixture;
  input: PassThrough & { raw: boolean[] };
  screen(): string;
  clock: { now: number };
  done: Promise<void>;
  stop: AbortController;
} {
  const src = new Fixture();
  const input = Object.assign(new PassThrough(), { raw: [] as boolean[] });
  const term = {
    input: Object.assign(input, { setRawMode: (b: boolean) => input.raw.push(b) }),
    write: (s: string) => void (out += s),
    size: () => size,
  };
  let out = '';
  const clock = { now: 1_000_000 };
  const stop = new AbortController();
  const done = runInteractive(src, term, stop.signal, { approverId: 'ap1', now: () => clock.now });
  const screen = (): string => {
    const frames = out.split('\x1b[H\x1b[2J');
    return frames[frames.length - 1] ?? '';
  };
  return { src, input, screen, clock, done, stop };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('queue, count, grace, decision, withdrawal, quit', async (t) => {
  const { src, input, screen, clock, done } = setup();
  t.same(input.raw, [true], 'raw mode on');
  t.match(screen(), /No request is waiting/);
  src.events.pending(card('aaa', 10));
  src.events.pending(card('bbb', 11));
  src.events.pending(card('aaa', 10));
  t.match(
    screen(),
    /Approval request aaa {3}\(1 more waiting\)/,
    'the oldest, and the count of the others (a re-sent card is not counted twice)',
  );

  input.write('s');
  await tick();
  t.same(src.decided, [], 'a key within the grace period is ignored');
  t.match(screen(), /key "s" ignored: the request on screen changed just now/);

  clock.now += KEY_GRACE_MS;
  input.write('\x1b[1~');
  await tick();
  t.same(src.decided, [], 'an escape sequence is not a key');

  // The daemon withdraws the decided card before it answers (as it does).
  src.answer = async (a) => {
    src.events.withdrawn(a.id, 'decided');
    return { taken: true };
  };
  input.write('1');
  await tick();
  await tick();
  t.same(src.decided, [{ id: 'aaa', decision: 'session', root_key: 'kparent' }]);
  t.match(screen(), /request aaa \(cred-aaa, pid 10\): session approved, rooted at pid 1/);
  t.notMatch(screen(), /aaa.*withdrawn/, 'our own decision is not reported as a withdrawal');
  t.match(screen(), /Approval request bbb\n/, 'the next card, nothing else waiting');

  clock.now += KEY_GRACE_MS;
  src.events.withdrawn('bbb', 'withdrawn by the requester');
  t.match(screen(), /request bbb \(cred-bbb, pid 11\) withdrawn: withdrawn by the requester/);
  t.match(screen(), /No request is waiting/);

  input.write('q');
  await done;
  t.ok(src.closed, 'q closes the source');
  t.same(input.raw, [true, false], 'raw mode restored');
});

t.test('a decision not taken, and one that fails, are reported', async (t) => {
  const { src, input, screen, clock, stop, done } = setup();
  src.events.pending(card('ccc', 20, 'each-use'));
  clock.now += KEY_GRACE_MS;
  input.write('s');
  await tick();
  t.same(src.decided, [], 'each-use: s is not offered');
  src.answer = async () => ({ taken: false });
  input.write('o');
  await tick();
  await tick();
  t.same(src.decided, [{ id: 'ccc', decision: 'once' }]);
  t.match(screen(), /request ccc: your decision was not taken \(another approver decided first/);
  t.match(screen(), /No request is waiting/, 'the card is dropped');

  src.events.pending(card('ddd', 21));
  clock.now += KEY_GRACE_MS;
  src.answer = async () => {
    throw new DaemonRefusal('bad_request', 'a session may be rooted only at the requesting process', {});
  };
  input.write('d');
  await tick();
  await tick();
  t.match(screen(), /request ddd: the decision was not sent: a session may be rooted only/);
  t.match(screen(), /Approval request ddd/, 'the card stays for another decision');

  t.match(screen(), /^postern approver — attached as approver ap1$/m);
  src.events.reset();
  t.match(screen(), /No request is waiting/, 'a reconnection forgets the cards (the daemon sends them again)');
  t.match(screen(), /^postern approver — NOT CONNECTED: reconnecting to the daemon…$/m, 'and says it is not connected');
  src.events.attached('ap2');
  t.match(screen(), /^postern approver — attached as approver ap2$/m);
  stop.abort();
  await done;
  t.ok(src.closed, 'a stop signal closes the source');
});

t.test('the end of the input stops the loop', async (t) => {
  const { src, input, done } = setup();
  input.end();
  await done;
  t.ok(src.closed);
});

t.test('a card taller than the terminal says so on its last line', async (t) => {
  const size = { rows: 200, columns: 200 };
  const { src, input, screen, done } = setup(size);
  src.events.pending(card('eee', 30));
  t.notMatch(screen(), /taller than the terminal/, 'it fits in 200 rows');
  size.rows = 20;
  src.events.notice('redraw');
  const lines = screen().trimEnd().split('\n');
  t.match(
    lines[lines.length - 1],
    /^!! this card is taller than the terminal \(20 rows\): scroll up or enlarge the window/,
  );
  input.write('q');
  await done;
});
