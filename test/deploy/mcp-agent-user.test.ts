// The MCP bridge as users deploy it: the daemon as a non-root system user,
// `postern mcp` started by the official MCP SDK client AS A SEPARATE AGENT
// USER (setpriv), decisions made by an approver of the daemon user. Rows:
// an approval beyond the SDK's 60 s default kept alive by progress; a
// cancelled call; a response near 10 MiB; a locked daemon, then unlocked;
// cred rm / cred update / lock while a call waits for approval. The secret
// canary must be in nothing the client gets, the journal or the daemon log.
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { cleanEnv } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';
import { deploy, entries, httpDef, NODE, type Card, type Deploy } from '../helpers/deploy-users';

const BIG = 9_900_000; // bytes of body: the SDK's line limit is 10 MiB
const bigBody = Buffer.alloc(BIG, '"'); // each `"` weighs two bytes in JSON

type Tool = Awaited<ReturnType<Client['callTool']>>;
type Err = { error?: { code?: string; message?: string } };
const codeOf = (r: Tool): string | undefined => (r.structuredContent as Err | undefined)?.error?.code;

function call(path: string, credential = 'api'): { name: string; arguments: Record<string, unknown> } {
  return {
    name: 'http_request',
    arguments: { credential, method: 'GET', url: `https://api.example.test:${port}${path}`, reason: `deploy ${path}` },
  };
}
let port = 0;

async function bridge(d: Deploy): Promise<{ client: Client; out: () => Buffer; err: () => string; pid: number }> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(
    cleanEnv({ POSTERN_DEBUG: undefined, HOME: d.agentHome, POSTERN_CONFIG: d.agentConfig }),
  ))
    if (v !== undefined && k !== 'NODE_OPTIONS') env[k] = v;
  const transport = new StdioClientTransport({
    command: 'setpriv',
    args: [
      `--reuid=${d.agentUser}`,
      `--regid=${d.agentUser}`,
      '--init-groups',
      '/usr/bin/env',
      '-u',
      'NODE_OPTIONS',
      NODE,
      d.CLI,
      'mcp',
    ],
    env,
    stderr: 'pipe',
    cwd: d.agentHome,
  });
  let stderr = '';
  transport.stderr?.on('data', (x: Buffer) => (stderr += x.toString('latin1')));
  const chunks: Buffer[] = [];
  const start = transport.start.bind(transport);
  transport.start = async () => {
    await start();
    const child = (transport as unknown as { _process?: ChildProcess })._process;
    child?.stdout?.on('data', (c: Buffer) => chunks.push(c));
  };
  const client = new Client({ name: 'deploy-rows', version: '1.0.0' });
  await client.connect(transport);
  return { client, out: () => Buffer.concat(chunks), err: () => stderr, pid: transport.pid ?? -1 };
}

async function cardFor(d: Deploy, path: string, ms = 20_000): Promise<Card | null> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const c = d.approver.cards.find((x) => (x['action'] as { path?: string } | undefined)?.path === path);
    if (c) return c;
    await new Promise((r) => setTimeout(r, 25));
  }
  return null;
}

const reached = (d: Deploy, path: string): number => d.up.requests.filter((q) => q.url === path).length;

