// While a request waits for a human, `postern request` on a terminal says so
// on stderr: the approval's id and when it expires (SPEC §5); on a pipe it
// says nothing of it. The CLI learns it from the agent socket's waiting
// notice: an informational `102 Processing` carrying the card's id and
// expiry, and a second one once a human approved it, sent only to a requester that asks for it with the request header
// (shared/protocol.ts WAITING_NOTICE), never to one that does not (some
// clients take any 1xx but 100 for the final answer). Real daemon, real
// HTTPS upstream, a real terminal (tmux); Ctrl-C while waiting withdraws
// the card.
import t from 'tap';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, Stack, Card } from '../helpers/stack';
import { CLI, agentRequest, cliAsync, eventually } from '../helpers/postern';
import { Tmux } from '../helpers/tmux';
import { findCanary, makeCanary } from '../helpers/canary';
import { WAITING_NOTICE } from '../../shared/protocol';

const BODY = 'the answer, once approved';

// A card as the approver receives it, with its expiry.
type HeldCard = Card & { expires_at: string };

function credential(port: number): string {
  return `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;
}

// The raw bytes of one request on the agent socket, until the daemon closes.
function rawRequest(sock: string, body: unknown, extraHeaders: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(sock);
    const payload = JSON.stringify(body);
    let data = '';
    s.on('connect', () =>
      s.write(
        `POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\n${extraHeaders}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      ),
    );
    s.on('data', (d: Buffer) => (data += d.toString()));
    s.on('error', reject);
    s.on('close', () => resolve(data));
  });
}

t.test('the waiting line', async (t) => {
  const s: Stack = await startStack({
    handler: (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(BODY);
    },
    config: 'approval_timeout = "2m"',
  });
  t.teardown(() => s.close());
  const secret = makeCanary('REQWAIT');
  s.addCredential('api', credential(s.up.port), secret);
  // Cards are held until the test decides them.
  const held: HeldCard[] = [];
  const admin = await s.approver((card) => {
    held.push(card as HeldCard);
    return null;
  });
  const decide = async (card: Card): Promise<void> => {
    const r = await admin.request('approval.decide', { id: card.id, decision: 'once' });
    if (r['ok'] !== true) throw new Error(`decide: ${JSON.stringify(r)}`);
  };
  const nextCard = async (count: number): Promise<HeldCard> => {
    if (!(await eventually(() => held.length >= count, 20_000))) throw new Error('no card came');
    return held[count - 1]!;
  };
  const url = s.url('api.example.test', '/v1/thing');
  const printed: string[] = [];

  await t.test('on a terminal: the id and the expiry, then the answer', async (t) => {
    const out = join(s.h.dir, 'body.out');
    const tm = Tmux.start([process.execPath, CLI, 'request', 'http', '--credential', 'api', '--url', url, '-o', out], {
      env: s.h.env,
      width: 200,
      height: 20,
    });
    t.teardown(() => tm.kill());
    const card = await nextCard(1);
    const expires = `${card.expires_at.slice(0, 19).replace('T', ' ')} UTC`;
    const screen = await tm.waitFor(/waiting for approval/, 20_000);
    printed.push(screen);
    t.match(
      screen,
      new RegExp(
        `^postern: waiting for approval of request ${card.id} at \`postern approver\`; it expires at ${expires} \\(in 1[12]\\d s\\)$`,
        'm',
      ),
      `the card's id and expiry:\n${screen}`,
    );
    await decide(card);
    t.equal(await tm.waitExit(20_000), 0, 'exit 0 once approved');
    const after = tm.screen();
    printed.push(after);
    t.match(after, new RegExp(`^postern: request ${card.id} approved; sending it$`, 'm'), 'then that it was approved');
    t.match(after, /^postern: status 200 from api\.example\.test /m, 'then the status line');
    t.equal(readFileSync(out, 'utf8'), BODY, 'the body in the file');
  });

  await t.test('on a pipe: nothing about waiting', async (t) => {
    const pending = cliAsync(s.h, ['request', 'http', '--credential', 'api', '--url', url]);
    await decide(await nextCard(2));
    const r = await pending;
    printed.push(r.stdout, r.stderr);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, BODY);
    t.match(r.stderr, /^postern: status 200 from [^\n]*\n$/, 'only the status line');
  });

  await t.test('the notice on the socket: only when asked for', async (t) => {
    const body = { credential: 'api', method: 'GET', url };
    const asked = rawRequest(s.sock, body, `${WAITING_NOTICE.ask}: 1\r\n`);
    const card = await nextCard(3);
    await decide(card);
    const raw = await asked;
    printed.push(raw);
    t.ok(
      raw.startsWith(
        `HTTP/1.1 102 Processing\r\n${WAITING_NOTICE.id}: ${card.id}\r\n${WAITING_NOTICE.expires}: ${card.expires_at}\r\n\r\n` +
          `HTTP/1.1 102 Processing\r\n${WAITING_NOTICE.id}: ${card.id}\r\n${WAITING_NOTICE.expires}: ${card.expires_at}\r\n${WAITING_NOTICE.decision}: approved\r\n\r\n` +
          `HTTP/1.1 200 OK\r\n`,
      ),
      `102 with the card, another once approved, then the answer:\n${raw.slice(0, 500)}`,
    );
    const plain = agentRequest(s.sock, 'POST', '/v1/http', body);
    await decide(await nextCard(4));
    const r = await plain;
    printed.push(r.text);
    t.equal(r.status, 200, 'not asked: the first response is the final one');
    t.match(r.json, { status: 200, body: BODY });
  });

  await t.test('Ctrl-C while waiting: the card withdrawn', async (t) => {
    const tm = Tmux.start([process.execPath, CLI, 'request', 'http', '--credential', 'api', '--url', url], {
      env: s.h.env,
      width: 200,
      height: 20,
    });
    t.teardown(() => tm.kill());
    const card = await nextCard(5);
    await tm.waitFor(new RegExp(`waiting for approval of request ${card.id}`), 20_000);
    tm.send('C-c');
    t.ok(
      await eventually(() => admin.pushes.some((p) => p['push'] === 'withdrawn' && p['id'] === card.id), 10_000),
      'the approver sees the card withdrawn',
    );
    // SIGINT ends the process as it ends any. The pane's wrapping shell gets
    // it too: it either dies of it as well (the pane says signal 2) or, when
    // its wait returns first, records the status, 130, as a shell reports it.
    let screen = '';
    t.ok(
      await eventually(() => {
        screen = tm.screen();
        // The shell died of it too when it left no status; a shell that
        // outlived the command recorded 130.
        return (
          /Pane is dead \(signal 2\b/.test(screen) || (tm.dead() && tm.exitStatus() === null) || tm.exitStatus() === 130
        );
      }, 20_000),
      `ended by SIGINT (status ${String(tm.exitStatus())}): ${screen}`,
    );
    printed.push(screen);
    t.notMatch(screen, /^\s+at |Error/m, 'no stack trace');
  });

  t.same(findCanary(printed.join('\n'), secret), [], 'the secret in nothing printed');
});
