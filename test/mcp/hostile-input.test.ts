// Hostile and malformed input on the bridge's stdin (SPEC §1: no input ends
// a process; refusals are clear; §10): raw JSON-RPC lines written to
// `postern mcp` against a real daemon, approver and HTTPS upstream. Checks:
// arguments of the wrong type are a tool error naming the field; unknown
// fields, deep nesting and prototype keys at the top level change nothing;
// a header the agent names is forwarded or refused, never silently dropped
// (`__proto__` included); a body with a lone surrogate is the daemon's
// bad_request; a batch, a line that is not JSON, a cancel for an unknown
// id and methods the bridge does not serve get no crash, and a clear
// -32601 where there is an id; a cancel reaches every call the client
// sent under a reused id (or the reuse is refused); a call line over the SDK's 10 MiB read limit
// is refused as too large while the session, and a call waiting for
// approval, live on. stderr stays empty of stack traces and of the secret.
import t from 'tap';
import type { Test } from 'tap';
import { spawn, ChildProcess } from 'node:child_process';
import { startStack, auditList, Stack, Card } from '../helpers/stack';
import { bridgeCommand, bridgeEnv, processAlive } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';

type Msg = Record<string, unknown>;

class RawBridge {
  readonly child: ChildProcess;
  readonly replies = new Map<string, Msg>();
  stdout = Buffer.alloc(0);
  stderr = '';
  constructor(env: NodeJS.ProcessEnv) {
    const cmd = bridgeCommand();
    this.child = spawn(cmd.command, cmd.args, { env: bridgeEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
    let pending = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      this.stdout = Buffer.concat([this.stdout, d]);
      pending += d.toString('utf8');
      for (let i = pending.indexOf('\n'); i >= 0; i = pending.indexOf('\n')) {
        const m = JSON.parse(pending.slice(0, i)) as Msg;
        pending = pending.slice(i + 1);
        if (m['id'] !== undefined) this.replies.set(String(m['id']), m);
      }
    });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    // A bridge that exits is seen by the checks, not as a write error here.
    this.child.stdin!.on('error', () => undefined);
  }
  line(text: string): void {
    this.child.stdin!.write(text + '\n');
  }
  send(m: unknown): void {
    this.line(JSON.stringify(m));
  }
  async reply(id: string | number, ms = 10_000): Promise<Msg | undefined> {
    await eventually(() => this.replies.has(String(id)), ms);
    return this.replies.get(String(id));
  }
  call(id: number, name: string, args: unknown): void {
    this.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
  }
}

const STACK = /^\s+at .+:\d+:\d+\)?$|\b(TypeError|ReferenceError|RangeError)\b/m;

async function setUp(t: Test, secret: string): Promise<{ s: Stack; b: RawBridge; cards: Card[] }> {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  const cards: Card[] = [];
  // Approves every card once, except those for /v1/hold, left pending.
  await s.approver((card) => {
    cards.push(card);
    return card.action['path'] === '/v1/hold' ? null : { decision: 'once' };
  });
  const b = new RawBridge(s.h.env);
  t.teardown(() => void b.child.kill('SIGKILL'));
  b.send({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  t.ok(await b.reply(0), 'initialized');
  b.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return { s, b, cards };
}

function text(m: Msg | undefined): string {
  const r = (m?.['result'] ?? {}) as { content?: { text?: string }[] };
  return r.content?.[0]?.text ?? '';
}

t.test('malformed lines, unserved methods and wrong arguments: clear errors, no crash', async (t) => {
  const secret = makeCanary('MCPHOSTILE');
  const { s, b } = await setUp(t, secret);
  const url = (p: string): string => s.url('api.example.test', p);

  b.send([
    { jsonrpc: '2.0', id: 101, method: 'tools/list' },
    { jsonrpc: '2.0', id: 102, method: 'ping' },
  ]);
  b.line('{"jsonrpc":"2.0","id":103,"method":');
  b.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'never-sent' } });
  for (const [id, method] of [
    [104, 'resources/list'],
    [105, 'resources/read'],
    [106, 'prompts/list'],
    [107, 'prompts/get'],
    [108, 'completion/complete'],
  ] as const) {
    b.send({ jsonrpc: '2.0', id, method, params: { uri: 'file:///etc/passwd', name: 'x' } });
    t.match((await b.reply(id))?.['error'], { code: -32601 }, `${method}: method not found`);
  }

  b.call(110, 'http_request', { credential: 7, method: 'GET', url: url('/v1/a') });
  const wrong = await b.reply(110);
  t.equal((wrong?.['result'] as Msg | undefined)?.['isError'], true, 'a wrong type is a tool error');
  t.match(text(wrong), /credential/, 'naming the field');
  b.call(111, 'http_request', { credential: 'api', method: 'GET', url: url('/v1/a'), timeout_ms: 'soon' });
  t.match(text(await b.reply(111)), /timeout_ms/, 'timeout_ms of the wrong type named');

  let deep = '0';
  for (let i = 0; i < 50_000; i++) deep = `[${deep}]`;
  b.line(
    `{"jsonrpc":"2.0","id":112,"method":"tools/call","params":{"name":"http_request","arguments":{"credential":"api","method":"GET","url":"${url('/v1/deep')}","unknown":${deep},"__proto__":{"credential":"other"},"constructor":{"prototype":{"x":1}}}}}`,
  );
  const deepReply = await b.reply(112);
  t.notOk((deepReply?.['result'] as Msg | undefined)?.['isError'], `unknown fields are ignored: ${text(deepReply)}`);
  t.ok(
    s.up.requests.some((q) => q.url === '/v1/deep'),
    'the request ran with the credential it named, not one slipped in through __proto__',
  );

  b.line(
    `{"jsonrpc":"2.0","id":113,"method":"tools/call","params":{"name":"http_request","arguments":{"credential":"api","method":"POST","url":"${url('/v1/surrogate')}","body":"a\\ud800b\\u0000c\\u2028d"}}}`,
  );
  const sur = await b.reply(113);
  t.match(text(sur), /^bad_request: body: .*surrogate/, "a lone surrogate is the daemon's bad_request");
  t.notOk(
    s.up.requests.some((q) => q.url === '/v1/surrogate'),
    'and nothing is sent',
  );

  b.send({ jsonrpc: '2.0', id: 120, method: 'ping' });
  t.same((await b.reply(120))?.['result'], {}, 'the bridge still answers');
  t.ok(processAlive(b.child.pid!), 'and is running');
  t.notMatch(b.stderr, STACK, 'no stack trace on stderr');
  t.same(findCanary(b.stdout, secret), [], 'nothing on stdout holds a form of the secret');
  t.same(findCanary(b.stderr, secret), []);
});

