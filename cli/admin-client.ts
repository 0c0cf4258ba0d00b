// The CLI side of admin.sock. Before anything is sent, the peer uid of the
// socket is checked against daemon.daemon_uid (-1: our own uid), so a
// passphrase never goes to a process impersonating the daemon under
// another uid.
import net from 'node:net';
import { FrameDecoder, encodeFrame } from '../shared/admin-frame';
import { ADMIN_OPS, type AdminOp } from '../shared/admin-protocol';
import type { LoadedConfig } from '../shared/config';
import { peerCredOfSocket } from '../shared/native';
import { Refusal } from '../shared/errors';
import { DaemonRefusal, Unreachable } from './errors';
import { existsSync } from 'node:fs';
import { describeDaemon, findRunningDaemon, restartAdvice } from '../shared/running-daemon';

// How long an operation without a passphrase may take to be answered.
const ANSWER_MS = 10_000;

export class AdminClient {
  private nextId = 1;
  private decoder = new FrameDecoder();
  // Frames the daemon sends unasked (to an attached approver).
  onPush: ((frame: Record<string, unknown>) => void) | null = null;
  // Called once when the connection ends, for clients that stay connected.
  onClose: (() => void) | null = null;
  private waiting = new Map<number, { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }>();

  private constructor(private readonly sock: net.Socket) {
    sock.on('data', (chunk: Buffer) => {
      let frames;
      try {
        frames = this.decoder.push(chunk);
      } catch (e) {
        this.failAll(e as Error);
        return;
      }
      for (const f of frames) {
        if (typeof f.json['push'] === 'string') this.onPush?.(f.json);
        else this.settle(f.json);
      }
    });
    sock.on('close', () => {
      this.failAll(new Unreachable('the daemon closed the connection; check `postern status` and its log'));
      this.onClose?.();
    });
    sock.on('error', () => undefined);
  }

  static connect(config: LoadedConfig): Promise<AdminClient> {
    const path = config.paths.adminSocket;
    return new Promise((resolve, reject) => {
      const sock = net.connect(path);
      sock.once('error', (e: NodeJS.ErrnoException) => {
        void unreachable(config, e).then(reject);
      });
      sock.once('connect', () => {
        try {
          checkDaemonUid(sock, config.config.daemon.daemon_uid);
        } catch (e) {
          sock.destroy();
          reject(e);
          return;
        }
        resolve(new AdminClient(sock));
      });
    });
  }

  request(
    op: AdminOp,
    args: Record<string, unknown> = {},
    attachments: Buffer[] = [],
  ): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const frame = encodeFrame({ id, op, args }, attachments);
    return new Promise((resolve, reject) => {
      // An operation with a passphrase may take the KDF's time and the
      // back-off after wrong ones: no limit. Any other is answered at once
      // by a running daemon; one that is stopped (SIGSTOP, a debugger) or
      // stuck would otherwise leave the command waiting without a word.
      const quick = !(ADMIN_OPS[op] as readonly string[]).includes('passphrase');
      const timer = quick
        ? setTimeout(() => {
            if (!this.waiting.delete(id)) return;
            reject(
              new Unreachable(
                `the postern daemon did not answer ${op} within ${ANSWER_MS / 1000} s; it may be stopped (SIGSTOP, a debugger) or overloaded: check its process and its log, and restart it if it stays so`,
              ),
            );
          }, ANSWER_MS)
        : null;
      timer?.unref();
      const done =
        <T>(f: (v: T) => void) =>
        (v: T): void => {
          if (timer) clearTimeout(timer);
          f(v);
        };
      this.waiting.set(id, { resolve: done(resolve), reject: done(reject) });
      this.sock.write(frame, () => frame.fill(0));
    });
  }

  // A reply carries the id of its request; id 0 is a connection-level refusal
  // (such as a peer check) and answers everything outstanding.
  private settle(json: Record<string, unknown>): void {
    const id = typeof json['id'] === 'number' ? json['id'] : 0;
    const ids = id === 0 ? [...this.waiting.keys()] : [id];
    for (const i of ids) {
      const w = this.waiting.get(i);
      if (!w) continue;
      this.waiting.delete(i);
      if (json['ok'] === true) w.resolve(json['result'] as Record<string, unknown>);
      else {
        const { code, message, ...detail } = (json['error'] ?? {}) as Record<string, unknown>;
        w.reject(new DaemonRefusal(String(code), String(message ?? 'refused'), detail));
      }
    }
  }

  close(): void {
    this.sock.end();
    this.decoder.wipe();
  }

  private failAll(e: Error): void {
    for (const w of this.waiting.values()) w.reject(e);
    this.waiting.clear();
  }
}

function checkDaemonUid(sock: net.Socket, daemonUid: number): void {
  const expected = daemonUid === -1 ? (process.getuid?.() ?? -1) : daemonUid;
  const peer = peerCredOfSocket(sock);
  if (peer.uid !== expected) {
    throw new Refusal(
      'denied_peer',
      `admin.sock is served by uid ${peer.uid}, not the daemon's uid ${expected}; refusing to talk to it (someone may be impersonating the daemon)`,
    );
  }
}

// Open, run one request, close: the shape of most commands.
export async function withAdmin<T>(config: LoadedConfig, fn: (c: AdminClient) => Promise<T>): Promise<T> {
  const client = await AdminClient.connect(config);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

// The admin socket does not answer. A daemon may still run for this home
// (its socket file deleted, say): then every command names it and says how
// to restart it, rather than asking for a second daemon.
async function unreachable(config: LoadedConfig, e: NodeJS.ErrnoException): Promise<Unreachable> {
  const path = config.paths.adminSocket;
  const running = await findRunningDaemon(config.home);
  if (!running)
    return new Unreachable(
      `the postern daemon is not reachable at ${path} (${e.code}); start it with \`postern daemon\``,
    );
  const state = existsSync(path) ? 'does not answer' : 'is missing';
  return new Unreachable(
    `the postern daemon (${describeDaemon(running)}) is running for ${config.home}, but its admin socket ${path} ${state}; ${restartAdvice(running)}`,
  );
}
