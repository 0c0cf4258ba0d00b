// The JSON front door runs a pipelined request only in its turn and only if
// its answer can be delivered: behind a refusal that closes the connection
// (body_too_large, a body too slow), a second POST /v1/http in the same
// write was run upstream and never answered.
import t from 'tap';
import net from 'node:net';
import { startStack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { parseResponses } from '../helpers/proxy-sequence-client';

const HOST = 'api.example.test';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('JSON door: pipelined request behind a closing refusal', async (t) => {
  const s = await startStack({
    config: 'agent_request_timeout = "1s"',
    httpConfig: 'max_request_body = "1KiB"',
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET", "POST"]\n`,
    makeCanary('LINGER'),
  );
  await s.approver();
  const postHttp = (path: string): string => {
    const b = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, path) });
    return `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
  };
  // warm: one ordinary request so a session exists
  const warm = await s.request({ credential: 'api', method: 'GET', url: s.url(HOST, '/warm') });
  t.equal(warm.status, 200, 'warm-up answered');

  const run = (steps: (c: net.Socket) => Promise<void>): Promise<{ raw: Buffer; closed: boolean }> =>
    new Promise((resolve) => {
      const c = net.connect(s.sock);
      const got: Buffer[] = [];
      let closed = false;
      c.on('data', (d: Buffer) => got.push(d));
      c.on('error', () => undefined);
      c.on('close', () => (closed = true));
      c.on('connect', () => {
        void steps(c).then(async () => {
          await sleep(2500);
          const r = { raw: Buffer.concat(got), closed };
          c.destroy();
          resolve(r);
        });
      });
    });

  await t.test('body too slow, then rest of body + a second request in one write', async (t) => {
    const body = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, '/slow-first') });
    const head = `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const half = Math.floor(body.length / 2);
    const { raw, closed } = await run(async (c) => {
      c.write(head + body.slice(0, half));
      await sleep(1800); // past agent_request_timeout: the refusal comes, connection: close
      c.write(body.slice(half) + postHttp('/slow-second'));
    });
    const r = parseResponses(raw).responses;
    t.comment(`answers: ${r.map((x) => x.status).join(',')}; closed ${closed}`);
    const sent = s.up.requests.filter((q) => q.url === '/slow-second').length;
    t.equal(
      sent === 0 || r.length === 2,
      true,
      `second reached the upstream ${sent} time(s) with ${r.length} answer(s)`,
    );
  });

  await t.test('body too large, body + a second request in one write', async (t) => {
    const big = 'x'.repeat(80 * 1024); // > 6 * 1KiB + 64KiB
    const { raw, closed } = await run(async (c) => {
      c.write(
        `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${big.length}\r\n\r\n${big}` +
          postHttp('/large-second'),
      );
    });
    const r = parseResponses(raw).responses;
    t.comment(`answers: ${r.map((x) => x.status).join(',')}; closed ${closed}`);
    const sent = s.up.requests.filter((q) => q.url === '/large-second').length;
    t.equal(
      sent === 0 || r.length === 2,
      true,
      `second reached the upstream ${sent} time(s) with ${r.length} answer(s)`,
    );
  });
  await t.test('body too large: 413 read first, then the rest of the body + a second request', async (t) => {
    const total = 100 * 1024;
    const first = 'x'.repeat(80 * 1024);
    const rest = 'x'.repeat(total - first.length);
    const { raw, closed } = await run(async (c) => {
      c.write(
        `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${total}\r\n\r\n${first}`,
      );
      await sleep(800); // the 413 (connection: close) has come; the daemon lingers
      c.write(rest + postHttp('/linger-second'));
    });
    const r = parseResponses(raw).responses;
    t.comment(`answers: ${r.map((x) => x.status).join(',')}; closed ${closed}`);
    const sent = s.up.requests.filter((q) => q.url === '/linger-second').length;
    t.equal(
      sent === 0 || r.length === 2,
      true,
      `second reached the upstream ${sent} time(s) with ${r.length} answer(s)`,
    );
  });
});
