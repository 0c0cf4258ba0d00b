// Tool results and what the bridge writes (SPEC §10), with the official MCP
// SDK client against a real daemon and HTTPS upstream: a 9 MiB body comes
// back once, cut to mcp.max_result and flagged truncated with a note, and
// the connection lives on; bodies that grow when serialised (control
// characters, quotes, backslashes, non-ASCII) and base64
// bodies are measured serialised; no line the bridge writes reaches the
// SDK's 10 MiB limit, also at max_result = "8MiB". The initialize result
// carries instructions, both action tools take a reason, the card shows
// it, and refusals are said in an MCP agent's words. No form of the secret
// in anything the bridge wrote.
import t from 'tap';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startStack, auditList, Card, Stack } from '../helpers/stack';
import { connectSdkBridge, SdkBridge } from '../helpers/mcp-bridge';
import { findCanary, makeCanary } from '../helpers/canary';

const MiB = 1024 * 1024;
const SDK_LINE_LIMIT = 10 * MiB; // STDIO_DEFAULT_MAX_BUFFER_SIZE (PLATFORM.md)

const MARK = 'start-of-body-7f3a';
const BIG = Buffer.from(MARK + 'B'.repeat(9 * MiB));
// Each of these grows when written as a JSON string: control characters to
// six bytes (\u0001), quotes and backslashes to two, € to three, 😀 to four.
// One control character in 25: still text (more than one in 16 is base64).
const GROWING = Buffer.from(MARK + ('\u0001' + '"\\\n€😀a'.repeat(3)).repeat(212_000), 'utf8');
const BINARY = randomBytes(3 * MiB);

interface Reply {
  status: number;
  body: string;
  body_encoding: string;
  truncated: boolean;
  note?: string;
  audit_seq: number;
}

async function stack(t: Test, secret: string): Promise<Stack> {
  const s = await startStack({
    handler: (req, body, res) => {
      const send = (type: string, b: Buffer): void => {
        res.writeHead(200, { 'content-type': type, 'content-length': b.length });
        res.end(b);
      };
      if (req.url === '/v1/big') send('text/plain; charset=utf-8', BIG);
      else if (req.url === '/v1/growing') send('text/plain; charset=utf-8', GROWING);
      else if (req.url === '/v1/binary') send('application/octet-stream', BINARY);
      else send('application/json', Buffer.from(JSON.stringify({ url: req.url, body: body.toString() })));
    },
  });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\nredact_response = true\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  return s;
}

function get(
  s: Stack,
  path: string,
  extra: Record<string, unknown> = {},
): { name: string; arguments: Record<string, unknown> } {
  return {
    name: 'http_request',
    arguments: { credential: 'api', method: 'GET', url: s.url('api.example.test', path), ...extra },
  };
}

function serialised(r: unknown): number {
  return Buffer.byteLength(JSON.stringify(r));
}

// A cut result: flagged, with a note, the body a prefix of what the upstream
// sent, the whole result within max and not far below it, the body once.
function isCut(t: Test, r: CallToolResult, max: number, original: string, what: string): void {
  t.notOk(r.isError, `${what}: not an error (${JSON.stringify(r).slice(0, 400)})`);
  const reply = r.structuredContent as unknown as Reply;
  t.equal(reply.truncated, true, `${what}: flagged truncated`);
  t.match(reply.note, /mcp\.max_result/, `${what}: the note names the limit`);
  t.match(reply.note, /ask for less/, `${what}: and says how to ask for less`);
  const size = serialised(r);
  t.ok(size <= max, `${what}: the result is ${size} bytes serialised, at most ${max}`);
  t.ok(size > max - 4096, `${what}: and uses the room it has (${size} of ${max})`);
  t.ok(
    reply.body.length > 0 && original.startsWith(reply.body),
    `${what}: the body is a prefix of what the upstream sent`,
  );
  const content = r.content as { type: string; text: string }[];
  t.equal(content.length, 1, `${what}: one text item`);
  t.ok(content[0]!.text.length < 1000, `${what}: the text is a short summary, not the body`);
  t.match(content[0]!.text, /truncated|cut/, `${what}: the summary says it was cut`);
}

// Every line within what the SDK reads, and the body's first bytes once per
// result that carried them.
function linesFit(t: Test, b: SdkBridge, results: number): void {
  const longest = Math.max(...b.lineLengths());
  t.ok(longest < SDK_LINE_LIMIT, `the longest line the bridge wrote is ${longest} bytes, under ${SDK_LINE_LIMIT}`);
  const out = b.stdout().toString('utf8');
  t.equal(out.split(MARK).length - 1, results, 'each body was written once');
}

t.test('large bodies are cut to mcp.max_result, once, and the connection lives', async (t) => {
  const secret = makeCanary('MCPBIG');
  const s = await stack(t, secret);
  await s.approver((card) => ({ decision: 'session', root_key: card.ancestors[0]?.key ?? card.process.key }));
  const b = await connectSdkBridge(t, s.h.env);
  const max = MiB; // the default

  const big = (await b.client.callTool(get(s, '/v1/big'))) as CallToolResult;
  isCut(t, big, max, BIG.toString(), '9 MiB body');
  const next = (await b.client.callTool(get(s, '/v1/small'))) as CallToolResult;
  t.notOk(next.isError, 'the next call works');
  t.match(next.structuredContent, { status: 200, truncated: false });
  t.notOk('note' in (next.structuredContent ?? {}), 'a body that fits has no note');
  t.equal((next.content as unknown[]).length, 1, 'and is not repeated as text');

  const growing = (await b.client.callTool(get(s, '/v1/growing'))) as CallToolResult;
  isCut(t, growing, max, GROWING.toString('utf8'), 'a body that grows when serialised');

  const binary = (await b.client.callTool(get(s, '/v1/binary'))) as CallToolResult;
  isCut(t, binary, max, BINARY.toString('base64'), 'a base64 body');
  const kept = (binary.structuredContent as unknown as Reply).body;
  t.equal(kept.length % 4, 0, 'cut on a base64 group: it decodes');
  t.ok(
    BINARY.subarray(0, Buffer.from(kept, 'base64').length).equals(Buffer.from(kept, 'base64')),
    'to the first bytes of the body',
  );

  t.notOk(b.closed(), 'the connection lives');
  t.ok((await b.client.listTools()).tools.length === 3, 'and answers');
  linesFit(t, b, 2);
  t.same(findCanary(b.stdout(), secret), [], 'nothing the bridge wrote holds a form of the secret');
  t.same(findCanary(b.stderr(), secret), []);
});

