// `postern mcp` driven by the MCP SDK's own client over stdio, against a real
// daemon, approver and HTTPS upstream: the tools and their annotations, one
// approval rooted at the bridge's parent (this test process), one refusal
// returned as a tool error with the daemon's code, and the bridge exiting
// when its stdin closes.
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startStack, Card } from '../helpers/stack';
import { CLI, cli, makeHome } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

t.test('the MCP bridge: tools, an approval rooted at its parent, a refusal as a tool error', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('MCPTOKEN');
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    secret,
  );

  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    // Root the session at the bridge's parent: the agent that started it.
    const parent = card.ancestors[0];
    return parent ? { decision: 'session', root_key: parent.key } : { decision: 'deny' };
  });

  // The bridge is started by this process, through env(1) so that the test
  // runner's NODE_OPTIONS (which postern refuses) is removed: env execs node,
  // so the bridge's parent is this process.
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(s.h.env)) if (v !== undefined && k !== 'NODE_OPTIONS') env[k] = v;
  const transport = new StdioClientTransport({
    command: '/usr/bin/env',
    args: ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'mcp'],
    env,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name: 'postern-test', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close().catch(() => undefined));
  const bridgePid = transport.pid;

  const tools = (await client.listTools()).tools;
  t.same(tools.map((x) => x.name).sort(), ['http_request', 'list_credentials', 'ssh_exec']);
  for (const name of ['http_request', 'ssh_exec']) {
    const tool = tools.find((x) => x.name === name)!;
    t.same(
      tool.annotations,
      { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
      `${name}: honest annotations`,
    );
    t.ok(tool.inputSchema.properties && 'credential' in tool.inputSchema.properties, `${name}: has an input schema`);
  }
  t.match(tools.find((x) => x.name === 'list_credentials')!.annotations, { readOnlyHint: true });

  const list = await client.callTool({ name: 'list_credentials', arguments: {} });
  t.notOk(list.isError);
  t.match(list.structuredContent, { credentials: [{ name: 'api', kind: 'http', description: 'the test API' }] });

  // A request: approved once, by a session rooted at this process.
  const ok = await client.callTool({
    name: 'http_request',
    arguments: { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/items') },
  });
  t.notOk(ok.isError, JSON.stringify(ok));
  const reply = ok.structuredContent as { status: number; body: string; redactions: number; audit_seq: number };
  t.equal(reply.status, 200);
  t.ok(reply.redactions >= 1, 'the echoed secret was redacted');
  t.equal(s.up.requests.at(-1)?.headers['authorization'], `Bearer ${secret}`, 'the upstream got the secret');
  t.equal(cards.length, 1, 'one card');
  t.equal(cards[0]!.process.pid, bridgePid, 'the card shows the bridge as the requester');
  t.equal(cards[0]!.ancestors[0]?.pid, process.pid, 'and this process as its parent');

  // Covered by the session: no second card.
  const again = await client.callTool({
    name: 'http_request',
    arguments: { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/other') },
  });
  t.notOk(again.isError);
  t.equal(cards.length, 1, 'the session rooted at the parent covers the next request');

  // A refusal: a tool error carrying the daemon's code and message.
  const refused = await client.callTool({
    name: 'http_request',
    arguments: { credential: 'api', method: 'POST', url: s.url('api.example.test', '/v1/items') },
  });
  t.equal(refused.isError, true);
  const err = (refused.structuredContent as { error: { code: string; message: string; audit_seq: number } }).error;
  t.equal(err.code, 'denied_policy');
  t.match((refused.content as { text: string }[])[0]!.text, /^denied_policy: /);
  t.ok(err.audit_seq > 0, 'journaled');

  // Every byte the client received is free of the secret.
  t.same(findCanary(JSON.stringify([list, ok, again, refused]), secret), []);

  // Closing stdin ends the bridge.
  const exited = new Promise<number | null>((resolve) => (transport.onclose = () => resolve(0)));
  await client.close();
  await exited;
  t.ok(bridgePid !== null && !processAlive(bridgePid), 'the bridge exited');
  t.same(findCanary(stderr, secret), [], "nothing of the secret on the bridge's stderr");
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test('the bridge hardens itself like every process that handles approvals', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const r = cli({ env: { ...h.env, NODE_OPTIONS: '--no-warnings' } }, ['mcp'], '');
  t.equal(r.code, 1, 'refused');
  t.match(r.stderr, /NODE_OPTIONS/);
  t.equal(r.stdout, '', 'nothing served on stdout');
});

t.test('a bad [mcp] max_result stops the bridge with an error naming the key', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const config = h.file('bridge.toml', '[mcp]\nmax_result = "20MiB"\n');
  const r = cli(
    { env: { ...h.env, POSTERN_CONFIG: config, POSTERN_AGENT_SOCKET: '/nonexistent/agent.sock' } },
    ['mcp'],
    '',
  );
  t.equal(r.code, 1, 'refused');
  t.match(
    r.stderr.split('\n')[0],
    /^postern: .*mcp\.max_result: must be at most "8MiB"/,
    'the first line names the key and the limit',
  );
  t.notMatch(r.stderr, /^\s+at /m, 'no stack trace');
  t.equal(r.stdout, '', 'nothing served on stdout');
});
