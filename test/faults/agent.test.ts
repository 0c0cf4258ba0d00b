// Misbehaving agents against the real daemon (SPEC §6, §6.3): one that
// hangs up while its request waits on the upstream (the outcome is still
// journaled), one that hangs up while waiting for approval (its card is
// withdrawn), one that sends its request slower than
// daemon.agent_request_timeout (refused or cut off in time), and a thousand
// idle connections (the daemon keeps serving, and their descriptors are
// released when they close). After each, a normal request works; the
// journal verifies at the end.
import t from 'tap';
import net from 'node:net';
import { readdirSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { startStack, Stack, auditList } from '../helpers/stack';
import { cli, eventually, openRequest } from '../helpers/postern';
import { echo } from '../helpers/https-upstream';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: number };
}

const auditEntries = (s: Stack): Record<string, unknown>[] => auditList<Record<string, unknown>>(s);

function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

t.test('misbehaving agents: the daemon keeps serving and journaling', async (t) => {
  const held: ServerResponse[] = [];
  const s = await startStack({
    config: 'agent_request_timeout = "2s"',
    handler: (req, body, res) => {
      if ((req.url ?? '').startsWith('/hold')) {
        held.push(res); // answered when the test says
        return;
      }
      return echo(req, body, res);
    },
  });
  t.teardown(async () => {
    for (const r of held) r.destroy();
    await s.close();
  });
  const P = s.up.port;
  const def = (name: string, approve: string): string =>
    `name = "${name}"\nkind = "http"\napprove = "${approve}"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\n`;
  s.addCredential('api', def('api', 'session'), 'agent-fault-secret');
  s.addCredential('each', def('each', 'each-use'), 'agent-fault-secret');
  // Cards for `each` are left undecided; `api` gets a session.
  const admin = await s.approver((card) =>
    card.credential === 'each' ? null : { decision: 'session', root_key: card.process.key },
  );
  const cards = (): Record<string, unknown>[] => admin.pushes.filter((p) => p['push'] === 'pending');

  const normal = async (tag: string): Promise<{ status: number; ms: number; text: string }> => {
    const started = Date.now();
    const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', `/ok/${tag}`) });
    return { status: r.status, ms: Date.now() - started, text: r.text };
  };
  const alive = (): boolean => s.d.proc.exitCode === null && s.d.proc.signalCode === null;

  const warm = await normal('warm');
  t.equal(warm.status, 200, warm.text);

  await t.test('an agent that hangs up while the upstream holds its response', async (t) => {
    const gone = openRequest(s.sock, {
      credential: 'api',
      method: 'GET',
      url: s.url('api.example.test', '/hold/1'),
      timeout_ms: 20_000,
    });
    t.ok(await eventually(() => held.length === 1, 5000), 'the request reached the upstream');
    gone.socket.destroy();
    await gone.reply;
    const during = await normal('after-hangup');
    t.equal(during.status, 200, during.text);
    // The upstream answers after all, to nobody.
    const res = held[0]!;
    if (!res.destroyed) res.end('late');
    t.ok(alive(), 'the daemon is running');
    const after = await normal('after-late-answer');
    t.equal(after.status, 200, after.text);
    // The intent has its outcome in the journal.
    let outcome: Record<string, unknown> | undefined;
    t.ok(
      await eventually(() => {
        const entries = auditEntries(s);
        const intent = entries.find((e) => e['kind'] === 'http_intent' && e['path'] === '/hold/1');
        outcome = entries.find(
          (e) => e['kind'] === 'http_outcome' && intent !== undefined && e['intent_seq'] === intent['seq'],
        );
        return outcome !== undefined;
      }, 8000),
      'the outcome of the abandoned request is journaled',
    );
  });

  await t.test('an agent that hangs up while waiting for approval withdraws its card', async (t) => {
    const before = cards().length;
    const gone = openRequest(s.sock, {
      credential: 'each',
      method: 'GET',
      url: s.url('api.example.test', '/withdrawn'),
    });
    t.ok(await eventually(() => cards().length === before + 1, 5000), 'the card arrived');
    const card = cards()[before]!['card'] as { id: string };
    gone.socket.destroy();
    t.ok(
      await eventually(() => admin.pushes.some((p) => p['push'] === 'withdrawn' && p['id'] === card.id), 5000),
      'the approver was told the card is withdrawn',
    );
    t.notOk(
      s.up.requests.some((q) => q.url === '/withdrawn'),
      'nothing was sent upstream',
    );
    t.ok(alive(), 'the daemon is running');
    const after = await normal('after-withdrawal');
    t.equal(after.status, 200, after.text);
  });

  // Sends `head` then `rest` one byte every 300 ms; resolves with what came
  // back and when the connection closed.
  const slowSender = (head: string, rest: string): Promise<{ data: string; ms: number }> =>
    new Promise((resolve) => {
      const started = Date.now();
      const sock = net.connect(s.sock);
      let data = '';
      let i = 0;
      let timer: NodeJS.Timeout | undefined;
      sock.on('connect', () => {
        sock.write(head);
        timer = setInterval(() => {
          if (i < rest.length && sock.writable) sock.write(rest[i++]!);
        }, 300);
      });
      sock.on('data', (d: Buffer) => (data += d.toString()));
      sock.on('error', () => undefined);
      sock.on('close', () => {
        clearInterval(timer);
        resolve({ data, ms: Date.now() - started });
      });
      // Long enough for 60 s of trickling: far beyond the 2 s limit.
      setTimeout(() => sock.destroy(), 15_000).unref();
    });

  const payload = JSON.stringify({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/slow-agent') });
  const slowCases: [string, string, string][] = [
    [
      'a body sent slower than agent_request_timeout',
      `POST /v1/http HTTP/1.1\r\nhost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n`,
      payload,
    ],
    [
      'headers sent slower than agent_request_timeout',
      'POST /v1/http HTTP/1.1\r\n',
      `host: postern\r\ncontent-type: application/json\r\nx-pad: ${'p'.repeat(60)}\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    ],
  ];
  for (const [what, head, rest] of slowCases) {
    await t.test(what, async (t) => {
      const slow = slowSender(head, rest);
      await new Promise((r) => setTimeout(r, 700));
      const during = await normal('during-slow-agent');
      t.equal(during.status, 200, during.text);
      t.ok(during.ms < 1500, `a request during the slow one took ${during.ms} ms`);
      const { data, ms } = await slow;
      t.ok(ms <= 4000, `the slow request ended after ${ms} ms (limit 2 s + 2 s)`);
      // A reply that says why, never a silent close.
      t.not(data, '', 'the daemon answered before closing');
      const [statusLine, ...restParts] = data.split('\r\n\r\n');
      t.match(statusLine, /^HTTP\/1\.1 400 /, 'a 400 reply');
      const body = JSON.parse(restParts.join('\r\n\r\n')) as ErrorBody;
      t.equal(body.error?.code, 'bad_request');
      t.match(body.error?.message, /agent_request_timeout/, 'the message names the setting');
      t.notOk(
        s.up.requests.some((q) => q.url === '/slow-agent'),
        'nothing was sent upstream',
      );
      t.ok(alive(), 'the daemon is running');
      const after = await normal('after-slow-agent');
      t.equal(after.status, 200, after.text);
    });
  }

  await t.test('a thousand idle connections: still serving, descriptors released', async (t) => {
    const FD_MARGIN = 8;
    const pid = s.d.proc.pid!;
    const before = fdCount(pid);
    const idle: net.Socket[] = [];
    // In batches of 100, below the listen backlog, so a burst is not
    // refused by the kernel before the daemon can accept it.
    const errors: string[] = [];
    for (let b = 0; b < 10; b++) {
      await Promise.all(
        Array.from(
          { length: 100 },
          () =>
            new Promise<void>((resolve) => {
              const c = net.connect(s.sock);
              c.on('connect', () => {
                idle.push(c);
                resolve();
              });
              c.on('error', (e: NodeJS.ErrnoException) => {
                errors.push(e.code ?? e.message);
                resolve();
              });
            }),
        ),
      );
    }
    t.equal(idle.length, 1000, `all thousand connections were accepted (errors: ${errors.join(', ')})`);
    // Other descriptors come and go meanwhile (kept-alive connections of the
    // requests before this one close on their own timers): a small margin.
    // A connect completes in the listen backlog before the daemon accepts
    // it; on a loaded machine accepting and identifying a thousand took
    // longer than 5 s (seen in CI beside other suites).
    t.ok(
      await eventually(() => fdCount(pid) >= before + 1000 - FD_MARGIN, 20_000),
      `the daemon holds them (before ${before}, now ${fdCount(pid)})`,
    );
    for (let i = 0; i < 3; i++) {
      const n = await normal(`among-idle-${i}`);
      t.equal(n.status, 200, n.text);
      t.ok(n.ms < 3000, `a request among idle connections took ${n.ms} ms`);
    }
    for (const c of idle) c.destroy();
    t.ok(
      await eventually(() => fdCount(pid) <= before + FD_MARGIN, 10_000),
      `descriptors return (before ${before}, after ${fdCount(pid)})`,
    );
    const after = await normal('after-idle');
    t.equal(after.status, 200, after.text);
  });

  await t.test('the journal verifies', async (t) => {
    t.ok(alive(), 'the daemon is running');
    const code = await s.d.stop();
    t.equal(code, 0, 'the daemon stops cleanly');
    const v = cli(s.h, ['audit', 'verify', '--json']);
    t.equal(v.code, 0, v.stdout + v.stderr);
  });
});
