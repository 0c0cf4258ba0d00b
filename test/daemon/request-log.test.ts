// The daemon's log holds one line per request at `info` (the outcome, with
// what its intent said: credential, method, host, path, requester) and the
// intent on a line of its own only at `debug`. A request refused after its
// intent and an upstream failure are one line each too. The secret is in
// no line.
import t, { Test } from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { findCanary, makeCanary } from '../helpers/canary';

type Line = Record<string, unknown>;

function jsonLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}

async function stackAt(t: Test, level: string, secret: string): Promise<Stack> {
  const s = await startStack({
    config: `log_format = "json"\nlog_level = "${level}"`,
    handler: (req, _body, res) => {
      if (req.url?.startsWith('/v1/drop')) {
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, saw: req.headers['authorization'] }));
    },
  });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  await s.approver();
  return s;
}

async function send(t: Test, s: Stack, path: string, status: number): Promise<void> {
  const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', path) });
  t.equal(r.status, status, r.text);
}

t.test('info: one line per request, the outcome carrying its intent', async (t) => {
  const secret = makeCanary('LOGLINE');
  const s = await stackAt(t, 'info', secret);
  for (let i = 0; i < 3; i++) await send(t, s, `/v1/items?page=${i}`, 200);
  await send(t, s, '/v1/drop', 502);
  const lines = jsonLines(s.d.logs());
  t.equal(lines.filter((l) => l['kind'] === 'http_intent' || l['msg'] === 'http_intent').length, 0, 'no intent line');
  const outcomes = lines.filter((l) => l['msg'] === 'http_outcome');
  t.equal(outcomes.length, 4, 'one line per request');
  for (const o of outcomes) {
    t.equal(o['level'], 30, 'at info');
    t.equal(o['credential'], 'api');
    t.equal(o['method'], 'GET');
    t.equal(o['host'], 'api.example.test');
    t.type(o['intent_seq'], 'number');
    t.type(o['peer_pid'], 'number', 'the requester');
  }
  t.same(
    outcomes.map((o) => o['status'] ?? o['error']),
    [200, 200, 200, 'upstream_error'],
    'statuses and the failure, in order',
  );
  t.same(findCanary(s.d.logs(), secret), [], 'the secret is in no line');
});

t.test('debug: the intent on its own line as well', async (t) => {
  const secret = makeCanary('LOGLINE');
  const s = await stackAt(t, 'debug', secret);
  await send(t, s, '/v1/items', 200);
  const lines = jsonLines(s.d.logs());
  const intents = lines.filter((l) => l['msg'] === 'http_intent');
  t.equal(intents.length, 1);
  t.equal(intents[0]?.['level'], 20, 'at debug');
  t.equal(lines.filter((l) => l['msg'] === 'http_outcome').length, 1);
  t.same(findCanary(s.d.logs(), secret), []);
});
