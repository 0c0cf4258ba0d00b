// Framing and pipelining on the JSON agent socket itself (SPEC §6, §6.3, §11):
// framing confusion, pipelining and keep-alive after a refusal, written raw
// by the test process (an allowed peer) on agent.sock.
// Found and fixed with these rows: malformed HTTP (content-length beside
// transfer-encoding, bare LF, obs-fold) was answered 400 without a journal
// entry, audit_seq or x-postern-error; no `host` got Node's bare 400.
import t, { type Test } from 'tap';
import net from 'node:net';
import { startStack } from '../helpers/stack';
import { startRawOrigin, rawResponse } from '../helpers/raw-origin';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseResponses, type Resp } from '../helpers/proxy-sequence-client';

const HOST = 'api.example.test';
const PLAINH = 'plain.example.test';

// `wire` in one write; every byte until the daemon closes or `idle` ms pass
// without more.
function exchange(sock: string, wire: string, idle = 1500): Promise<{ raw: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const got: Buffer[] = [];
    let timer: NodeJS.Timeout | null = null;
    let done = false;
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      c.destroy();
      resolve({ raw: Buffer.concat(got), closed });
    };
    const poke = (): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => finish(false), idle);
    };
    c.on('connect', () => {
      c.write(Buffer.from(wire, 'latin1'));
      poke();
    });
    c.on('data', (d: Buffer) => {
      got.push(d);
      poke();
    });
    c.on('error', () => finish(true));
    c.on('close', () => finish(true));
  });
}

function errorOf(r: Resp | undefined): { code?: string; audit_seq?: unknown } | undefined {
  try {
    return (JSON.parse(r?.body ?? '') as { error: { code?: string; audit_seq?: unknown } }).error;
  } catch {
    return undefined;
  }
}