t.test('at max_result = "8MiB" every line stays under the SDK limit', async (t) => {
  const secret = makeCanary('MCPMAX');
  const s = await stack(t, secret);
  await s.approver((card) => ({ decision: 'session', root_key: card.ancestors[0]?.key ?? card.process.key }));
  // The bridge's own config: same home (so the same agent socket), its own
  // [mcp] table.
  const config = join(s.h.home, 'bridge.toml');
  writeFileSync(config, '[mcp]\nmax_result = "8MiB"\n', { mode: 0o600 });
  const b = await connectSdkBridge(t, s.h.env, { POSTERN_CONFIG: config });
  const max = 8 * MiB;

  // The daemon already cut the body at http.max_response_body (8MiB): the
  // envelope around it still does not fit.
  const big = (await b.client.callTool(get(s, '/v1/big'))) as CallToolResult;
  isCut(t, big, max, BIG.toString(), '9 MiB body at 8MiB');
  const growing = (await b.client.callTool(get(s, '/v1/growing'))) as CallToolResult;
  isCut(t, growing, max, GROWING.toString('utf8'), 'a growing body at 8MiB');
  t.notOk(b.closed(), 'the connection lives');
  t.notOk(((await b.client.callTool(get(s, '/v1/small'))) as CallToolResult).isError, 'the next call works');
  linesFit(t, b, 2);
  t.same(findCanary(b.stdout(), secret), []);
});

t.test("instructions, reason on the card, refusals in an MCP agent's words", async (t) => {
  const secret = makeCanary('MCPWORDS');
  const s = await stack(t, secret);
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'once' };
  });
  const b = await connectSdkBridge(t, s.h.env);

  const instructions = b.client.getInstructions() ?? '';
  t.match(instructions, /postern/, 'instructions say what postern is');
  t.match(instructions, /list_credentials/, 'that list_credentials names what can be used');
  t.match(instructions, /human may have to approve/, 'that a human may have to approve');
  t.match(instructions, /what to do next/, 'and that refusals say what to do next');

  const tools = (await b.client.listTools()).tools;
  for (const name of ['http_request', 'ssh_exec']) {
    t.ok('reason' in (tools.find((x) => x.name === name)!.inputSchema.properties ?? {}), `${name} takes a reason`);
  }
  t.ok(
    'idempotency_key' in (tools.find((x) => x.name === 'http_request')!.inputSchema.properties ?? {}),
    'http_request keeps idempotency_key',
  );

  const reason = 'fetch the items the user asked for';
  const ok = (await b.client.callTool(get(s, '/v1/items', { reason }))) as CallToolResult;
  t.notOk(ok.isError, JSON.stringify(ok));
  t.equal(cards.length, 1);
  t.equal(cards[0]!.action['reason'], reason, "the card shows the agent's reason");

  // ssh_exec forwards its reason too: the refusal's journal entry has it.
  const sshReason = 'check who deploys';
  const ssh = (await b.client.callTool({
    name: 'ssh_exec',
    arguments: { credential: 'api', command: 'id -un', reason: sshReason },
  })) as CallToolResult;
  t.equal(ssh.isError, true, 'an HTTP credential cannot run a command');
  t.ok(
    auditList(s).some((e) => e['kind'] === 'ssh_refused' && e['reason'] === sshReason),
    'the journal has the ssh_exec reason',
  );

  // A reason the daemon refuses comes back in its words, as a tool error.
  const long = (await b.client.callTool(get(s, '/v1/items', { reason: 'x'.repeat(201) }))) as CallToolResult;
  t.equal(long.isError, true);
  t.match((long.structuredContent as { error: { code: string } }).error, { code: 'bad_request' });
  t.match((long.content as { text: string }[])[0]!.text, /^bad_request: .*reason/);

  // Refusals name tools, not agent-socket endpoints.
  const refusals: CallToolResult[] = [];
  refusals.push(
    (await b.client.callTool({
      name: 'http_request',
      arguments: { credential: 'nope', method: 'GET', url: s.url('api.example.test', '/v1/x') },
    })) as CallToolResult,
  );
  refusals.push(
    (await b.client.callTool({ name: 'ssh_exec', arguments: { credential: 'nope', command: 'id' } })) as CallToolResult,
  );
  refusals.push(ssh);
  for (const r of refusals) {
    const text = (r.content as { text: string }[])[0]!.text;
    const message = (r.structuredContent as { error: { message: string } }).error.message;
    t.equal(r.isError, true, text);
    t.notMatch(text + message, /\/v1\/|postern cred list|postern request/, `said in an MCP agent's words: ${text}`);
  }
  t.match(
    (refusals[0]!.content as { text: string }[])[0]!.text,
    /^unknown_credential: .*list_credentials/,
    'an unknown credential points at list_credentials',
  );
  t.same(findCanary(b.stdout(), secret), []);
});
