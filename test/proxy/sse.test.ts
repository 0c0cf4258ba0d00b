// Server-sent events through `postern run` (SPEC §11: responses are
// streamed): the upstream sends its first event, then waits until the
// client has it (curl -N under CMD writes a signal file on reading it)
// before sending the second. A proxy that held the body until its end would
// make the upstream give up waiting and say so in the second event.
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, sh } from '../helpers/proxy-stack';
import type { Handler } from '../helpers/https-upstream';

const WAIT_MS = 15_000;

function sseUpstream(signal: string): Handler {
  return async (_req, _body, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('event: message\ndata: one\n\n');
    const deadline = Date.now() + WAIT_MS;
    while (!existsSync(signal) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    res.end(existsSync(signal) ? 'event: message\ndata: two\n\n' : 'event: message\ndata: two-after-timeout\n\n');
  };
}

t.test('the first event reaches the client before the upstream sends the second', async (t) => {
  let signal = '';
  const s = await startProxyStack({ handler: (req, body, res) => sseUpstream(signal)(req, body, res) });
  t.teardown(() => s.close());
  signal = join(s.h.dir, 'got-one');
  const url = s.url('api.example.test', '/v1/stream');
  const r = await s.run(
    sh(
      `curl -sSN --max-time 30 -H "Authorization: Bearer $GH_TOKEN" ${url} | while IFS= read -r line; do printf '%s\\n' "$line"; if [ "$line" = "data: one" ]; then touch ${signal}; fi; done`,
    ),
  );
  t.equal(r.code, 0, 'CMD succeeded', { stderr: r.stderr });
  t.equal(
    r.stdout.toString(),
    'event: message\ndata: one\n\nevent: message\ndata: two\n\n',
    'both events arrived, the second only after the client had the first',
  );
  t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${s.secret}`, 'the upstream saw the real secret');
  t.same(await s.exposed(), []);
});
