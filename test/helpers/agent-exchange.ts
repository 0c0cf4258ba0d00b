// A raw client of the agent socket for tests that need the exact bytes:
// `exchange` writes steps (bytes, waits, a half-close) and collects every
// byte until the daemon closes or the line goes idle; `messages` splits
// them into responses, 1xx included.
import net from 'node:net';
import { parseResponses, type Resp } from './proxy-sequence-client';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export type Step = string | Buffer | { wait: number } | 'end';

// Writes the steps; collects every byte until the daemon closes or `idle` ms
// pass without bytes after the last step (or `max` ms in all).
export function exchange(
  sock: string,
  steps: Step[],
  idle = 2000,
  max = 30000,
): Promise<{ raw: Buffer; closed: boolean; closedAt: number; started: number }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const got: Buffer[] = [];
    const started = Date.now();
    let timer: NodeJS.Timeout | null = null;
    let stepsDone = false;
    let done = false;
    let closed = false;
    let closedAt = 0;
    const finish = (): void => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      clearTimeout(hard);
      c.destroy();
      resolve({ raw: Buffer.concat(got), closed, closedAt, started });
    };
    const hard = setTimeout(finish, max);
    const poke = (): void => {
      if (!stepsDone) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(finish, idle);
    };
    c.on('data', (d: Buffer) => {
      got.push(d);
      poke();
    });
    c.on('error', () => undefined);
    c.on('close', () => {
      closed = true;
      closedAt = Date.now();
      finish();
    });
    c.on('connect', () => {
      void (async () => {
        for (const s of steps) {
          if (s === 'end') c.end();
          else if (typeof s === 'object' && !Buffer.isBuffer(s)) await sleep(s.wait);
          else if (!c.destroyed) c.write(s);
        }
        stepsDone = true;
        poke();
      })();
    });
  });
}

export type Msg = Resp;

// Every message in order, 1xx included.
export function messages(raw: Buffer): { msgs: Msg[]; rest: string } {
  const { responses, rest } = parseResponses(raw, { interim: true });
  return { msgs: responses, rest: rest.toString('latin1') };
}

export function json(m: Msg | undefined): Record<string, unknown> {
  try {
    return JSON.parse(m?.body ?? '') as Record<string, unknown>;
  } catch {
    return {};
  }
}

// The path the upstream saw, from its echo.
export function upstreamPath(m: Msg | undefined): string | undefined {
  const j = json(m);
  try {
    return (JSON.parse(String(j['body'])) as { url: string }).url;
  } catch {
    return undefined;
  }
}

// The refusal in a response, if it is one.
export function errOf(m: Msg | undefined): { code?: string; audit_seq?: unknown } | undefined {
  return json(m)['error'] as { code?: string; audit_seq?: unknown } | undefined;
}
