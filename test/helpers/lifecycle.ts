// Lifecycle events racing with requests (test/lifecycle): a stack with an approver whose
// decisions the test makes by hand, credential text, and a TCP relay that
// holds new connections until released (a pooled connection being made).
import net from 'node:net';
import { join } from 'node:path';
import { startStack, Stack, StackOptions, Card } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { cli, cliAsync, Result } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';

export type ErrBody = { error?: { code?: string; maybe_executed?: boolean; audit_seq?: number } };
export const code = (r: { json: unknown }): string | undefined => (r.json as ErrBody | null)?.error?.code;

export function httpDef(
  name: string,
  port: number,
  o: { paths?: string[]; host?: string; approve?: string; extra?: string } = {},
): string {
  const paths = (o.paths ?? ['/*']).map((p) => JSON.stringify(p)).join(', ');
  return (
    `name = "${name}"\nkind = "http"\n${o.approve ? `approve = "${o.approve}"\n` : ''}allow_addresses = ["127.0.0.1/32"]\n${o.extra ?? ''}` +
    `[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
    `[[allow]]\nhost = "${o.host ?? 'api.example.test'}"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = [${paths}]\n`
  );
}

export interface Manual {
  admin: TestAdmin;
  cards: Card[];
  // Resolves with the next card pushed (or one already pushed after `from`).
  nextCard(from: number, ms?: number): Promise<Card | null>;
  decide(card: Card, decision: 'deny' | 'once' | 'session'): Promise<Record<string, unknown>>;
}

// An approver that only records cards; the test decides.
export async function manualApprover(s: Stack): Promise<Manual> {
  const cards: Card[] = [];
  const admin = await s.approver((c) => {
    cards.push(c);
    return null;
  });
  return {
    admin,
    cards,
    async nextCard(from, ms = 15_000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        if (cards.length > from) return cards[from]!;
        await new Promise((r) => setTimeout(r, 20));
      }
      return null;
    },
    decide: (card, decision) =>
      admin.request('approval.decide', {
        id: card.id,
        decision,
        ...(decision === 'session' ? { root_key: card.process.key } : {}),
      }),
  };
}

export function credUpdate(s: Stack, name: string, toml: string, secret?: string): Promise<Result> {
  const args = [
    'cred',
    'update',
    name,
    '--file',
    s.h.file(`${name}-upd.toml`, toml),
    '--passphrase-file',
    s.h.passFile,
  ];
  if (secret !== undefined) args.push('--secret-file', s.h.file(`${name}-upd.secret`, secret));
  return cliAsync(s.h, args);
}

export function credRm(s: Stack, name: string): Promise<Result> {
  return cliAsync(s.h, ['cred', 'rm', name, '--passphrase-file', s.h.passFile]);
}

export function sessions(s: Stack): { id: string; credential: string }[] {
  const r = cli(s.h, ['sessions', '--json']);
  if (r.code !== 0) throw new Error(r.stderr);
  const j = JSON.parse(r.stdout) as
    { sessions: { id: string; credential: string }[] } | { id: string; credential: string }[];
  return Array.isArray(j) ? j : j.sessions;
}

// A relay in front of a port: each connection is held (nothing read or
// connected onward) until `release()`, then piped through.
export async function holdingRelay(target: number): Promise<{
  port: number;
  held: () => number;
  release: () => void;
  hold: () => void;
  close: () => Promise<void>;
}> {
  let open = false;
  const waiting: (() => void)[] = [];
  const socks = new Set<net.Socket>();
  const server = net.createServer((c) => {
    socks.add(c);
    c.on('close', () => socks.delete(c));
    c.on('error', () => undefined);
    c.pause();
    const go = (): void => {
      if (c.destroyed) return;
      const u = net.connect(target, '127.0.0.1');
      socks.add(u);
      u.on('error', () => c.destroy());
      c.on('error', () => u.destroy());
      u.on('close', () => c.destroy());
      c.on('close', () => u.destroy());
      c.pipe(u);
      u.pipe(c);
      c.resume();
    };
    if (open) go();
    else waiting.push(go);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    held: () => waiting.length,
    hold() {
      open = false;
    },
    release() {
      open = true;
      for (const g of waiting.splice(0)) g();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of socks) s.destroy();
        server.close(() => r());
      }),
  };
}

export function verify(s: Stack): Result {
  return cli(s.h, ['audit', 'verify']);
}

export const ADMIN = (s: Stack): string => join(s.h.home, 'admin.sock');
export type { Stack, StackOptions };
export { startStack };

// A stack with api.example.test, and slow.example.test whose DNS answer
// takes 2.5 s, a relay holding connections to its upstream, an approver
// the test decides for; credentials added with a canary secret each, and
// how many upstream requests carried a given one.
export async function raceStack(t: { teardown(fn: () => unknown): void }) {
  const s = await startStack({
    names: ['api.example.test', 'slow.example.test'],
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'slow.example.test': { A: ['127.0.0.1'], delayMs: 2500 },
    },
  });
  t.teardown(() => s.close());
  const relay = await holdingRelay(s.up.port);
  t.teardown(() => relay.close());
  const secrets: string[] = [];
  const add = (name: string, toml: string): string => {
    const sec = makeCanary(name.toUpperCase());
    secrets.push(sec);
    s.addCredential(name, toml, sec);
    return sec;
  };
  const sentWith = (sec: string): number =>
    s.up.requests.filter((r) => JSON.stringify(r.headers).includes(sec) || r.url.includes(sec)).length;
  return { s, relay, m: await manualApprover(s), secrets, add, sentWith };
}
