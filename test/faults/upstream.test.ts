// Hostile upstreams against the real daemon (SPEC §6.1, §6.3, §6.4): a body
// that trickles forever is cut at timeout_ms (504 upstream_timeout, may
// have executed) while other requests are served; a 1 GiB body is read only
// up to max_response_body (200, truncated), the daemon's memory stays
// bounded and the upstream connection is dropped; an upstream that never
// answers, or never finishes the TLS handshake, obeys timeout_ms; a reset
// deep into a chunked body is 502 upstream_error. After each, a normal
// request works, and the journal verifies at the end.
import t, { Test } from 'tap';
import net from 'node:net';
import { createServer as createHttpsServer } from 'node:https';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { startStack, auditEntries } from '../helpers/stack';
import { cli, eventually } from '../helpers/postern';
import { echo } from '../helpers/https-upstream';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: number; maybe_executed?: unknown };
}

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
  body_encoding: string;
  truncated: boolean;
  audit_seq: number;
}

const GIB = 1024 * 1024 * 1024;
const CAP = 64 * 1024;

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}

t.test('hostile upstreams: clear refusals, bounded memory, the daemon keeps serving', async (t) => {
  const held: ServerResponse[] = [];
  const trickles: NodeJS.Timeout[] = [];
  const huge = { sent: 0, closedAt: 0 };
  const s = await startStack({
    httpConfig: `max_response_body = "64KiB"\ntimeout = "20s"`,
    handler: (req, body, res) => {
      const url = req.url ?? '';
      if (url === '/trickle') {
        // Headers at once, then one byte a second for ever.
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('x');
        const iv = setInterval(() => {
          if (res.destroyed) clearInterval(iv);
          else res.write('x');
        }, 1000);
        trickles.push(iv);
        return;
      }
      if (url === '/huge') {
        // 1 GiB announced and streamed from one small buffer, with
        // back-pressure; writing stops when the connection closes.
        const chunk = Buffer.alloc(64 * 1024, 'a');
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(GIB) });
        res.on('close', () => (huge.closedAt = Date.now()));
        const pump = (): void => {
          while (!res.destroyed && huge.sent < GIB) {
            huge.sent += chunk.length;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          if (!res.destroyed) res.end();
        };
        pump();
        return;
      }
      if (url === '/silent') {
        held.push(res); // read, never answered
        return;
      }
      return echo(req, body, res);
    },
  });

  // A TLS server that resets its TCP connection deep into a chunked body.
  const raw = new Map<number, net.Socket>();
  const resetter = createHttpsServer({ key: s.ca.key, cert: s.ca.cert });
  resetter.on('connection', (sock: net.Socket) => {
    raw.set(sock.remotePort!, sock);
    sock.on('close', () => raw.delete(sock.remotePort!));
  });
  resetter.on('tlsClientError', () => undefined);
  resetter.on('request', (req, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(Buffer.alloc(16 * 1024, 'b'));
      res.write(Buffer.alloc(16 * 1024, 'c'), () =>
        setTimeout(() => raw.get(req.socket.remotePort!)?.resetAndDestroy(), 50),
      );
    });
  });
  await new Promise<void>((r) => resetter.listen(0, '127.0.0.1', () => r()));
  const resetPort = (resetter.address() as AddressInfo).port;

  // A TCP server that accepts and reads but never writes a byte: the TLS
  // handshake never completes.
  const mute = new Set<net.Socket>();
  const muteServer = net.createServer((sock) => {
    mute.add(sock);
    sock.on('data', () => undefined);
    sock.on('error', () => undefined);
    sock.on('close', () => mute.delete(sock));
  });
  await new Promise<void>((r) => muteServer.listen(0, '127.0.0.1', () => r()));
  const mutePort = (muteServer.address() as AddressInfo).port;

  t.teardown(async () => {
    for (const iv of trickles) clearInterval(iv);
    for (const r of held) r.destroy();
    for (const m of mute) m.destroy();
    for (const r of raw.values()) r.destroy();
    await new Promise<void>((r) => muteServer.close(() => r()));
    await new Promise<void>((r) => resetter.close(() => r()));
    await s.close();
  });

  const P = s.up.port;
  const rule = (port: number): string =>
    `[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\n`;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      rule(P) +
      rule(resetPort) +
      rule(mutePort),
    'upstream-fault-secret',
  );
  await s.approver();

  const url = (path: string, port = P): string => `https://api.example.test:${port}${path}`;
  const normal = async (tag: string): Promise<{ status: number; ms: number; text: string }> => {
    const started = Date.now();
    const r = await s.request({ credential: 'api', method: 'GET', url: url(`/ok/${tag}`) });
    return { status: r.status, ms: Date.now() - started, text: r.text };
  };
  const refusals: { what: string; code: string; seq: number; path: string }[] = [];
  // A 504 upstream_timeout (with maybe_executed: true when `mayHaveRun`),
  // answered between min and max ms after `started`; noted for the journal
  // checks at the end.
  const timedOut = (
    t: Test,
    r: { status: number; text: string; json: unknown },
    started: number,
    [min, max]: [number, number],
    mayHaveRun: boolean,
    what: string,
  ): void => {
    const elapsed = Date.now() - started;
    t.equal(r.status, 504, r.text);
    const e = (r.json as ErrorBody | null)?.error;
    t.equal(e?.code, 'upstream_timeout');
    if (mayHaveRun) t.equal(e?.maybe_executed, true, 'maybe_executed: true');
    t.type(e?.audit_seq, 'number');
    t.ok(elapsed >= min && elapsed <= max, `elapsed ${elapsed} ms within ${min}–${max}`);
    if (e) refusals.push({ what, code: e.code, seq: e.audit_seq, path: `/${what}` });
  };

  const warm = await normal('warm');
  t.equal(warm.status, 200, warm.text);

  await t.test('a body trickling one byte a second is cut at timeout_ms while others are served', async (t) => {
    const started = Date.now();
    let doneAt = 0;
    const slow = s.request({ credential: 'api', method: 'GET', url: url('/trickle'), timeout_ms: 2500 }).then((r) => {
      doneAt = Date.now();
      return r;
    });
    t.ok(
      await eventually(() => s.up.requests.some((q) => q.url === '/trickle'), 5000),
      'the trickling request reached the upstream',
    );
    for (let i = 0; i < 3; i++) {
      const n = await normal(`during-trickle-${i}`);
      t.equal(n.status, 200, n.text);
      t.ok(n.ms < 2000, `a request during the trickle took ${n.ms} ms`);
    }
    t.equal(doneAt, 0, 'the normal requests finished while the trickle was still in flight');
    timedOut(t, await slow, started, [2500, 4000], true, 'trickle');
    const after = await normal('after-trickle');
    t.equal(after.status, 200, after.text);
  });

  await t.test('a 1 GiB body is capped; memory bounded; the upstream connection dropped', async (t) => {
    const pid = s.d.proc.pid!;
    t.equal(readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), 'node', "the pid measured is the daemon's node process");
    const before = rssKiB(pid);
    let peak = before;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssKiB(pid));
      } catch {
        // the daemon exited: the assertions below say so
      }
    }, 25);
    const started = Date.now();
    const r = await s.request({ credential: 'api', method: 'GET', url: url('/huge'), timeout_ms: 30_000 });
    const repliedAt = Date.now();
    clearInterval(sampler);
    peak = Math.max(peak, rssKiB(pid));
    t.equal(r.status, 200, r.text.slice(0, 300));
    const j = r.json as Reply | null;
    t.equal(j?.status, 200, 'the upstream status');
    t.equal(j?.truncated, true, 'truncated: true');
    t.equal(j?.body_encoding, 'utf8');
    t.equal(j?.body.length, CAP, 'the body is exactly max_response_body');
    t.ok(j?.body === 'a'.repeat(CAP), 'the body is the first bytes sent');
    t.ok(repliedAt - started < 10_000, `answered in ${repliedAt - started} ms`);
    t.ok(
      peak - before < 96 * 1024,
      `daemon RSS grew by ${peak - before} KiB at most (before ${before} KiB, peak ${peak} KiB)`,
    );
    t.ok(await eventually(() => huge.closedAt !== 0, 5000), 'the upstream saw its connection closed');
    t.ok(huge.closedAt - repliedAt < 5000, `closed ${huge.closedAt - repliedAt} ms after the reply`);
    t.ok(huge.sent < 64 * 1024 * 1024, `the upstream wrote ${huge.sent} bytes before postern stopped reading`);
    const sentAtClose = huge.sent;
    await new Promise((r) => setTimeout(r, 300));
    t.equal(huge.sent, sentAtClose, 'nothing more is written after the close');
    const entry = auditEntries(s).get(j?.audit_seq ?? -1);
    t.equal(entry?.['kind'], 'http_outcome');
    t.equal(entry?.['truncated'], true, 'the outcome records the truncation');
    const after = await normal('after-huge');
    t.equal(after.status, 200, after.text);
    t.ok(rssKiB(pid) - before < 96 * 1024, 'RSS stays bounded afterwards');
  });

  await t.test('an upstream that reads the request and never answers: 504 at timeout_ms', async (t) => {
    const started = Date.now();
    const slow = s.request({
      credential: 'api',
      method: 'POST',
      url: url('/silent'),
      body: 'payload',
      timeout_ms: 1000,
    });
    t.ok(await eventually(() => held.length === 1, 5000), 'the upstream read the request');
    const during = await normal('during-silent');
    t.equal(during.status, 200, during.text);
    timedOut(t, await slow, started, [1000, 2500], true, 'silent');
    const after = await normal('after-silent');
    t.equal(after.status, 200, after.text);
  });

  await t.test('a TCP peer that never completes the TLS handshake: 504 at timeout_ms', async (t) => {
    const started = Date.now();
    const r = await s.request({ credential: 'api', method: 'GET', url: url('/mute', mutePort), timeout_ms: 1000 });
    timedOut(t, r, started, [1000, 2500], false, 'mute');
    const after = await normal('after-mute');
    t.equal(after.status, 200, after.text);
  });

  await t.test('a reset 32 KiB into a chunked body: 502 upstream_error, may have executed', async (t) => {
    const r = await s.request({
      credential: 'api',
      method: 'POST',
      url: url('/reset-deep', resetPort),
      body: 'payload',
      timeout_ms: 10_000,
    });
    t.equal(r.status, 502, r.text);
    const e = (r.json as ErrorBody | null)?.error;
    t.equal(e?.code, 'upstream_error');
    t.equal(e?.maybe_executed, true, 'maybe_executed: true');
    t.type(e?.audit_seq, 'number');
    if (e) refusals.push({ what: 'reset', code: e.code, seq: e.audit_seq, path: '/reset-deep' });
    const after = await normal('after-reset');
    t.equal(after.status, 200, after.text);
  });

  await t.test('every refusal has its outcome in the journal, which verifies', async (t) => {
    t.equal(refusals.length, 4, 'four refusals collected');
    const entries = auditEntries(s);
    for (const f of refusals) {
      const out = entries.get(f.seq);
      t.equal(out?.['kind'], 'http_outcome', `${f.what}: audit_seq is the outcome`);
      t.equal(out?.['error'], f.code, `${f.what}: the outcome names the error`);
      t.equal(entries.get(out?.['intent_seq'] as number)?.['path'], f.path, `${f.what}: its intent names the path`);
    }
    const code = await s.d.stop();
    t.equal(code, 0, 'the daemon stops cleanly');
    const v = cli(s.h, ['audit', 'verify', '--json']);
    t.equal(v.code, 0, v.stdout + v.stderr);
  });
});
