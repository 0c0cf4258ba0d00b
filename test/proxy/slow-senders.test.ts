// daemon.agent_request_timeout ("an agent must send a whole request
// (headers and body) within this; slower ones are refused") for requests
// inside a terminated CONNECT tunnel, as on the agent socket: a client that
// declares a body and stops, or stops mid-head, gets postern's 400
// bad_request within the timeout, and the daemon keeps serving. The inner
// HTTP server is handed its connections (never listens), so Node's own
// header and request timeouts never ran: both went unanswered before.
import t from 'tap';
import { startProxyStack } from '../helpers/proxy-stack';
import { parseRaw, sendRaw } from '../helpers/proxy-raw-client';
import { exposures } from '../helpers/exposure';

t.test('slow senders inside a tunnel meet agent_request_timeout', async (t) => {
  const s = await startProxyStack({ config: 'agent_request_timeout = "2s"' });
  t.teardown(() => s.close());
  const HOST = 'api.example.test';
  const P = s.up.port;
  const started = Date.now();
  const run = await sendRaw(s.h, [
    {
      id: 1,
      connect: `${HOST}:${P}`,
      head: `POST /slow HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:GH_TOKEN@@\r\nContent-Length: 10\r\n\r\n`,
      body: Buffer.from('abc').toString('base64'),
    },
    { id: 2, connect: `${HOST}:${P}`, head: `GET /half HTTP/1.1\r\nHost: ${HOST}:${P}\r\nX-Partial: ` },
    { id: 3, connect: `${HOST}:${P}`, head: `GET /after HTTP/1.1\r\nHost: ${HOST}:${P}\r\n\r\n` },
  ]);
  const took = Date.now() - started;
  for (const id of [1, 2]) {
    const a = run.answers.get(id);
    t.not(
      a?.error,
      'timeout',
      `request ${id}: answered before the client gave up after 15 s (${JSON.stringify(a).slice(0, 300)})`,
    );
    const raw = Buffer.from(a?.raw ?? '', 'base64');
    const p = raw.length ? parseRaw(raw) : null;
    t.equal(p?.status, 400, `request ${id}: 400 (${p?.head ?? 'nothing'})`);
    t.equal(p?.headers['x-postern-error'], 'bad_request', `request ${id}: x-postern-error`);
  }
  const after = parseRaw(Buffer.from(run.answers.get(3)?.raw ?? '', 'base64'));
  t.equal(after.status, 200, 'the daemon still serves');
  t.ok(took < 20_000, `took ${took} ms`);
  t.equal(s.up.requests.filter((q) => q.url === '/slow').length, 0, 'the body never completed: nothing sent');
  t.same(exposures(run.stdout, s.secret), []);
});
