// Which decisions a card offers, on which key, and what --auto chooses.
// A session may be rooted only at the requesting process or one of its
// ancestors (the daemon checks again), and never for an each-use credential.
import type { DecideArgs } from '../../shared/admin-protocol';
import type { Card } from './card';

export interface Choice {
  key: string;
  label: string;
  args: DecideArgs;
}

// Ancestors reachable by a digit key: 1 is the parent, up to 9.
export const MAX_ANCESTOR_KEYS = 9;

export function choicesFor(card: Card): Choice[] {
  const choices: Choice[] = [
    { key: 'd', label: 'deny', args: { id: card.id, decision: 'deny' } },
    { key: 'o', label: 'allow once', args: { id: card.id, decision: 'once' } },
  ];
  if (card.approve !== 'session') return choices;
  if (card.process.key !== '') {
    choices.push({
      key: 's',
      label: `session rooted at the requester (pid ${card.process.pid})`,
      args: { id: card.id, decision: 'session', root_key: card.process.key },
    });
  }
  card.ancestors.slice(0, MAX_ANCESTOR_KEYS).forEach((a, i) => {
    if (a.key === '') return;
    choices.push({
      key: String(i + 1),
      label: `session rooted at ancestor ${i + 1} (pid ${a.pid})`,
      args: { id: card.id, decision: 'session', root_key: a.key },
    });
  });
  return choices;
}

export type KeyPress = { kind: 'choice'; choice: Choice } | { kind: 'quit' } | { kind: 'ignored' };

const QUIT = new Set([0x71 /* q */, 0x03 /* Ctrl-C: raw mode delivers it as a byte */]);

// A chunk of terminal input counts as a key press only when it is a single
// byte: escape sequences (arrows, Home is ESC [ 1 ~, function keys) and
// pasted text arrive as several bytes and must never decide anything.
export function readKey(chunk: Buffer, card: Card | null): KeyPress {
  if (chunk.length !== 1) return { kind: 'ignored' };
  const byte = chunk[0] as number;
  if (QUIT.has(byte)) return { kind: 'quit' };
  if (!card) return { kind: 'ignored' };
  const key = String.fromCharCode(byte);
  const choice = choicesFor(card).find((c) => c.key === key);
  return choice ? { kind: 'choice', choice } : { kind: 'ignored' };
}

export type AutoMode = 'approve' | 'deny';

// --auto: deny; or approve with a session rooted at the requester, at
// ancestor `rootDepth` (1 is the parent) when it exists, else at the highest
// ancestor there is; allow once when the credential asks every time (or the
// card names no process a session could be rooted at).
export function autoChoice(card: Card, mode: AutoMode, rootDepth = 0): Choice {
  const [deny, once] = choicesFor(card) as [Choice, Choice];
  if (mode === 'deny') return deny;
  const chain = [card.process, ...card.ancestors];
  const root = chain[Math.min(rootDepth, chain.length - 1)];
  if (card.approve !== 'session' || !root || root.key === '') return once;
  const depth = chain.indexOf(root);
  const label =
    depth === 0
      ? `session rooted at the requester (pid ${root.pid})`
      : `session rooted at ancestor ${depth} (pid ${root.pid})`;
  return { key: '', label, args: { id: card.id, decision: 'session', root_key: root.key } };
}