t.test('MCP SDK client as the agent user, daemon as its own user', { timeout: 300_000 }, async (t) => {
  const d = await deploy(t, {
    handler: (req, _body, res) => {
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': BIG });
        res.end(bigBody);
        return;
      }
      const text = JSON.stringify({ ok: true, url: req.url });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
    agentConfig: '[mcp]\nmax_result = "8MiB"\n',
  });
  port = d.up.port;
  const secret = makeCanary('MCPDEPLOY');
  let r = d.addCred('api', httpDef('api', port), secret);
  t.equal(r.code, 0, r.stderr);
  const b = await bridge(d);
  t.teardown(() => b.client.close().catch(() => undefined));

  // Started now, approved at 65 s (after the other rows): the SDK's default
  // 60 s request timeout, reset by progress.
  const longStart = Date.now();
  let progress = 0;
  const progressMsgs: string[] = [];
  const long = b.client
    .callTool(call('/long'), undefined, {
      onprogress: (p) => {
        progress++;
        if (p.message) progressMsgs.push(p.message);
      },
      resetTimeoutOnProgress: true,
    })
    .then(
      (x) => ({ ok: x }),
      (e: Error) => ({ err: e.message }),
    );
  const longCard = await cardFor(d, '/long');
  t.ok(longCard, 'a card for the long call');

  await t.test('a call cancelled by the client (AbortController): withdrawn, never sent', async (t) => {
    const ac = new AbortController();
    const p = b.client.callTool(call('/cancelled'), undefined, { signal: ac.signal }).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    const card = await cardFor(d, '/cancelled');
    t.ok(card, 'a card is pending');
    ac.abort('stop');
    t.match(await p, /stop|abort/i, 'the client sees its cancellation');
    await new Promise((r) => setTimeout(r, 1000));
    t.ok(
      d.approver.pushes.some((x) => x['push'] === 'withdrawn' && x['id'] === card!.id),
      'the approver is told the card is withdrawn',
    );
    const late = await d.approver.decide(card!, 'once');
    t.equal(
      (late['result'] as { taken?: boolean } | undefined)?.taken,
      false,
      `late decision not taken ${JSON.stringify(late)}`,
    );
    await new Promise((r) => setTimeout(r, 1000));
    t.equal(reached(d, '/cancelled'), 0, 'nothing reached the upstream');
    const j = entries(d.journal());
    const e = j.find((x) => x['kind'] === 'http_refused' && x['path'] === '/cancelled');
    t.equal(e?.['withdrawn'], 'by the requester', `journaled as withdrawn: ${JSON.stringify(e)}`);
    t.notOk(
      j.some((x) => x['kind'] === 'http_intent' && x['path'] === '/cancelled'),
      'no intent journaled',
    );
  });

  await t.test(
    'a response near 10 MiB: cut to max_result, every line under the SDK limit, session lives',
    async (t) => {
      const p = b.client.callTool(call('/big'), undefined, { timeout: 120_000 });
      const card = await cardFor(d, '/big');
      t.ok(card);
      await d.approver.decide(card!, 'once');
      const res = await p;
      t.notOk(res.isError, JSON.stringify(res).slice(0, 400));
      const sc = res.structuredContent as { status?: number; truncated?: boolean; body?: string };
      t.equal(sc.status, 200);
      t.equal(sc.truncated, true, 'flagged truncated');
      t.ok(typeof sc.body === 'string' && sc.body.length > 0 && /^"+$/.test(sc.body), 'a prefix of the body');
      const lines = b.out().toString('latin1').split('\n');
      const longest = lines.reduce((a, l) => (l.length > a.length ? l : a), '');
      t.ok(longest.length < 10 * 1024 * 1024, `every line under the SDK's 10 MiB (${longest.length})`);
      const result = (JSON.parse(Buffer.from(longest, 'latin1').toString('utf8')) as { result?: unknown }).result;
      const size = Buffer.byteLength(JSON.stringify(result));
      t.ok(size <= 8 * 1024 * 1024, `the tool result is within max_result (${size})`);
      const list = await b.client.callTool({ name: 'list_credentials', arguments: {} });
      t.notOk(list.isError, 'the next call works');
    },
  );

  await t.test('cred rm while the call waits: unknown_credential, nothing sent', async (t) => {
    r = d.addCred('gone', httpDef('gone', port), makeCanary('GONE'));
    t.equal(r.code, 0, r.stderr);
    const p = b.client.callTool(call('/rm', 'gone'), undefined, { timeout: 120_000 });
    const card = await cardFor(d, '/rm');
    t.ok(card);
    const rm = d.postern('cred', 'rm', 'gone', '--passphrase-file', d.passFile);
    t.equal(rm.code, 0, rm.stderr);
    const dec = await d.approver.decide(card!, 'once');
    t.comment(`decide after rm: ${JSON.stringify(dec)}`);
    const res = await p;
    t.equal(res.isError, true, JSON.stringify(res));
    t.equal(codeOf(res), 'unknown_credential', JSON.stringify(res.structuredContent));
    t.equal(reached(d, '/rm'), 0, 'nothing sent');
  });

  await t.test('cred update while the call waits: busy, nothing sent', async (t) => {
    r = d.addCred('upd', httpDef('upd', port), makeCanary('UPD'));
    t.equal(r.code, 0, r.stderr);
    const p = b.client.callTool(call('/admin/upd', 'upd'), undefined, { timeout: 120_000 });
    const card = await cardFor(d, '/admin/upd');
    t.ok(card);
    const u = d.postern(
      'cred',
      'update',
      'upd',
      '--file',
      d.own('upd2.toml', httpDef('upd', port, ['/public/*'])),
      '--passphrase-file',
      d.passFile,
    );
    t.equal(u.code, 0, u.stderr);
    await d.approver.decide(card!, 'once');
    const res = await p;
    t.equal(res.isError, true, JSON.stringify(res));
    t.equal(codeOf(res), 'busy', JSON.stringify(res.structuredContent));
    t.equal(reached(d, '/admin/upd'), 0, 'nothing sent');
  });

  await t.test('an approval given after 65 s: the SDK default timeout reset by progress; 200', async (t) => {
    const wait = 65_000 - (Date.now() - longStart);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const dec = await d.approver.decide(longCard!, 'once');
    t.equal((dec['result'] as { taken?: boolean } | undefined)?.taken, true, `decision taken: ${JSON.stringify(dec)}`);
    const res = await long;
    t.ok('ok' in res, `the call was answered, not timed out: ${JSON.stringify(res).slice(0, 300)}`);
    if ('ok' in res) {
      t.notOk(res.ok.isError);
      t.equal((res.ok.structuredContent as { status?: number }).status, 200);
    }
    t.ok(Date.now() - longStart >= 65_000, 'it waited beyond 60 s');
    t.ok(progress >= 20, `progress notifications kept it alive (${progress})`);
    t.ok(
      progressMsgs.some((m) => m.includes(longCard!.id)),
      `progress names the card's request id (${progressMsgs.at(-1)})`,
    );
    t.equal(reached(d, '/long'), 1, 'sent once');
  });

  await t.test('a call while the daemon is locked: vault_locked; after unlock it works', async (t) => {
    let x = d.postern('lock');
    t.equal(x.code, 0, x.stderr);
    const res = await b.client.callTool(call('/locked'), undefined, { timeout: 30_000 });
    t.equal(res.isError, true, JSON.stringify(res));
    t.equal(codeOf(res), 'vault_locked', JSON.stringify(res.structuredContent));
    t.equal(reached(d, '/locked'), 0);
    x = d.postern('unlock', '--passphrase-file', d.passFile);
    t.equal(x.code, 0, x.stderr);
    const p = b.client.callTool(call('/unlocked'), undefined, { timeout: 60_000 });
    const card = await cardFor(d, '/unlocked');
    t.ok(card, 'after the unlock a card is shown (the approver stays attached)');
    if (card) await d.approver.decide(card, 'once');
    const ok = await p;
    t.notOk(ok.isError, JSON.stringify(ok).slice(0, 300));
    t.equal((ok.structuredContent as { status?: number }).status, 200);
  });

  await t.test('lock while the call waits for approval: vault_locked, nothing sent', async (t) => {
    const p = b.client.callTool(call('/lock-pending'), undefined, { timeout: 60_000 });
    const card = await cardFor(d, '/lock-pending');
    t.ok(card);
    const x = d.postern('lock');
    t.equal(x.code, 0, x.stderr);
    const res = await p;
    t.equal(res.isError, true, JSON.stringify(res));
    t.equal(codeOf(res), 'vault_locked', JSON.stringify(res.structuredContent));
    t.equal(reached(d, '/lock-pending'), 0, 'nothing sent');
    const u = d.postern('unlock', '--passphrase-file', d.passFile);
    t.equal(u.code, 0, u.stderr);
  });

  await t.test('the canary is nowhere: client bytes, bridge stderr, journal, daemon log', async (t) => {
    t.same(findCanary(b.out(), secret), [], 'bridge stdout');
    t.same(findCanary(b.err(), secret), [], 'bridge stderr');
    t.same(findCanary(d.journal(), secret), [], 'journal');
    t.same(findCanary(d.daemonLog(), secret), [], 'daemon log');
    t.ok(
      d.up.requests.some((q) => q.headers['authorization'] === `Bearer ${secret}`),
      'control: the upstream did get it',
    );
  });
});
