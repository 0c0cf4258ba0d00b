// The stop's drain (daemon/main.ts stop, InFlight.settled):
// SIGTERM with requests in several states at once. Each must be answered
// with a code, the daemon must exit 0 within ~6 s, the journal verify.
import t from 'tap';
import net from 'node:net';
import { openRequest } from '../helpers/postern';
import { httpDef, manualApprover, startStack, verify } from '../helpers/lifecycle';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const statusOf = (raw: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
const codeOf = (raw: string): string | null => /"code":"([a-z_]+)"/.exec(raw)?.[1] ?? null;

t.test('SIGTERM with requests waiting for approval, DNS, the upstream, its body, a body, and idle', async (t) => {
  const hung: import('node:http').ServerResponse[] = [];
  const s = await startStack({
    names: ['api.example.test', 'dead.example.test'],
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'dead.example.test': { A: ['127.0.0.1'], delayMs: 60_000 },
    },
    handler: (req, _body, res) => {
      if ((req.url ?? '').startsWith('/hang')) {
        hung.push(res); // never answered
        return;
      }
      if ((req.url ?? '').startsWith('/half')) {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100000' });
        res.write('x'.repeat(1000));
        hung.push(res); // the rest never comes
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    },
  });
  t.teardown(async () => {
    for (const r of hung) r.destroy();
    await s.close();
  });
  const m = await manualApprover(s);
  s.addCredential('card', httpDef('card', s.up.port, { approve: 'each-use' }), 'card-secret-0123456789abcdef');
  s.addCredential('dns', httpDef('dns', s.up.port, { host: 'dead.example.test' }), 'dns-secret-0123456789abcdef');
  s.addCredential('up', httpDef('up', s.up.port), 'up-secret-0123456789abcdef');

  // the upstream one: approved with a session first
  const c0 = m.cards.length;
  const up = openRequest(s.sock, { credential: 'up', method: 'GET', url: s.url('api.example.test', '/hang') });
  await m.decide((await m.nextCard(c0))!, 'session');
  for (let i = 0; i < 250 && hung.length < 1; i++) await sleep(20);
  t.equal(hung.length, 1, 'one request is waiting for its upstream');
  const half = openRequest(s.sock, { credential: 'up', method: 'GET', url: s.url('api.example.test', '/half') });
  for (let i = 0; i < 250 && hung.length < 2; i++) await sleep(20);
  t.equal(hung.length, 2, 'one request has half its body');

  const c1 = m.cards.length;
  const card = openRequest(s.sock, { credential: 'card', method: 'GET', url: s.url('api.example.test', '/c') });
  t.ok(await m.nextCard(c1), 'one request is waiting for a human');

  const dns = openRequest(s.sock, { credential: 'dns', method: 'GET', url: s.url('dead.example.test', '/d') });
  await sleep(300);

  // a request whose head arrived and whose body is still coming
  const body = JSON.stringify({ credential: 'up', method: 'GET', url: s.url('api.example.test', '/b') });
  const slow = net.connect(s.sock);
  let slowData = '';
  slow.on('data', (d: Buffer) => (slowData += d.toString()));
  slow.on('error', () => undefined);
  const slowClosed = new Promise<void>((r) => slow.on('close', () => r()));
  slow.write(
    `POST /v1/http HTTP/1.1\r\nhost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
  );
  // an idle keep-alive connection
  const idle = net.connect(s.sock);
  idle.on('error', () => undefined);
  const idleClosed = new Promise<void>((r) => idle.on('close', () => r()));
  await sleep(300);

  const started = Date.now();
  s.d.proc.kill('SIGTERM');
  const exit = await Promise.race([s.d.exited, sleep(15_000).then(() => 'hung' as const)]);
  const took = Date.now() - started;
  t.equal(exit, 0, 'exit 0');
  t.ok(took <= 6000, `exited within 6 s (took ${took} ms)`);

  const within = <T>(p: Promise<T>) => Promise.race([p, sleep(3000).then(() => null)]);
  const rCard = await within(card.reply);
  const rDns = await within(dns.reply);
  const rUp = await within(up.reply);
  t.equal(statusOf(rCard ?? ''), 423, `waiting for approval: 423 (${(rCard ?? '').slice(0, 200)})`);
  t.equal(codeOf(rCard ?? ''), 'vault_locked');
  t.equal(statusOf(rDns ?? ''), 423, `waiting for DNS: 423 (${JSON.stringify((rDns ?? '').slice(0, 200))})`);
  t.equal(codeOf(rDns ?? ''), 'vault_locked');
  t.equal(statusOf(rUp ?? ''), 423, `waiting for the upstream: 423 (${(rUp ?? '').slice(0, 300)})`);
  t.equal(codeOf(rUp ?? ''), 'vault_locked');
  t.match(rUp ?? '', /"maybe_executed":true/, 'the upstream one may have run');
  const rHalf = await within(half.reply);
  t.equal(statusOf(rHalf ?? ''), 423, `half its body read: 423 (${(rHalf ?? '').slice(0, 300)})`);
  t.equal(codeOf(rHalf ?? ''), 'vault_locked');
  t.match(rHalf ?? '', /"maybe_executed":true/, 'it ran');
  await within(slowClosed);
  t.not(
    statusOf(slowData),
    0,
    `a request whose body was coming got an answer (${JSON.stringify(slowData.slice(0, 200))})`,
  );
  t.ok(await within(idleClosed.then(() => true)), 'the idle connection was closed');
  const v = verify(s);
  t.equal(v.code, 0, v.stdout + v.stderr);
  t.notMatch(s.d.logs(), /"level":(50|60)/, 'no error in the daemon log');
});
