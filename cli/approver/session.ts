// The approver's connection to the daemon: attach once with the passphrase,
// receive pending cards and withdrawals, send decisions. When the daemon
// goes away (a restart), reconnect with a backoff of at most 2 s and attach
// again with the same passphrase, kept in a Buffer for exactly that and
// wiped on close. A refusal to attach (wrong passphrase, another uid serving
// admin.sock) is final: retrying would only feed the daemon's failure delay.
import type { LoadedConfig } from '../../shared/config';
import type { DecideArgs } from '../../shared/admin-protocol';
import { AdminClient } from '../admin-client';
import { Unreachable } from '../errors';
import { readCard, Card } from './card';

export interface SourceEvents {
  pending(card: Card): void;
  withdrawn(id: string, reason: string): void;
  // The connection was replaced: forget every card; the daemon sends again
  // what is still pending when the approver attaches.
  reset(): void;
  // Attached again after a reconnection, as this approver id.
  attached(approverId: string): void;
  notice(text: string): void;
}

// Where cards come from and decisions go: the daemon, or (for tests of the
// terminal UI) a fixture.
export interface CardSource {
  // Resolves when closed; rejects on a failure the approver cannot recover from.
  run(events: SourceEvents): Promise<void>;
  decide(args: DecideArgs): Promise<{ taken: boolean }>;
  close(): void;
}

export const FIRST_RETRY_MS = 100;
export const MAX_RETRY_MS = 2000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class DaemonSource implements CardSource {
  private client: AdminClient | null;
  private passphrase: Buffer | null = null;
  private events: SourceEvents | null = null;
  // Pushes that arrive before run() (the daemon sends what is pending as
  // soon as the approver attaches, before the attach reply).
  private early: Array<(e: SourceEvents) => void> = [];
  private closed = false;
  private reconnecting = false;
  private finish: { resolve: () => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;
  private approverId = '';

  private constructor(
    private readonly config: LoadedConfig,
    client: AdminClient,
  ) {
    this.client = client;
    this.wire(client);
  }

  // Connect without sending anything secret: an unreachable daemon is known
  // before the human types the passphrase.
  static async connect(config: LoadedConfig): Promise<DaemonSource> {
    return new DaemonSource(config, await AdminClient.connect(config));
  }

  // Prove the passphrase. The source takes the Buffer and wipes it on close.
  async attach(passphrase: Buffer): Promise<Record<string, unknown>> {
    this.passphrase = passphrase;
    const client = this.client;
    if (!client)
      throw new Unreachable('the connection to the daemon was lost before the approver attached; start it again');
    const r = await client.request('approver.attach', {}, [passphrase]);
    this.approverId = String(r['approver'] ?? '');
    return r;
  }

  run(events: SourceEvents): Promise<void> {
    this.events = events;
    for (const e of this.early.splice(0)) e(events);
    return new Promise((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      if (this.closed) return resolve();
      this.finish = { resolve, reject };
    });
  }

  async decide(args: DecideArgs): Promise<{ taken: boolean }> {
    if (!this.client)
      throw new Unreachable(
        'not connected to the daemon; the request is shown again once the approver has reconnected',
      );
    const r = await this.client.request('approval.decide', { ...args });
    return { taken: r['taken'] === true };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.passphrase?.fill(0);
    this.passphrase = null;
    this.client?.close();
    this.client = null;
    this.finish?.resolve();
  }

  private emit(e: (ev: SourceEvents) => void): void {
    if (this.events) e(this.events);
    else this.early.push(e);
  }

  private wire(client: AdminClient): void {
    client.onPush = (frame) => {
      if (frame['push'] === 'pending') {
        const card = readCard(frame['card']);
        if (card) this.emit((e) => e.pending(card));
        else
          this.emit((e) =>
            e.notice('the daemon sent a card without an id; it cannot be decided here (it will time out)'),
          );
      } else if (frame['push'] === 'withdrawn' && typeof frame['id'] === 'string') {
        const id = frame['id'];
        const reason = typeof frame['reason'] === 'string' ? frame['reason'] : 'withdrawn';
        this.emit((e) => e.withdrawn(id, reason));
      }
    };
    client.onClose = () => {
      if (this.closed || this.client !== client) return;
      this.client = null;
      // Before attaching there is nothing to re-attach with; during a
      // reconnection the loop notices the failed attach itself.
      if (!this.passphrase || this.reconnecting) return;
      this.emit((e) => {
        e.reset();
        e.notice('the connection to the daemon was lost; reconnecting…');
      });
      void this.reconnect();
    };
  }

  private async reconnect(): Promise<void> {
    this.reconnecting = true;
    try {
      await this.reconnectLoop();
    } finally {
      this.reconnecting = false;
    }
  }

  private async reconnectLoop(): Promise<void> {
    let delay = FIRST_RETRY_MS;
    let said = false;
    while (!this.closed) {
      await sleep(delay);
      if (this.closed) return;
      let client: AdminClient | null = null;
      try {
        client = await AdminClient.connect(this.config);
        if (this.closed || !this.passphrase) {
          client.close();
          return;
        }
        this.client = client;
        this.wire(client);
        const r = await client.request('approver.attach', {}, [this.passphrase]);
        this.approverId = String(r['approver'] ?? '');
        const id = this.approverId;
        this.emit((e) => {
          e.attached(id);
          e.notice(`re-attached to the daemon (approver ${id})`);
        });
        return;
      } catch (e) {
        if (!(e instanceof Unreachable)) return this.fail(e as Error);
        if (this.client === client) this.client = null;
        client?.close();
        if (!said && delay >= MAX_RETRY_MS) {
          said = true;
          this.emit((ev) => ev.notice(`the daemon is not reachable; trying again every ${MAX_RETRY_MS / 1000} s`));
        }
        delay = Math.min(delay * 2, MAX_RETRY_MS);
      }
    }
  }

  private fail(e: Error): void {
    this.failure = e;
    const finish = this.finish;
    this.finish = null;
    this.close();
    finish?.reject(e);
  }
}
