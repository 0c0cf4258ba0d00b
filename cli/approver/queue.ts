// Pending cards in the order they arrived; the oldest is the one shown. The
// daemon sends every pending card again when an approver (re)attaches, so a
// card already queued is not queued twice.
import type { Card } from './card';

export class CardQueue {
  private cards: Card[] = [];

  add(card: Card): boolean {
    if (this.cards.some((c) => c.id === card.id)) return false;
    this.cards.push(card);
    return true;
  }

  remove(id: string): Card | null {
    const i = this.cards.findIndex((c) => c.id === id);
    if (i < 0) return null;
    return this.cards.splice(i, 1)[0] as Card;
  }

  clear(): void {
    this.cards = [];
  }

  get head(): Card | null {
    return this.cards[0] ?? null;
  }

  get size(): number {
    return this.cards.length;
  }
}