t.test('a header named __proto__ is forwarded or refused, never silently dropped', async (t) => {
  const { s, b } = await setUp(t, makeCanary('MCPPROTO'));
  b.line(
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"http_request","arguments":{"credential":"api","method":"GET","url":"${s.url('api.example.test', '/v1/proto')}","headers":{"__proto__":"one","x-other":"two"}}}}`,
  );
  const r = await b.reply(1);
  const refused = (r?.['result'] as Msg | undefined)?.['isError'] === true;
  const seen = s.up.requests.find((q) => q.url === '/v1/proto');
  t.ok(
    refused || seen?.headers['__proto__'] === 'one',
    `refused, or the upstream got the header (header names it got: ${Object.keys(seen?.headers ?? {}).join(', ')}; the reply: ${text(r)})`,
  );
});

t.test(
  'a second call reusing the id of a waiting call is refused at once; a cancel still withdraws the first',
  async (t) => {
    const { s, b, cards } = await setUp(t, makeCanary('MCPDUPID'));
    // Two calls under the same id, the first waiting for a human (MCP forbids
    // reusing an id in a session; a confused client does it anyway).
    b.call(7, 'http_request', {
      credential: 'api',
      method: 'POST',
      url: s.url('api.example.test', '/v1/hold'),
      body: 'a',
    });
    t.ok(await eventually(() => cards.length === 1, 10_000), 'the first call waits for approval');
    b.call(7, 'http_request', {
      credential: 'api',
      method: 'POST',
      url: s.url('api.example.test', '/v1/hold'),
      body: 'b',
    });
    const refused = await b.reply(7);
    t.match(
      refused?.['error'],
      { code: -32600, message: /^request id 7 is already in use by a request in progress/ },
      `the duplicate is a JSON-RPC error naming the id (${JSON.stringify(refused)})`,
    );
    t.equal(cards.length, 1, 'the duplicate never reached the approver');
    b.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'stop' } });
    t.ok(
      await eventually(() => auditList(s).some((e) => e['withdrawn'] === 'by the requester'), 10_000),
      'the cancel of id 7 withdraws the first call (journaled)',
    );
    // An id whose request was answered is free again.
    b.send({ jsonrpc: '2.0', id: 8, method: 'ping' });
    t.same((await b.reply(8))?.['result'], {}, 'ping 8 answered');
    b.replies.delete('8');
    b.send({ jsonrpc: '2.0', id: 8, method: 'ping' });
    t.same((await b.reply(8))?.['result'], {}, 'id 8 used again after its answer: answered');
    t.ok(processAlive(b.child.pid!), 'the bridge is running');
  },
);

t.test('a call line over 10 MiB is refused as too large; the session and a waiting call live on', async (t) => {
  const secret = makeCanary('MCPHUGE');
  const { s, b, cards } = await setUp(t, secret);
  b.call(1, 'http_request', {
    credential: 'api',
    method: 'POST',
    url: s.url('api.example.test', '/v1/hold'),
    body: 'x',
  });
  t.ok(await eventually(() => cards.length === 1, 10_000), 'a call waits for approval');
  b.call(2, 'http_request', {
    credential: 'api',
    method: 'POST',
    url: s.url('api.example.test', '/v1/huge'),
    body: 'y'.repeat(11 * 1024 * 1024),
  });
  const huge = await b.reply(2);
  t.match(
    text(huge),
    /^body_too_large: /,
    `the oversized call is a body_too_large tool error (${JSON.stringify(huge)?.slice(0, 200)})`,
  );
  b.send({ jsonrpc: '2.0', id: 3, method: 'ping' });
  t.same((await b.reply(3))?.['result'], {}, 'the session lives');
  t.ok(processAlive(b.child.pid!), 'the bridge is running');
  t.notMatch(b.stderr, STACK, 'no stack trace on stderr');
  t.same(findCanary(b.stdout, secret), []);
});
