// A whole postern set-up for request-path tests: a home with a config that
// points at a real UDP DNS server and trusts a throwaway CA, a real HTTPS
// upstream, the daemon (unlocked), and optionally an approver attached over
// admin.sock that decides every card with a given policy.
import { assertEventShapes } from './event-shape';
import { join } from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cli, init, makeHome, startDaemon, agentRequest, PASSPHRASE, Home, Daemon } from './postern';
import { makeTestCa, startHttpsUpstream, echo, Handler, TestCa, Upstream } from './https-upstream';
import { startDnsServer, zone, Answer } from './dns-server';
import { TestAdmin } from './admin';

export interface Stack {
  h: Home;
  d: Daemon;
  ca: TestCa;
  up: Upstream;
  dns: Awaited<ReturnType<typeof startDnsServer>>;
  sock: string;
  url(host: string, path: string): string;
  // Adds an HTTP credential from TOML text (ports/hosts as you write them).
  addCredential(name: string, toml: string, secret: string): void;
  // Attach an approver deciding each card with `decide` (default: a session
  // rooted at the requester).
  approver(
    decide?: (card: Card) => { decision: 'deny' | 'once' | 'session'; root_key?: string } | null,
  ): Promise<TestAdmin>;
  request(body: unknown): Promise<{ status: number; json: unknown; text: string }>;
  close(): Promise<void>;
}

export interface Card {
  id: string;
  credential: string;
  approve: string;
  process: { key: string; pid: number };
  ancestors: { key: string; pid: number }[];
  action: Record<string, unknown>;
}

export interface StackOptions {
  names?: string[]; // certificate names; default api.example.test
  records?: Record<string, Answer | ((type: string, count: number) => Answer)>;
  dnsPort?: number; // another DNS server on 127.0.0.1 instead of the zone's (`records` then unused)
  handler?: Handler;
  config?: string; // extra config text appended to [daemon]
  httpConfig?: string; // extra config text appended to [http]
  sshConfig?: string; // when given, an [ssh] table with this text is appended
  // The [audit] table. By default refusals are never summarised, so a test
  // sending many refused requests a second still gets one entry each;
  // '' keeps the daemon's defaults (audit.refusal_burst = 20).
  auditConfig?: string;
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  const ca = makeTestCa(o.names ?? ['api.example.test']);
  const up = await startHttpsUpstream(ca, o.handler ?? echo);
  const dns = await startDnsServer(zone(o.records ?? { 'api.example.test': { A: ['127.0.0.1'] } }));
  const h = makeHome();
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(
    join(h.home, 'config.toml'),
    `[daemon]\n${o.config ?? ''}\n[http]\ndns_servers = ["127.0.0.1:${o.dnsPort ?? dns.port}"]\nca_file = "${ca.caFile}"\n${o.httpConfig ?? ''}\n${o.sshConfig !== undefined ? `[ssh]\n${o.sshConfig}\n` : ''}[audit]\n${o.auditConfig ?? 'refusal_burst = 100000'}\n`,
    { mode: 0o600 },
  );
  if (init(h).code !== 0) throw new Error('init failed');
  const d = await startDaemon(h);
  const u = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  if (u.code !== 0) throw new Error(`unlock failed: ${u.stderr}`);
  const sock = join(h.home, 'agent.sock');
  const admins: TestAdmin[] = [];
  return {
    h,
    d,
    ca,
    up,
    dns,
    sock,
    url: (host, path) => `https://${host}:${up.port}${path}`,
    addCredential(name, toml, secret) {
      const r = cli(h, [
        'cred',
        'add',
        '--file',
        h.file(`${name}.toml`, toml),
        '--secret-file',
        h.file(`${name}.secret`, secret),
        '--passphrase-file',
        h.passFile,
      ]);
      if (r.code !== 0) throw new Error(`cred add ${name}: ${r.stderr}`);
    },
    async approver(decide = (card) => ({ decision: 'session', root_key: card.process.key })) {
      const admin = await TestAdmin.connect(join(h.home, 'admin.sock'));
      const att = await admin.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]);
      if (att['ok'] !== true) throw new Error(`attach: ${JSON.stringify(att)}`);
      admin.onPush = (f) => {
        if (f['push'] !== 'pending') return;
        const card = f['card'] as Card;
        const answer = decide(card);
        if (answer) void admin.request('approval.decide', { id: card.id, ...answer });
      };
      admins.push(admin);
      return admin;
    },
    request: (body) => agentRequest(sock, 'POST', '/v1/http', body),
    async close() {
      for (const a of admins) a.close();
      await d.stop();
      await up.close();
      await dns.close();
      ca.cleanup();
      h.cleanup();
    },
  };
}

// The decrypted journal (`postern audit show --json`), by sequence number.
export function auditEntries(s: Stack): Map<number, Record<string, unknown>> {
  const r = cli(s.h, ['audit', 'show', '--json', '--passphrase-file', s.h.passFile]);
  if (r.code !== 0) throw new Error(`audit show: ${r.stderr}`);
  const m = new Map<number, Record<string, unknown>>();
  for (const line of r.stdout.trim().split('\n')) {
    const e = JSON.parse(line) as Record<string, unknown>;
    m.set(e['seq'] as number, e);
  }
  assertEventShapes([...m.values()]);
  return m;
}

// The same, as a list in journal order.
export function auditList<T = Record<string, unknown>>(s: Stack): T[] {
  return [...auditEntries(s).values()] as T[];
}
