// `postern mcp` without a daemon to talk to (SPEC §10, §5: "3 the daemon is
// not reachable"), driven by the MCP SDK's client over the bridge's own
// stdin and stdout: the bridge starts and lists its tools with no daemon
// at all; every tool call is a tool error with the code daemon_unreachable
// and a message that says to start `postern daemon`; no stack trace on any
// channel; the bridge keeps answering (a second call, a daemon stopped
// between two calls, started again, killed while a call is in flight) and
// exits 0 when its stdin closes.
import t from 'tap';
import type { Test } from 'tap';
import { spawn, ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { startStack, Stack } from '../helpers/stack';
import { CLI, cli, eventually, init, makeHome, startDaemon, Daemon } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

// The bridge as a child of this process, its stdio carrying MCP: this side
// of the transport, so the test decides when stdin closes and sees how the
// process ends. tap's NODE_OPTIONS (which postern refuses) is removed by
// env(1), which then execs node.
class Bridge implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr = '';
  badStdout: string[] = []; // stdout that is not an MCP message
  private readonly buffer = new ReadBuffer();

  constructor(env: NodeJS.ProcessEnv) {
    const clean: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) if (v !== undefined && k !== 'NODE_OPTIONS') clean[k] = v;
    this.child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'mcp'], {
      env: clean,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.child.stdout!.on('data', (chunk: Buffer) => {
      this.buffer.append(chunk);
      for (;;) {
        let m: JSONRPCMessage | null;
        try {
          m = this.buffer.readMessage();
        } catch (e) {
          this.badStdout.push(String(e));
          continue;
        }
        if (m === null) break;
        this.onmessage?.(m);
      }
    });
    this.child.on('close', () => this.onclose?.());
  }

  async start(): Promise<void> {
    // Started in the constructor.
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      this.child.stdin!.write(serializeMessage(message), (e) => (e ? reject(e) : resolve()));
    });
  }

  // Closes stdin and waits for the bridge to end; kills it if it does not.
  async close(): Promise<void> {
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
  }
}

async function startBridge(t: Test, env: NodeJS.ProcessEnv): Promise<{ bridge: Bridge; client: Client }> {
  const bridge = new Bridge(env);
  const client = new Client({ name: 'postern-test', version: '1.0.0' });
  t.teardown(() => client.close().catch(() => undefined));
  await client.connect(bridge);
  return { bridge, client };
}

interface ToolResult {
  isError?: boolean;
  content: unknown;
  structuredContent?: unknown;
}

const CALLS: { name: string; arguments: Record<string, unknown> }[] = [
  { name: 'list_credentials', arguments: {} },
  { name: 'http_request', arguments: { credential: 'api', method: 'GET', url: 'https://api.example.test/v1/items' } },
  { name: 'ssh_exec', arguments: { credential: 'box', command: 'id -un' } },
];

function unreachable(sock: string, errno: string): string {
  return `the postern daemon is not reachable at ${sock} (${errno}); start it with \`postern daemon\``;
}

// The exact tool error for an unreachable daemon.
function isUnreachable(t: Test, r: ToolResult, message: string, what: string): void {
  t.equal(r.isError, true, `${what}: a tool error`);
  t.same(r.content, [{ type: 'text', text: `daemon_unreachable: ${message}` }], `${what}: the code and what to do`);
  t.same(r.structuredContent, { error: { code: 'daemon_unreachable', message } }, `${what}: structured`);
}

// What a stack trace looks like in Node's output.
const STACK = /^\s+at .+(\(.*:\d+:\d+\)|:\d+:\d+)$|\b(TypeError|ReferenceError|RangeError|Error):/m;

async function endsOnStdinClose(t: Test, bridge: Bridge): Promise<void> {
  const closedAt = Date.now();
  bridge.child.stdin!.end();
  const timer = setTimeout(() => bridge.child.kill('SIGKILL'), 5000);
  const end = await bridge.exited;
  clearTimeout(timer);
  t.same(end, { code: 0, signal: null }, 'the bridge exits 0 when its stdin closes');
  t.ok(Date.now() - closedAt < 5000, `within ${Date.now() - closedAt} ms`);
}

function httpCredential(port: number): string {
  return `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`;
}

