// A real HTTP-over-Unix-socket peer for `postern run`: it answers
// `POST /v1/runs` with the reply shape of SPEC §11 (or a refusal for the
// credential "nope"), and records every other connection `postern run`
// relays to it, head and bytes. A CONNECT is answered 200 and then echoed;
// any other request is answered with the head it arrived with. With
// `forward`, the other connections go byte for byte to that socket instead
// (a real daemon's agent socket) and are recorded all the same; `env`
// replaces the variables the reply names.
import net from 'node:net';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { Test } from 'tap';
import { cleanEnv, makeHome, type Home } from './postern';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RelayedConnection {
  head: string;
  bytes: () => Buffer; // everything received on the connection, head included
}

export interface RunsPeer {
  socket: string;
  runsBodies: unknown[];
  relayed: RelayedConnection[];
  close(): Promise<void>;
}

export const PEER_ENV = { GH_TOKEN: 'postern-github-0123456789abcdef', OTHER_KEY: 'postern-other-fedcba9876543210' };

function reply(status: number, body: unknown): string {
  const text = JSON.stringify(body);
  return `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`;
}

function answerRuns(s: net.Socket, body: unknown, env: Record<string, unknown>): void {
  const names = (body as { credentials?: string[] }).credentials ?? [];
  if (names.includes('nope')) {
    s.end(
      reply(404, {
        error: { code: 'unknown_credential', message: 'no credential "nope"; see GET /v1/credentials', audit_seq: 7 },
      }),
    );
    return;
  }
  s.end(
    reply(200, {
      run: 'run-1',
      placeholders: { github: PEER_ENV.GH_TOKEN, other: PEER_ENV.OTHER_KEY },
      env,
    }),
  );
}

export function startRunsPeer(o: { forward?: string; env?: Record<string, unknown> } = {}): Promise<RunsPeer> {
  const dir = mkdtempSync(join(tmpdir(), 'pt-runs-'));
  const socket = join(dir, 'agent.sock');
  const runsBodies: unknown[] = [];
  const relayed: RelayedConnection[] = [];
  const open = new Set<net.Socket>();
  const server = net.createServer((s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
    s.on('error', () => undefined);
    const chunks: Buffer[] = [];
    let state: 'head' | 'runs' | 'echo' | 'forward' | 'answered' = 'head';
    let forwardTo: net.Socket | null = null;
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      const all = Buffer.concat(chunks);
      if (state === 'echo') s.write(d);
      else if (state === 'forward') forwardTo!.write(d);
      if (state !== 'head' && state !== 'runs') return;
      const end = all.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = all.subarray(0, end).toString('latin1');
      if (head.startsWith('POST /v1/runs ')) {
        state = 'runs';
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (all.length < end + 4 + length) return;
        const body = JSON.parse(all.subarray(end + 4, end + 4 + length).toString('utf8')) as unknown;
        runsBodies.push(body);
        state = 'answered';
        answerRuns(s, body, o.env ?? PEER_ENV);
        return;
      }
      relayed.push({ head, bytes: () => Buffer.concat(chunks) });
      if (o.forward) {
        state = 'forward';
        forwardTo = net.connect(o.forward);
        forwardTo.on('error', () => s.destroy());
        forwardTo.write(all);
        forwardTo.pipe(s);
        s.on('end', () => forwardTo!.end());
      } else if (head.startsWith('CONNECT ')) {
        state = 'echo';
        s.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (all.length > end + 4) s.write(all.subarray(end + 4));
        s.on('end', () => s.end());
      } else {
        state = 'answered';
        s.end(reply(200, { head }));
      }
    });
  });
  return new Promise((resolve) => {
    server.listen(socket, () =>
      resolve({
        socket,
        runsBodies,
        relayed,
        close: () =>
          new Promise((done) => {
            for (const s of open) s.destroy();
            server.close(() => {
              rmSync(dir, { recursive: true, force: true });
              done();
            });
          }),
      }),
    );
  });
}

// A runs peer and a fresh home pointed at it, both removed at the end of `t`:
// the set-up of a `postern run` test that needs no daemon.
export async function runsPeerHome(t: Test): Promise<{ peer: RunsPeer; h: Home; env: NodeJS.ProcessEnv }> {
  const peer = await startRunsPeer();
  t.teardown(() => peer.close());
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  return { peer, h, env: cleanEnv({ POSTERN_HOME: h.home, POSTERN_AGENT_SOCKET: peer.socket }) };
}