t.test('framing and pipelining on the agent socket', async (t) => {
  const s = await startStack({ records: { [HOST]: { A: ['127.0.0.1'] }, [PLAINH]: { A: ['127.0.0.1'] } } });
  t.teardown(() => s.close());
  const plain = await startRawOrigin({ honourClose: true }, () => ({
    read: 'declared',
    respond: (q) => {
      const body = `seen:${q.method} ${q.target}`;
      return rawResponse(200, [['content-length', String(body.length)]], body);
    },
  }));
  t.teardown(() => plain.close());
  const secret = makeCanary('AGENTSMUG');
  const P = s.up.port;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET", "POST"]\n`,
    secret,
  );
  s.addCredential(
    'plain',
    `name = "plain"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${PLAINH}"\nschemes = ["http"]\nports = [${plain.port}]\n`,
    makeCanary('AGENTPLAIN'),
  );
  await s.approver();
  const received: Buffer[] = [];
  const go = async (wire: string): Promise<{ r: Resp[]; closed: boolean; raw: Buffer }> => {
    const { raw, closed } = await exchange(s.sock, wire);
    received.push(raw);
    return { r: parseResponses(raw).responses, closed, raw };
  };
  const httpBody = (path: string): string =>
    JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, path) });
  const postHttp = (path: string, extra = ''): string => {
    const b = httpBody(path);
    return `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
  };
  const refusal = (t: Test, x: Resp | undefined, what: string, proxy = false): void => {
    t.equal(x?.status, 400, `${what}: ${x?.head?.split('\r\n')[0]} ${x?.body.slice(0, 200)}`);
    const e = errorOf(x);
    t.equal(e?.code, 'bad_request', `${what}: the §6.3 JSON code`);
    t.type(e?.audit_seq, 'number', `${what}: journaled, audit_seq in the §6.3 JSON`);
    if (proxy) t.equal(x?.headers['x-postern-error'], 'bad_request', `${what}: x-postern-error (§11)`);
  };

  await t.test('Content-Length beside Transfer-Encoding on POST /v1/http', async (t) => {
    const b = httpBody('/agent-clte');
    const { r } = await go(
      `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-length: ${b.length}\r\ntransfer-encoding: chunked\r\n\r\n${b.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`,
    );
    refusal(t, r[0], 'CL+TE');
    t.equal(s.up.requests.filter((q) => q.url === '/agent-clte').length, 0, 'nothing sent');
  });

  await t.test('a request without Host', async (t) => {
    const { r } = await go('GET /v1/health HTTP/1.1\r\n\r\n');
    refusal(t, r[0], 'no Host');
  });

  await t.test('bare LF line endings', async (t) => {
    const { r } = await go('GET /v1/health HTTP/1.1\nHost: postern\n\n');
    refusal(t, r[0], 'bare LF');
  });

  await t.test('a refused request whose body is a request: keep-alive stays in step', async (t) => {
    const inner = 'GET /v1/health HTTP/1.1\r\nHost: postern\r\n\r\n';
    const { r } = await go(
      `POST /v1/nope HTTP/1.1\r\nHost: postern\r\ncontent-length: ${inner.length}\r\n\r\n${inner}GET /v1/credentials HTTP/1.1\r\nHost: postern\r\n\r\n`,
    );
    t.equal(r.length, 2, `two answers: ${r.map((x) => x.status).join(',')}`);
    t.equal(r[0]?.status, 400);
    t.equal(r[1]?.status, 200);
    t.match(r[1]?.body, /"credentials"/, 'the second answer is the credentials list, not a health reply');
  });

  await t.test('an Upgrade request, then another request in the same write', async (t) => {
    const { r, closed } = await go(
      'GET /v1/health HTTP/1.1\r\nHost: postern\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nGET /v1/credentials HTTP/1.1\r\nHost: postern\r\n\r\n',
    );
    t.comment(`answers ${r.map((x) => x.status).join(',')}, closed ${closed}`);
    t.ok(r.length === 2 || (r.length === 1 && closed), 'both answered, or the connection closed (never a silent hang)');
  });

  await t.test('Connection: close, then a second POST /v1/http in the same write', async (t) => {
    const { r, closed } = await go(
      postHttp('/agent-close-first', 'connection: close\r\n') + postHttp('/agent-close-second'),
    );
    t.equal(r[0]?.status, 200, 'the first answered');
    const sent = s.up.requests.filter((q) => q.url === '/agent-close-second').length;
    t.ok(
      sent === 0 || r.length === 2,
      `the second reached the upstream ${sent} time(s); answers ${r.length}, closed ${closed}`,
    );
  });

  await t.test('HTTP/1.0, then a second POST /v1/http in the same write', async (t) => {
    const b = httpBody('/agent-10-first');
    const { r, closed } = await go(
      `POST /v1/http HTTP/1.0\r\nHost: postern\r\ncontent-length: ${b.length}\r\n\r\n${b}` +
        postHttp('/agent-10-second'),
    );
    t.equal(r[0]?.status, 200, 'the first answered');
    const sent = s.up.requests.filter((q) => q.url === '/agent-10-second').length;
    t.ok(
      sent === 0 || r.length === 2,
      `the second reached the upstream ${sent} time(s); answers ${r.length}, closed ${closed}`,
    );
  });

  await t.test('absolute-form: Host naming another host', async (t) => {
    const { r } = await go(
      `GET http://${PLAINH}:${plain.port}/agent-abs-host HTTP/1.1\r\nHost: ${HOST}:${plain.port}\r\n\r\n`,
    );
    refusal(t, r[0], 'absolute-form Host mismatch', true);
    t.equal(plain.requests.length, 0);
  });

  await t.test('absolute-form: no Host', async (t) => {
    const { r } = await go(`GET http://${PLAINH}:${plain.port}/agent-abs-nohost HTTP/1.1\r\n\r\n`);
    refusal(t, r[0], 'absolute-form without Host', true);
    t.equal(plain.requests.length, 0);
  });

  await t.test('absolute-form: obs-fold', async (t) => {
    const { r } = await go(
      `GET http://${PLAINH}:${plain.port}/agent-abs-fold HTTP/1.1\r\nHost: ${PLAINH}:${plain.port}\r\nX-A: 1\r\n 2\r\n\r\n`,
    );
    refusal(t, r[0], 'absolute-form obs-fold', true);
    t.equal(plain.requests.length, 0);
  });

  await t.test('absolute-form: Content-Length beside Transfer-Encoding', async (t) => {
    const { r } = await go(
      `POST http://${PLAINH}:${plain.port}/agent-abs-clte HTTP/1.1\r\nHost: ${PLAINH}:${plain.port}\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
    );
    refusal(t, r[0], 'absolute-form CL+TE', true);
    t.equal(plain.requests.length, 0);
  });

  await t.test('absolute-form: Transfer-Encoding gzip, chunked', async (t) => {
    const { r } = await go(
      `POST http://${PLAINH}:${plain.port}/agent-abs-gzip HTTP/1.1\r\nHost: ${PLAINH}:${plain.port}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
    );
    t.comment(
      `${r[0]?.status} ${r[0]?.body}; origin saw ${JSON.stringify(plain.requests.map((q) => [q.target, q.body.toString('latin1'), q.headers]))}`,
    );
    refusal(t, r[0], 'absolute-form gzip transfer coding', true);
  });

  await s.d.stop();
  received.forEach((b, i) => t.same(exposures(b, secret), [], `no form of the secret in answer ${i}`));
  t.same(exposures(s.d.logs(), secret), [], 'not in the log');
  t.same(exposures(await journalText(s.h), secret), [], 'not in the journal');
});