t.test('an initialised home whose daemon is not running', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const sock = join(h.home, 'agent.sock');
  t.notOk(existsSync(sock), 'no agent socket');
  const { bridge, client } = await startBridge(t, h.env);

  const tools = (await client.listTools()).tools;
  t.same(
    tools.map((x) => x.name).sort(),
    ['http_request', 'list_credentials', 'ssh_exec'],
    'tools/list answers without a daemon',
  );

  // Every tool, twice: each call answers, the bridge stays up.
  for (const round of [1, 2]) {
    for (const call of CALLS) {
      const r = (await client.callTool(call)) as ToolResult;
      isUnreachable(t, r, unreachable(sock, 'ENOENT'), `${call.name} (call ${round})`);
    }
  }
  await client.ping();
  t.equal(bridge.child.exitCode, null, 'still running');
  t.same(bridge.badStdout, [], 'stdout carried MCP messages only');
  t.equal(bridge.stderr, '', 'nothing on stderr');
  await endsOnStdinClose(t, bridge);
});

t.test('the daemon stopped between two calls, then started again', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('MCPDOWN');
  s.addCredential('api', httpCredential(s.up.port), secret);
  const { bridge, client } = await startBridge(t, s.h.env);
  const replies: unknown[] = [];

  const before = (await client.callTool(CALLS[0]!)) as ToolResult;
  replies.push(before);
  t.notOk(before.isError, 'the daemon answers');
  t.match(before.structuredContent, { credentials: [{ name: 'api', kind: 'http' }] });

  t.equal(await s.d.stop(), 0, 'the daemon stopped');
  // A stopped daemon removes its socket: nothing to connect to.
  t.notOk(existsSync(s.sock), 'the agent socket is gone');
  for (const call of CALLS) {
    const r = (await client.callTool(call)) as ToolResult;
    replies.push(r);
    isUnreachable(t, r, unreachable(s.sock, 'ENOENT'), `${call.name} after the daemon stopped`);
  }

  // Started again (locked, then unlocked): the same bridge reaches it.
  let d2: Daemon | null = await startDaemon(s.h);
  t.teardown(() => d2?.stop());
  t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0, 'unlocked');
  const after = (await client.callTool(CALLS[0]!)) as ToolResult;
  replies.push(after);
  t.notOk(after.isError, JSON.stringify(after));
  t.match(after.structuredContent, { credentials: [{ name: 'api', kind: 'http' }] });

  t.same(bridge.badStdout, [], 'stdout carried MCP messages only');
  t.notMatch(bridge.stderr, STACK, 'no stack trace on stderr');
  t.notMatch(JSON.stringify(replies), STACK, 'no stack trace in a reply');
  t.same(findCanary(JSON.stringify(replies) + bridge.stderr, secret), []);
  await endsOnStdinClose(t, bridge);
  await d2.stop();
  d2 = null;
});

t.test('the daemon killed while a call is in flight', async (t) => {
  // The upstream holds its answer: the request has reached it when the
  // daemon dies.
  const held: ServerResponse[] = [];
  const s: Stack = await startStack({ handler: (_req, _body, res) => void held.push(res) });
  t.teardown(async () => {
    for (const res of held) res.destroy();
    await s.close();
  });
  const secret = makeCanary('MCPKILL');
  s.addCredential('api', httpCredential(s.up.port), secret);
  await s.approver((card) => ({ decision: 'session', root_key: card.ancestors[0]?.key ?? card.process.key }));
  const { bridge, client } = await startBridge(t, s.h.env);

  const pending = client.callTool({
    name: 'http_request',
    arguments: { credential: 'api', method: 'POST', url: s.url('api.example.test', '/v1/items'), body: 'once' },
  }) as Promise<ToolResult>;
  t.ok(await eventually(() => s.up.requests.length === 1, 10_000), 'the request reached the upstream');
  s.d.proc.kill('SIGKILL');
  t.equal(await s.d.exited, null, 'the daemon is gone');
  const r = await pending;
  t.equal(r.isError, true, 'a tool error');
  const err = ((r.structuredContent ?? {}) as { error?: Record<string, unknown> }).error ?? {};
  t.equal(err['code'], 'daemon_unreachable');
  // The daemon had the request and sent it: the agent must not be told that
  // nothing happened.
  t.equal(err['maybe_executed'], true, `the request may have been executed: ${JSON.stringify(r)}`);

  // The socket file stays behind a killed daemon: refused, and answered.
  t.ok(existsSync(s.sock), 'a stale agent socket');
  const next = (await client.callTool(CALLS[0]!)) as ToolResult;
  isUnreachable(t, next, unreachable(s.sock, 'ECONNREFUSED'), 'list_credentials after the kill');

  t.same(bridge.badStdout, [], 'stdout carried MCP messages only');
  t.notMatch(bridge.stderr, STACK, 'no stack trace on stderr');
  t.notMatch(JSON.stringify([r, next]), STACK, 'no stack trace in a reply');
  t.same(findCanary(JSON.stringify([r, next]) + bridge.stderr, secret), []);
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor does any decrypted entry');
  await endsOnStdinClose(t, bridge);
});
