// A hostile or clumsy client of the JSON agent socket, raw bytes: a client
// that half-closes after its request (it ran upstream, with its secret, and
// its answer was dropped; now it is not sent), Expect: 100-continue over the limit
// (a 100, then a timeout, instead of a 413 at once), lingering closes that a
// trickling client cannot hold open, a slow reader of a large answer with
// requests pipelined behind it.
import t from 'tap';
import net from 'node:net';
import { startStack, auditList, type Stack } from '../helpers/stack';
import { errOf, exchange, json, messages, upstreamPath } from '../helpers/agent-exchange';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const HOST = 'api.example.test';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('JSON door: half-close, linger, backpressure', async (t) => {
  const s: Stack = await startStack({
    config: 'agent_request_timeout = "2s"',
    httpConfig: 'max_request_body = "1KiB"',
    handler: (req, body, res) => {
      const m = /\/slow(\d+)/.exec(req.url ?? '');
      const big = /\/big/.test(req.url ?? '');
      const text = big
        ? JSON.stringify({ url: req.url, pad: 'p'.repeat(4 * 1024 * 1024) })
        : JSON.stringify({ method: req.method, url: req.url, body: body.toString('utf8').slice(0, 50) });
      setTimeout(
        () => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
          res.end(text);
        },
        m ? Number(m[1]) : 0,
      );
    },
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('LINGERPROBE');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET", "POST"]\n`,
    secret,
  );
  await s.approver();
  const req = (path: string, o: { headers?: string } = {}): string => {
    const b = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, path) });
    return `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\n${o.headers ?? ''}content-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
  };
  const seen = (path: string): number => s.up.requests.filter((q) => q.url === path).length;
  const warm = await s.request({ credential: 'api', method: 'GET', url: s.url(HOST, '/warm') });
  t.equal(warm.status, 200, 'warm-up');

  await t.test('one request then half-close (printf | nc -N)', async (t) => {
    const before = auditList(s).length;
    const { raw, closed } = await exchange(s.sock, [req('/hc-single'), 'end'], 3000, 10000);
    const { msgs } = messages(raw);
    await sleep(2500);
    const entries = auditList(s).slice(before);
    t.comment(
      `answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? errOf(m)?.code}`).join(' | ')} closed ${closed}`,
    );
    t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code'], e['endpoint']]))}`);
    t.comment(`upstream saw ${seen('/hc-single')}`);
    // The defect: it ran upstream, with the secret, and no answer came.
    t.ok(msgs[0]?.status === 200 || seen('/hc-single') === 0, 'never run upstream without its answer');
    // As HTTP servers do (Node's, nginx's 499), a client's end of sending
    // is its going away: the request not yet sent is not sent, and the
    // journal says why.
    t.equal(seen('/hc-single'), 0, 'not sent');
    t.notOk(
      entries.some((e) => e['kind'] === 'http_intent'),
      'no intent: nothing left the machine',
    );
    t.ok(
      entries.some(
        (e) => e['kind'] === 'http_refused' && e['code'] === 'bad_request' && e['withdrawn'] === 'by the requester',
      ),
      'journaled as refused, withdrawn by the requester',
    );
  });

  await t.test('health then half-close', async (t) => {
    const { raw } = await exchange(s.sock, ['GET /v1/health HTTP/1.1\r\nHost: postern\r\n\r\n', 'end'], 2000, 8000);
    const { msgs } = messages(raw);
    t.comment(`answers: ${msgs.map((m) => `${m.status}:${m.body}`).join(' | ')}`);
    t.equal(msgs[0]?.status, 200, 'answered');
  });

  await t.test('Expect: 100-continue with a declared body far over the limit', async (t) => {
    const wire = `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\nexpect: 100-continue\r\ncontent-length: 1000000000\r\n\r\n`;
    const { raw, closed } = await exchange(s.sock, [wire], 4000, 10000);
    const { msgs } = messages(raw);
    t.comment(`sequence: ${msgs.map((m) => `${m.status}:${errOf(m)?.code ?? ''}`).join(' | ')} closed ${closed}`);
    t.notOk(
      msgs.some((m) => m.status === 100),
      'not invited to send a body that will be refused',
    );
    t.comment('final: ' + String(msgs.find((m) => m.status >= 200)?.status));
  });

  await t.test('413, then the client trickles its body for ever', async (t) => {
    const c = net.connect({ path: s.sock, allowHalfOpen: true });
    let got = '';
    let closedAt = 0;
    const t0 = Date.now();
    c.on('data', (d: Buffer) => (got += d.toString('latin1')));
    c.on('error', () => undefined);
    c.on('close', () => (closedAt = Date.now()));
    await new Promise<void>((r) => c.on('connect', () => r()));
    c.write(
      `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
    );
    for (let i = 0; i < 100 && closedAt === 0; i++) {
      c.write(`400\r\n${'x'.repeat(0x400)}\r\n`);
      await sleep(5);
    }
    // keep trickling up to 14 s
    while (closedAt === 0 && Date.now() - t0 < 14000) {
      c.write('1\r\nx\r\n');
      await sleep(500);
    }
    c.destroy();
    t.comment(`got ${JSON.stringify(got.slice(0, 120))}; closed after ${closedAt ? closedAt - t0 : 'never'} ms`);
    t.ok(got.startsWith('HTTP/1.1 413'), '413');
    t.ok(closedAt > 0 && closedAt - t0 < 12000, 'the daemon closed within the linger bound');
  });

  await t.test('too slow body, then trickling for ever', async (t) => {
    const c = net.connect({ path: s.sock, allowHalfOpen: true });
    let got = '';
    let closedAt = 0;
    const t0 = Date.now();
    c.on('data', (d: Buffer) => (got += d.toString('latin1')));
    c.on('error', () => undefined);
    c.on('close', () => (closedAt = Date.now()));
    await new Promise<void>((r) => c.on('connect', () => r()));
    c.write(
      `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n`,
    );
    while (closedAt === 0 && Date.now() - t0 < 16000) {
      c.write('1\r\n \r\n');
      await sleep(300);
    }
    c.destroy();
    t.comment(`got ${JSON.stringify(got.slice(0, 120))}; closed after ${closedAt ? closedAt - t0 : 'never'} ms`);
    t.ok(got.startsWith('HTTP/1.1 400'), '400 too slow');
    t.ok(closedAt > 0 && closedAt - t0 < 14000, 'the daemon closed within request timeout + linger');
  });

  await t.test('slow reader of a large answer while a waiting-notice request is pipelined behind', async (t) => {
    const c = net.connect(s.sock);
    const chunks: Buffer[] = [];
    c.on('data', (d: Buffer) => chunks.push(d));
    c.on('error', () => undefined);
    await new Promise<void>((r) => c.on('connect', () => r()));
    c.pause();
    c.write(req('/big1') + req('/slow5500', { headers: 'postern-waiting-notice: 1\r\n' }) + req('/after-big'));
    await sleep(4000);
    c.resume();
    await sleep(10000);
    c.destroy();
    const { msgs, rest } = messages(Buffer.concat(chunks));
    t.comment(
      `sequence: ${msgs.map((m) => `${m.status}:${m.status >= 200 ? (json(m)['status'] ?? errOf(m)?.code) : ''}:${m.body.length}`).join(' | ')} rest ${rest.length}`,
    );
    const finals = msgs.filter((m) => m.status >= 200);
    t.equal(finals.length, 3, 'three answers');
    t.same(
      finals.map((m) => m.status),
      [200, 200, 200],
      'all 200',
    );
    const idx102 = msgs.findIndex((m) => m.status === 102);
    t.ok(idx102 === 1, 'the heartbeat sits between the first and second answers');
    t.equal(rest.length, 0, 'nothing unparsed');
    t.equal(seen('/after-big'), 1, 'third sent once');
  });

  await t.test('fifty pipelined in one write', async (t) => {
    const N = 50;
    const paths = Array.from({ length: N }, (_, i) => `/p50-${i}`);
    const { raw } = await exchange(s.sock, [paths.map((p) => req(p)).join('')], 3000, 30000);
    const { msgs } = messages(raw);
    t.same(
      msgs.map((m) => upstreamPath(m)),
      paths,
      `all ${N} answered in order (${msgs.length})`,
    );
    t.same(
      paths.map(seen),
      paths.map(() => 1),
      'each executed once',
    );
  });

  t.test('secret never in the log', async (t) => {
    t.same(exposures(s.d.logs(), secret), [], 'not in the log');
    const errs = s.d
      .logs()
      .split('\n')
      .filter((l) => /agent_error|internal_error|"level":50|stack/.test(l));
    t.comment(errs.slice(0, 3).join('\n').slice(0, 600));
    t.equal(errs.length, 0, 'no error in the log');
  });
});
