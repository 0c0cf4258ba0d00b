// The approver's two loops over a CardSource (the daemon, or a fixture):
// - interactive: shows the oldest pending card (and how many wait behind
//   it), takes single key presses on a raw-mode terminal, reports every
//   outcome on a line of notes under the card;
// - auto: answers every card at once with a fixed policy and prints one line
//   per decision, for scripted set-ups and tests.
import type { DecideArgs } from '../../shared/admin-protocol';
import { describeError } from '../errors';
import type { Card } from './card';
import { columnsOf, escapeText } from './escape';
import { autoChoice, AutoMode, Choice, readKey } from './keys';
import { CardQueue } from './queue';
import { renderCard } from './render';
import type { CardSource, SourceEvents } from './session';

// A key pressed this soon after the card on screen changed is ignored: the
// human may have meant the card that was there a moment before.
export const KEY_GRACE_MS = 500;
const MAX_NOTES = 8;

export interface Terminal {
  input: NodeJS.ReadableStream & { setRawMode?(raw: boolean): unknown; isTTY?: boolean };
  write(text: string): void;
  // The window size, when known; the screen is redrawn on `resize`.
  size?(): { rows: number; columns: number } | undefined;
  onResize?(redraw: () => void): () => void;
}

// Rows the lines take on a terminal this wide (long lines wrap; a wide
// character takes two columns).
function rowsTaken(lines: string[], columns: number): number {
  return lines.reduce((n, l) => n + Math.max(1, Math.ceil(columnsOf(l) / Math.max(1, columns))), 0);
}

export interface InteractiveOptions {
  approverId?: string;
  graceMs?: number;
  now?: () => number;
}

// The screen is redrawn whole on every change (and only then). These are
// the only escape sequences the approver writes; everything from a card is
// escaped text.
function frame(lines: string[]): string {
  return `\x1b[H\x1b[2J${lines.join('\n')}\n`;
}

// What the daemon said when it withdrew a card: "decided" when a human
// decided it, else its own words (the vault was locked, it expired, the
// requester went away).
function withdrawalWords(reason: string): string {
  return reason === 'decided' ? 'decided by another approver' : escapeText(reason, 200);
}

function decisionWords(args: DecideArgs, card: Card): string {
  if (args.decision === 'deny') return 'denied';
  if (args.decision === 'once') return 'allowed once';
  const chain = [card.process, ...card.ancestors];
  const root = chain.find((p) => p.key === args.root_key);
  return `session approved, rooted at pid ${root ? root.pid : '?'}`;
}

class InteractiveApprover {
  private queue = new CardQueue();
  private notes: string[] = [];
  private inFlight: string | null = null;
  // Why the card whose decision is in flight was withdrawn meanwhile.
  private inFlightWithdrawn: string | null = null;
  private shownId: string | null = null;
  private shownAt = 0;
  private connection: string;
  private readonly grace: number;
  private readonly now: () => number;

  constructor(
    private readonly source: CardSource,
    private readonly term: Terminal,
    opts: InteractiveOptions,
  ) {
    this.connection = `attached as approver ${escapeText(opts.approverId ?? '?', 40)}`;
    this.grace = opts.graceMs ?? KEY_GRACE_MS;
    this.now = opts.now ?? Date.now;
  }

  readonly events: SourceEvents = {
    pending: (card) => {
      if (this.queue.add(card)) this.render();
    },
    withdrawn: (id, reason) => {
      const card = this.queue.remove(id);
      // Our own decision is reported when its answer comes back.
      if (id === this.inFlight) this.inFlightWithdrawn = reason;
      else if (card)
        this.note(
          `request ${escapeText(id, 40)} (${escapeText(card.credential, 80)}, pid ${card.process.pid}) withdrawn: ${withdrawalWords(reason)}`,
        );
      this.render();
    },
    reset: () => {
      this.queue.clear();
      this.connection = 'NOT CONNECTED: reconnecting to the daemon…';
      this.render();
    },
    attached: (id) => {
      this.connection = `attached as approver ${escapeText(id, 40)}`;
      this.render();
    },
    notice: (text) => this.note(text),
  };

  note(text: string): void {
    this.notes.push(`${new Date(this.now()).toTimeString().slice(0, 8)}  ${text}`);
    if (this.notes.length > MAX_NOTES) this.notes.shift();
    this.render();
  }

  render(): void {
    const head = this.queue.head;
    if ((head?.id ?? null) !== this.shownId) {
      this.shownId = head?.id ?? null;
      this.shownAt = this.now();
    }
    const size = this.term.size?.();
    const body = head
      ? renderCard(head, { waiting: this.queue.size - 1, columns: size?.columns })
      : ['No request is waiting for approval.', '', '  q  quit the approver'];
    const status = this.inFlight ? ['', `  sending the decision on ${escapeText(this.inFlight, 40)}…`] : [];
    const lines = [
      `postern approver — ${this.connection}`,
      '',
      ...body,
      ...status,
      '',
      ...(this.notes.length ? ['Recent:', ...this.notes.map((n) => `  ${n}`)] : []),
    ];
    // A card taller than the window scrolls its top (the action) out of
    // sight; the last line, always visible, says so.
    if (head && size && rowsTaken(lines, size.columns) + 1 > size.rows) {
      lines.push(
        `!! this card is taller than the terminal (${size.rows} rows): scroll up or enlarge the window, and read all of it before deciding`,
      );
    }
    this.term.write(frame(lines));
  }

