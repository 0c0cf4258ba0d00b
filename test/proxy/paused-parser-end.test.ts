// The daemon exited with an uncaught `AssertionError: assert(!this.paused)`
// from undici's Parser.finish / onHttpSocketEnd (undici 7; nodejs/undici#5360:
// the upstream connection ends while the HTTP/1 parser is paused by the body's
// backpressure): a 2 MiB answer with `connection: close` to a client reading
// through the proxy, or 128 KiB echoes, ended it on every try. Each upstream
// socket now passes its end on once the parser runs again
// (daemon/stores/parser-end-guard.ts): the answers arrive whole, and the
// daemon serves on.
import t from 'tap';
import { startProxyStack } from '../helpers/proxy-stack';
import { agentRequest } from '../helpers/postern';
import { parseRaw, sendRaw } from '../helpers/proxy-raw-client';

t.test('a large answer followed by FIN does not stop the daemon', async (t) => {
  const big = Buffer.alloc(2 * 1024 * 1024, 0x61);
  const s = await startProxyStack({
    handler: (_req, _body, res) => {
      // A whole, correctly framed answer, then the connection closed.
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': big.length,
        connection: 'close',
      });
      res.end(big);
    },
  });
  t.teardown(() => s.close());
  const HOST = 'api.example.test';
  const P = s.up.port;
  const req = (id: number) => ({
    id,
    connect: `${HOST}:${P}`,
    head: `GET /big HTTP/1.1\r\nHost: ${HOST}:${P}\r\n\r\n`,
  });
  const run = await sendRaw(s.h, [req(1), req(2), req(3)]);
  for (const [id, a] of run.answers) {
    const p = parseRaw(Buffer.from(a.raw ?? '', 'base64'));
    t.equal(p.status, 200, `request ${id}: answered`);
    t.equal(p.bodyBytes.length, big.length, `request ${id}: the whole body`);
  }
  const after = await agentRequest(s.sock, 'GET', '/v1/health').catch((e: unknown) => ({ status: String(e) }));
  const died = s.d.proc.exitCode !== null;
  const log = s.d.logs();
  const at = log.indexOf('AssertionError');
  if (at >= 0)
    t.comment(
      log
        .slice(at, at + 400)
        .split('\n')
        .join('\n# '),
    );
  t.notOk(died, `the daemon is still running (exit code ${s.d.proc.exitCode})`);
  t.equal(after.status, 200, 'the daemon still answers GET /v1/health');
});

t.test('echoing 128 KiB POST bodies through the proxy does not stop the daemon', async (t) => {
  const s = await startProxyStack(); // the helpers' echo upstream
  t.teardown(() => s.close());
  const HOST = 'api.example.test';
  const P = s.up.port;
  const body = 'abcdefgh'.repeat(16 * 1024);
  const req = (id: number) => ({
    id,
    connect: `${HOST}:${P}`,
    head: `POST /echo HTTP/1.1\r\nHost: ${HOST}:${P}\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  });
  const run = await sendRaw(s.h, [req(1), req(2), req(3), req(4)]);
  for (const [id, a] of run.answers) {
    const p = parseRaw(Buffer.from(a.raw ?? '', 'base64'));
    t.equal(p.status, 200, `request ${id}: answered (${a.error ?? ''})`);
    t.ok(p.body.length >= body.length, `request ${id}: the whole echo (${p.body.length} bytes)`);
  }
  const after = await agentRequest(s.sock, 'GET', '/v1/health').catch((e: unknown) => ({ status: String(e) }));
  const log = s.d.logs();
  const at = log.indexOf('AssertionError');
  if (at >= 0)
    t.comment(
      log
        .slice(at, at + 400)
        .split('\n')
        .join('\n# '),
    );
  t.equal(s.d.proc.exitCode, null, 'the daemon is still running');
  t.equal(after.status, 200, 'the daemon still answers GET /v1/health');
});
