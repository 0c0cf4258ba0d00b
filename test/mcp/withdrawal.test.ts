// A call the MCP client gives up on is withdrawn (SPEC §10, §6.1), with the
// official SDK client against a real daemon, approver connection and HTTPS
// upstream: a call aborted by the client, one the SDK times out (both send
// notifications/cancelled), and one whose client process is killed (the
// bridge's stdin closes). Each time, while the card waits for a human who
// does not decide: the approver is told the card is withdrawn, a decision
// on it afterwards is refused, nothing reaches the upstream, the decrypted
// journal says the requester withdrew it, and no form of the secret is in
// anything the bridge wrote.
import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, auditList, Card, Stack } from '../helpers/stack';
import type { TestAdmin } from '../helpers/admin';
import { bridgeCommand, bridgeEnv, connectSdkBridge, processAlive } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

async function stack(t: Test, secret: string): Promise<{ s: Stack; admin: TestAdmin; cards: Card[] }> {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  const cards: Card[] = [];
  // A human who looks at each card and does not decide.
  const admin = await s.approver((card) => {
    cards.push(card);
    return null;
  });
  return { s, admin, cards };
}

function post(s: Stack, path: string): { name: string; arguments: Record<string, unknown> } {
  return {
    name: 'http_request',
    arguments: {
      credential: 'api',
      method: 'POST',
      url: s.url('api.example.test', path),
      body: 'do it',
      reason: `test ${path}`,
    },
  };
}

// The card for `path`, once it is pending.
async function cardFor(t: Test, cards: Card[], path: string): Promise<Card> {
  t.ok(await eventually(() => cards.some((c) => c.action['path'] === path), 10_000), `a card for ${path} is pending`);
  return cards.find((c) => c.action['path'] === path)!;
}

async function isWithdrawn(t: Test, s: Stack, admin: TestAdmin, card: Card, path: string): Promise<void> {
  t.ok(
    await eventually(() => admin.pushes.some((p) => p['push'] === 'withdrawn' && p['id'] === card.id), 10_000),
    `${path}: the approver was told the card is withdrawn`,
  );
  const push = admin.pushes.find((p) => p['push'] === 'withdrawn' && p['id'] === card.id);
  t.equal(push?.['reason'], 'withdrawn by the requester', `${path}: by the requester`);
  const late = await admin.request('approval.decide', { id: card.id, decision: 'once' });
  t.equal(
    (late['result'] as Record<string, unknown> | undefined)?.['taken'],
    false,
    `${path}: a decision on the withdrawn card is not taken`,
  );
  t.notOk(
    s.up.requests.some((q) => q.url === path),
    `${path}: nothing reached the upstream`,
  );
  const entry = auditList(s).find((e) => e['kind'] === 'http_refused' && e['path'] === path);
  t.equal(
    entry?.['withdrawn'],
    'by the requester',
    `${path}: the journal says the requester withdrew it (${JSON.stringify(entry)})`,
  );
  t.notOk(
    auditList(s).some((e) => e['kind'] === 'http_intent' && e['path'] === path),
    `${path}: no intent was journaled`,
  );
}

t.test('a call the client cancels or times out is withdrawn', async (t) => {
  const secret = makeCanary('MCPCANCEL');
  const { s, admin, cards } = await stack(t, secret);
  const b = await connectSdkBridge(t, s.h.env);

  // Aborted by the client.
  const ac = new AbortController();
  const aborted = b.client.callTool(post(s, '/v1/aborted'), undefined, { signal: ac.signal }).then(
    () => 'answered',
    (e: Error) => e.message,
  );
  const c1 = await cardFor(t, cards, '/v1/aborted');
  ac.abort('the user stopped it');
  t.match(await aborted, /stopped|abort/i, 'the client sees its own cancellation');
  await isWithdrawn(t, s, admin, c1, '/v1/aborted');

  // Timed out by the SDK (as with its 60 s default, shorter here).
  const timedOut = await b.client.callTool(post(s, '/v1/timed-out'), undefined, { timeout: 1500 }).then(
    () => 'answered',
    (e: Error) => e.message,
  );
  t.match(timedOut, /timed out/i, 'the SDK timed the call out');
  const c2 = await cardFor(t, cards, '/v1/timed-out');
  await isWithdrawn(t, s, admin, c2, '/v1/timed-out');

  // The bridge is still there for the next call.
  const list = await b.client.callTool({ name: 'list_credentials', arguments: {} });
  t.notOk(list.isError, 'the next call works');
  t.same(findCanary(b.stdout(), secret), [], 'nothing the bridge wrote holds a form of the secret');
  t.same(findCanary(b.stderr(), secret), []);
});

// A client in its own process: SDK Client + StdioClientTransport starting
// the bridge, one call, then waiting for it (written to a temp dir as plain
// JS, so it runs without the test runner's loader).
const CLIENT_JS = String.raw`'use strict';
const [clientPath, stdioPath, paramsText] = process.argv.slice(2);
const { Client } = require(clientPath);
const { StdioClientTransport } = require(stdioPath);
const params = JSON.parse(paramsText);
(async () => {
  const transport = new StdioClientTransport({ command: params.command, args: params.args, env: params.env, stderr: 'pipe' });
  const client = new Client({ name: 'postern-test-child', version: '1.0.0' });
  await client.connect(transport);
  process.stdout.write(JSON.stringify({ bridge: transport.pid }) + '\n');
  await client.callTool(params.call, undefined, { timeout: 600000 });
})();
`;

t.test('a call whose client process is killed is withdrawn, and the bridge exits', async (t) => {
  const secret = makeCanary('MCPKILLED');
  const { s, admin, cards } = await stack(t, secret);
  const dir = mkdtempSync(join(tmpdir(), 'pmcp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = join(dir, 'client.js');
  writeFileSync(script, CLIENT_JS);
  const params = { ...bridgeCommand(), env: bridgeEnv(s.h.env), call: post(s, '/v1/killed') };
  const child = spawn(
    process.execPath,
    [
      script,
      require.resolve('@modelcontextprotocol/sdk/client/index.js'),
      require.resolve('@modelcontextprotocol/sdk/client/stdio.js'),
      JSON.stringify(params),
    ],
    { env: bridgeEnv(process.env), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  t.teardown(() => void child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  t.ok(await eventually(() => out.includes('\n'), 10_000), 'the client started the bridge');
  const bridgePid = (JSON.parse(out.split('\n')[0]!) as { bridge: number }).bridge;

  const card = await cardFor(t, cards, '/v1/killed');
  t.equal(card.process.pid, bridgePid, 'the card shows the bridge as the requester');
  t.equal(card.ancestors[0]?.pid, child.pid, 'and the client process as its parent');
  child.kill('SIGKILL');
  await exited;
  await isWithdrawn(t, s, admin, card, '/v1/killed');
  t.ok(await eventually(() => !processAlive(bridgePid), 5000), 'the bridge exited once its client was gone');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor does any decrypted entry');
});