  // One chunk of terminal input. Returns true when the human asked to quit.
  key(chunk: Buffer): boolean {
    const head = this.queue.head;
    const press = readKey(chunk, head);
    if (press.kind === 'quit') return true;
    if (press.kind !== 'choice' || !head) return false;
    if (this.inFlight) {
      this.note('a decision is still being sent; wait for its answer');
      return false;
    }
    if (this.now() - this.shownAt < this.grace) {
      this.note(`key "${press.choice.key}" ignored: the request on screen changed just now; read it, then press again`);
      return false;
    }
    this.decide(head, press.choice);
    return false;
  }

  private decide(card: Card, choice: Choice): void {
    this.inFlight = card.id;
    this.render();
    const id = escapeText(card.id, 40);
    this.source
      .decide(choice.args)
      .then(({ taken }) => {
        this.queue.remove(card.id);
        const why =
          this.inFlightWithdrawn === null
            ? 'another approver decided first, or the request expired or was withdrawn'
            : withdrawalWords(this.inFlightWithdrawn);
        this.note(
          taken
            ? `request ${id} (${escapeText(card.credential, 80)}, pid ${card.process.pid}): ${decisionWords(choice.args, card)}`
            : `request ${id}: your decision was not taken (${why})`,
        );
      })
      .catch((e: unknown) =>
        this.note(`request ${id}: the decision was not sent: ${escapeText(describeError(e), 300)}`),
      )
      .finally(() => {
        this.inFlight = null;
        this.inFlightWithdrawn = null;
        this.render();
      });
  }
}

// Runs until the human quits (q, Ctrl-C), the input ends, `stop` fires, or
// the source fails (then it rejects with the source's error).
export async function runInteractive(
  source: CardSource,
  term: Terminal,
  stop: AbortSignal,
  opts: InteractiveOptions = {},
): Promise<void> {
  const ui = new InteractiveApprover(source, term, opts);
  const onData = (chunk: Buffer | string): void => {
    if (ui.key(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))) source.close();
  };
  const onEnd = (): void => source.close();
  const onStop = (): void => source.close();
  const stopResize = term.onResize?.(() => ui.render());
  term.input.setRawMode?.(true);
  term.input.on('data', onData);
  term.input.on('end', onEnd);
  term.input.resume();
  stop.addEventListener('abort', onStop, { once: true });
  if (stop.aborted) source.close();
  ui.render();
  try {
    await source.run(ui.events);
  } finally {
    stop.removeEventListener('abort', onStop);
    stopResize?.();
    term.input.removeListener('data', onData);
    term.input.removeListener('end', onEnd);
    term.input.setRawMode?.(false);
    term.input.pause();
    term.write('approver stopped\n');
  }
}

export interface AutoOptions {
  mode: AutoMode;
  rootDepth?: number;
  json?: boolean;
  print(line: string): void;
}

// One line per decision: card id, credential, requester pid, decision, and
// whether the daemon took it.
function decisionLine(
  o: AutoOptions,
  card: Card,
  choice: Choice,
  outcome: { taken: boolean } | { error: string },
): string {
  const chain = [card.process, ...card.ancestors];
  const rootPid =
    choice.args.decision === 'session' ? (chain.find((p) => p.key === choice.args.root_key)?.pid ?? null) : null;
  if (o.json) {
    return JSON.stringify({
      event: 'decided',
      id: card.id,
      credential: card.credential,
      pid: card.process.pid,
      decision: choice.args.decision,
      root_pid: rootPid,
      ...outcome,
    });
  }
  const result = 'taken' in outcome ? `taken=${outcome.taken}` : `error=${escapeText(outcome.error, 300)}`;
  return `decided ${escapeText(card.id, 40)} credential=${escapeText(card.credential, 80)} pid=${card.process.pid} decision=${choice.args.decision}${rootPid !== null ? ` root_pid=${rootPid}` : ''} ${result}`;
}

// Runs until `stop` fires, or rejects when the source fails.
export async function runAuto(source: CardSource, o: AutoOptions, stop: AbortSignal): Promise<void> {
  const mine = new Set<string>();
  const say = (event: string, text: string, extra: Record<string, unknown> = {}): void =>
    o.print(o.json ? JSON.stringify({ event, message: text, ...extra }) : text);
  const events: SourceEvents = {
    pending: (card) => {
      if (mine.has(card.id)) return;
      const choice = autoChoice(card, o.mode, o.rootDepth ?? 0);
      mine.add(card.id);
      source
        .decide(choice.args)
        .then((r) => o.print(decisionLine(o, card, choice, r)))
        .catch((e: unknown) => o.print(decisionLine(o, card, choice, { error: describeError(e) })))
        .finally(() => mine.delete(card.id));
    },
    withdrawn: (id, reason) => {
      if (!mine.has(id))
        say('withdrawn', `withdrawn ${escapeText(id, 40)}: ${escapeText(reason, 200)}`, { id, reason });
    },
    reset: () => mine.clear(),
    attached: () => undefined,
    notice: (text) => say('notice', text),
  };
  const onStop = (): void => source.close();
  stop.addEventListener('abort', onStop, { once: true });
  if (stop.aborted) source.close();
  try {
    await source.run(events);
  } finally {
    stop.removeEventListener('abort', onStop);
  }
}
