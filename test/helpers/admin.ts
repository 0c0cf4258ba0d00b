// A bare admin.sock client for tests that drive the daemon faster than one
// CLI process per call (the CLI itself is covered by the CLI tests).
import net from 'node:net';
import { FrameDecoder, encodeFrame } from '../../shared/admin-frame';

export class TestAdmin {
  private decoder = new FrameDecoder();
  private next = 1;
  private waiting = new Map<number, (r: Record<string, unknown>) => void>();
  private closed = false;
  readonly pushes: Record<string, unknown>[] = [];
  onPush: ((frame: Record<string, unknown>) => void) | null = null;

  private constructor(private sock: net.Socket) {
    sock.on('data', (c: Buffer) => {
      for (const f of this.decoder.push(c)) {
        if (typeof f.json['push'] === 'string') {
          this.pushes.push(f.json);
          this.onPush?.(f.json);
          continue;
        }
        const cb = this.waiting.get(f.json['id'] as number);
        this.waiting.delete(f.json['id'] as number);
        cb?.(f.json);
      }
    });
    const fail = (): void => {
      this.closed = true;
      for (const cb of this.waiting.values()) cb({ ok: false, error: { code: 'connection_closed' } });
      this.waiting.clear();
    };
    sock.on('close', fail);
    sock.on('error', fail);
  }

  static connect(path: string): Promise<TestAdmin> {
    return new Promise((resolve, reject) => {
      const s = net.connect(path);
      s.once('connect', () => resolve(new TestAdmin(s)));
      s.once('error', reject);
    });
  }

  request(
    op: string,
    args: Record<string, unknown> = {},
    attachments: Buffer[] = [],
  ): Promise<Record<string, unknown>> {
    if (this.closed) return Promise.resolve({ ok: false, error: { code: 'connection_closed' } });
    const id = this.next++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.sock.write(encodeFrame({ id, op, args }, attachments));
    });
  }

  close(): void {
    this.sock.destroy();
  }
}

// An approver attached over admin.sock that grants every card a session
// rooted at the requester, as a human pressing "s" would.
export async function approveSessions(adminSock: string, passphrase: string): Promise<TestAdmin> {
  const admin = await TestAdmin.connect(adminSock);
  const att = await admin.request('approver.attach', {}, [Buffer.from(passphrase)]);
  if (att['ok'] !== true) throw new Error(`attach: ${JSON.stringify(att)}`);
  admin.onPush = (f) => {
    if (f['push'] !== 'pending') return;
    const card = f['card'] as { id: string; process: { key: string } };
    void admin.request('approval.decide', { id: card.id, decision: 'session', root_key: card.process.key });
  };
  return admin;
}
