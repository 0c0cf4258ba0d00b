// A hostile or clumsy client of the JSON agent socket, raw bytes: pipelining
// behind slow requests and approvals, waiting notices between answers,
// HTTP/1.0 keep-alive, chunked framing, an Expect other than 100-continue
// (Node's bare 417, not journaled) and a body cut by an invalid chunk size
// (journaled twice: for the connection and for the request it cut).
import t from 'tap';
import net from 'node:net';
import { startStack, auditList, type Stack } from '../helpers/stack';
import { errOf, exchange, messages, upstreamPath } from '../helpers/agent-exchange';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const HOST = 'api.example.test';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('JSON door: pipelining and framing', async (t) => {
  let approveDelay = 3000;
  const s: Stack = await startStack({
    config: 'agent_request_timeout = "2s"',
    handler: (req, body, res) => {
      const m = /\/slow(\d+)/.exec(req.url ?? '');
      const text = JSON.stringify({ method: req.method, url: req.url, body: body.toString('utf8').slice(0, 50) });
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
  const secret = makeCanary('PIPEPROBE');
  const def = (name: string, approve: string): string =>
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\napprove = "${approve}"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET", "POST"]\n`;
  s.addCredential('api', def('api', 'session'), secret);
  s.addCredential('each', def('each', 'each-use'), makeCanary('PIPEEACH'));
  const admin = await s.approver((card) => {
    if (card.credential === 'each') {
      setTimeout(() => void admin.request('approval.decide', { id: card.id, decision: 'once' }), approveDelay);
      return null;
    }
    return { decision: 'session', root_key: card.process.key };
  });
  const req = (path: string, o: { cred?: string; headers?: string; body?: string; version?: string } = {}): string => {
    const b = JSON.stringify({
      credential: o.cred ?? 'api',
      method: o.body !== undefined ? 'POST' : 'GET',
      url: s.url(HOST, path),
      ...(o.body !== undefined ? { body: o.body } : {}),
    });
    return `POST /v1/http HTTP/${o.version ?? '1.1'}\r\nHost: postern\r\ncontent-type: application/json\r\n${o.headers ?? ''}content-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
  };
  const seen = (path: string): number => s.up.requests.filter((q) => q.url === path).length;
  const warm = await s.request({ credential: 'api', method: 'GET', url: s.url(HOST, '/warm') });
  t.equal(warm.status, 200, 'warm-up');

  await t.test('Expect: other than 100-continue on POST /v1/http', async (t) => {
    const before = auditList(s).length;
    const { raw, closed } = await exchange(s.sock, [req('/expect-other', { headers: 'expect: x-fancy\r\n' })]);
    const { msgs } = messages(raw);
    t.comment(`raw: ${JSON.stringify(raw.toString('latin1').slice(0, 400))} closed ${closed}`);
    const entries = auditList(s).slice(before);
    t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code']]))}`);
    t.equal(msgs.length, 1, 'one answer');
    t.ok(errOf(msgs[0])?.code, 'answer is a postern refusal with a code');
    t.type(errOf(msgs[0])?.audit_seq, 'number', 'refusal carries audit_seq');
    t.ok(
      entries.some((e) => e['kind'] === 'agent_refused' || e['code'] !== undefined),
      'the refusal is journaled',
    );
    t.equal(seen('/expect-other'), 0, 'nothing sent upstream');
  });

  await t.test(
    'pipelined small request behind one waiting for approval longer than agent_request_timeout',
    async (t) => {
      approveDelay = 3000;
      const { raw } = await exchange(s.sock, [req('/appr-a', { cred: 'each' }) + req('/appr-b')], 6000, 20000);
      const { msgs } = messages(raw);
      t.comment(`answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? errOf(m)?.code}`).join(' | ')}`);
      t.same(
        msgs.map((m) => [m.status, upstreamPath(m)]),
        [
          [200, '/appr-a'],
          [200, '/appr-b'],
        ],
        'both answered 200, in order',
      );
      t.equal(seen('/appr-b'), 1, 'second sent upstream once');
    },
  );

  await t.test(
    'pipelined large-body request behind one waiting for approval longer than agent_request_timeout',
    async (t) => {
      approveDelay = 3000;
      const big = 'y'.repeat(60 * 1024);
      const { raw } = await exchange(
        s.sock,
        [req('/apprL-a', { cred: 'each' }) + req('/apprL-b', { body: big })],
        6000,
        20000,
      );
      const { msgs } = messages(raw);
      t.comment(
        `answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? JSON.stringify(errOf(m))}`).join(' | ')}`,
      );
      t.same(
        msgs.map((m) => [m.status, upstreamPath(m)]),
        [
          [200, '/apprL-a'],
          [200, '/apprL-b'],
        ],
        'both answered 200, in order',
      );
    },
  );

  await t.test('pipelined behind a slow upstream (longer than agent_request_timeout), large body', async (t) => {
    const big = 'z'.repeat(60 * 1024);
    const { raw } = await exchange(s.sock, [req('/slow3000') + req('/slowL-b', { body: big })], 6000, 20000);
    const { msgs } = messages(raw);
    t.comment(`answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? JSON.stringify(errOf(m))}`).join(' | ')}`);
    t.same(
      msgs.map((m) => [m.status, upstreamPath(m)]),
      [
        [200, '/slow3000'],
        [200, '/slowL-b'],
      ],
      'both answered 200, in order',
    );
  });

  await t.test('waiting-notice request (slow upstream, heartbeats) pipelined before a normal one', async (t) => {
    const { raw } = await exchange(
      s.sock,
      [req('/slow6000', { headers: 'postern-waiting-notice: 1\r\n' }) + req('/after-hb')],
      8000,
      20000,
    );
    const { msgs, rest } = messages(raw);
    t.comment(`sequence: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? ''}`).join(' | ')} rest ${rest.length}`);
    const finals = msgs.filter((m) => m.status >= 200);
    t.same(
      finals.map((m) => upstreamPath(m)),
      ['/slow6000', '/after-hb'],
      'two final answers in order',
    );
    const firstFinal = msgs.findIndex((m) => m.status >= 200);
    t.ok(
      msgs.slice(0, firstFinal).some((m) => m.status === 102),
      'a heartbeat came before the first answer',
    );
    t.equal(
      msgs.slice(firstFinal).filter((m) => m.status < 200).length,
      0,
      'no 1xx after the first final answer (the second did not ask)',
    );
    t.equal(rest.length, 0, 'nothing unparsed');
  });

  await t.test('normal slow request, then a waiting-notice request that is slow too', async (t) => {
    const { raw } = await exchange(
      s.sock,
      [req('/slow5500') + req('/slow5600', { headers: 'postern-waiting-notice: 1\r\n' })],
      7000,
      25000,
    );
    const { msgs, rest } = messages(raw);
    t.comment(`sequence: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? ''}`).join(' | ')}`);
    const idxA = msgs.findIndex((m) => upstreamPath(m) === '/slow5500');
    const idxB = msgs.findIndex((m) => upstreamPath(m) === '/slow5600');
    t.ok(idxA >= 0 && idxB > idxA, 'both answered in order');
    t.equal(msgs.slice(0, idxA).filter((m) => m.status < 200).length, 0, 'no 1xx before the first (it did not ask)');
    t.ok(
      msgs.slice(idxA + 1, idxB).some((m) => m.status === 102),
      'second got its heartbeat between',
    );
    t.equal(rest.length, 0, 'nothing unparsed');
  });

  await t.test('five pipelined, then half-close', async (t) => {
    const paths = ['/hc1', '/hc2', '/slow1000', '/hc4', '/hc5'];
    const { raw, closed } = await exchange(s.sock, [paths.map((p) => req(p)).join(''), 'end'], 3000, 20000);
    const { msgs } = messages(raw);
    t.comment(
      `answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? errOf(m)?.code}`).join(' | ')} closed ${closed}`,
    );
    const sentUp = paths.map(seen);
    t.comment(`upstream saw ${JSON.stringify(sentUp)}`);
    for (let i = 0; i < paths.length; i++) {
      t.ok(
        sentUp[i] === 0 || upstreamPath(msgs[i]) === paths[i],
        `${paths[i]}: executed ${sentUp[i]}x, answered ${upstreamPath(msgs[i])}`,
      );
    }
    // A client done sending is gone (agent-linger-backpressure): none is
    // sent, none answered.
    t.same(sentUp, [0, 0, 0, 0, 0], 'none sent');
    t.ok(closed, 'connection closed');
    t.comment(
      `journal tail: ${JSON.stringify(
        auditList(s)
          .slice(-6)
          .map((e) => [e['kind'], e['code'], e['endpoint']]),
      )}`,
    );
  });

  await t.test('HTTP/1.0 keep-alive, three pipelined', async (t) => {
    const ka = 'connection: keep-alive\r\n';
    const paths = ['/k10a', '/k10b', '/k10c'];
    const { raw, closed } = await exchange(
      s.sock,
      [
        req(paths[0]!, { version: '1.0', headers: ka }) +
          req(paths[1]!, { version: '1.0', headers: ka }) +
          req(paths[2]!, { version: '1.0' }),
      ],
      6000,
      15000,
    );
    const { msgs } = messages(raw);
    t.comment(
      `answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? errOf(m)?.code}`).join(' | ')} closed ${closed}`,
    );
    const sentUp = paths.map(seen);
    t.comment(`upstream saw ${JSON.stringify(sentUp)}`);
    for (let i = 0; i < paths.length; i++)
      t.ok(sentUp[i] === 0 || upstreamPath(msgs[i]) === paths[i], `${paths[i]} executed ${sentUp[i]}x and answered`);
    t.ok(closed, 'closed after the last (HTTP/1.0 without keep-alive)');
  });

  await t.test('chunked body with extensions and a trailer', async (t) => {
    const b = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, '/chunk-ext') });
    const h = Math.floor(b.length / 2);
    const wire =
      `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\ntrailer: x-t\r\n\r\n` +
      `${h.toString(16)};ext=1;q="a b"\r\n${b.slice(0, h)}\r\n${(b.length - h).toString(16)};e\r\n${b.slice(h)}\r\n0;last\r\nx-t: 1\r\n\r\n`;
    const { raw } = await exchange(s.sock, [wire]);
    const { msgs } = messages(raw);
    t.comment(`answers: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? JSON.stringify(errOf(m))}`).join(' | ')}`);
    t.equal(msgs[0]?.status, 200, 'answered 200');
    t.equal(seen('/chunk-ext'), 1, 'sent once');
  });

  await t.test('chunked body cut by an invalid chunk size', async (t) => {
    const before = auditList(s).length;
    const wire =
      `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n` +
      `5\r\n{"cre\r\nzz\r\n`;
    const { raw, closed } = await exchange(s.sock, [wire]);
    await sleep(500);
    const { msgs } = messages(raw);
    const entries = auditList(s).slice(before);
    t.comment(`raw ${JSON.stringify(raw.toString('latin1').slice(0, 300))} closed ${closed}`);
    t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code'], e['endpoint']]))}`);
    t.equal(msgs.length, 1, 'one answer');
    t.type(errOf(msgs[0])?.audit_seq, 'number', 'with audit_seq');
    t.equal(entries.filter((e) => e['kind'] === 'agent_refused').length, 1, 'one refusal journaled, not two');
    const errs = s.d
      .logs()
      .split('\n')
      .filter((l) => /agent_error|internal_error/.test(l));
    t.equal(errs.length, 0, 'no internal error in the log');
  });

  await t.test('Expect: 100-continue, body never sent', async (t) => {
    const b = '{"credential":"api","method":"GET","url":"x"}';
    const wire = `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\nexpect: 100-continue\r\ncontent-length: ${b.length}\r\n\r\n`;
    const { raw, closed, closedAt, started } = await exchange(s.sock, [wire], 12000, 15000);
    const { msgs } = messages(raw);
    t.comment(
      `sequence: ${msgs.map((m) => `${m.status}:${errOf(m)?.code ?? ''}`).join(' | ')} closed ${closed} after ${closedAt - started} ms`,
    );
    t.equal(msgs[0]?.status, 100, '100 Continue first');
    t.equal(msgs[1]?.status, 400, 'then a refusal');
    t.type(errOf(msgs[1])?.audit_seq, 'number', 'with audit_seq');
    t.ok(closed, 'connection closed');
  });

  await t.test('Expect: 100-continue pipelined behind a slow request, body sent after the 100', async (t) => {
    const b = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, '/after-100') });
    const c = net.connect(s.sock);
    let got = Buffer.alloc(0);
    let sentBody = false;
    await new Promise<void>((resolve) => {
      c.on('connect', () =>
        c.write(
          req('/slow2500') +
            `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\nexpect: 100-continue\r\ncontent-length: ${b.length}\r\n\r\n`,
        ),
      );
      c.on('data', (d: Buffer) => {
        got = Buffer.concat([got, d]);
        if (!sentBody && got.toString('latin1').includes('HTTP/1.1 100')) {
          sentBody = true;
          c.write(b);
        }
      });
      c.on('error', () => undefined);
      setTimeout(resolve, 9000);
    });
    c.destroy();
    const { msgs } = messages(got);
    t.comment(`sequence: ${msgs.map((m) => `${m.status}:${upstreamPath(m) ?? errOf(m)?.code ?? ''}`).join(' | ')}`);
    t.same(
      msgs.filter((m) => m.status >= 200).map((m) => [m.status, upstreamPath(m)]),
      [
        [200, '/slow2500'],
        [200, '/after-100'],
      ],
      'both answered',
    );
  });

  t.test('secret never in any answer or the log', async (t) => {
    t.same(exposures(s.d.logs(), secret), [], 'not in the log');
  });
});
