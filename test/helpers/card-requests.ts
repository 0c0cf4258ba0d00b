// Requests whose answer tells whether postern would have connected: an
// approver that denies every card and keeps it, so a card means every check
// before the connection passed (and shows the address it would use), and
// no card means a refusal with its code.
import type { Card, Stack } from './stack';

export interface Asked {
  status: number;
  text: string;
  err: { code: string; address?: string } | undefined;
  card: Card | undefined;
  outcome: string; // `card`, the refusal's code, or `status N`
}

export async function cardRequests(s: Stack): Promise<(body: unknown) => Promise<Asked>> {
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'deny' };
  });
  return async (body) => {
    const before = cards.length;
    const r = await s.request(body);
    const err = (r.json as { error?: { code: string; address?: string } } | null)?.error;
    const card = cards.length > before ? cards[cards.length - 1] : undefined;
    return { status: r.status, text: r.text, err, card, outcome: card ? 'card' : (err?.code ?? `status ${r.status}`) };
  };
}
