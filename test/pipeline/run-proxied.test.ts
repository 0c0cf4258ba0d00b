// A proxied request through the real pipeline (SPEC §11), in process: the
// daemon's own controller, journal, vault and pipeline services over a home
// made by the real CLI, unlocked and given credentials through the real
// admin socket; a real HTTPS upstream behind a real DNS server. With a
// placeholder's credential the request is checked, approved by a real
// approver, injected and streamed back redacted; without one it is sent as
// is with no approval, its addresses still classified; the journal holds
// typed intent and outcome entries (credential absent, via proxy), and no
// form of the secret reaches the client or the journal.
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadNative } from '../../shared/native';
import { loadConfig } from '../../shared/config';
import { sodiumReady } from '../../shared/crypto';
import { createLogger } from '../../daemon/logger';
import { listenUnix } from '../../daemon/sockets';
import { Controller } from '../../daemon/controller';
import { createAdminServer } from '../../daemon/admin-server';
import { createPipelineServices } from '../../daemon/request-services';
import { Journal } from '../../daemon/audit/journal';
import { identify } from '../../daemon/identity/identify';
import { runProxied } from '../../daemon/pipeline/run-proxied';
import { credentialOfKind } from '../../daemon/pipeline/credential';
import { assertEventShapes } from '../helpers/event-shape';
import { proxiedRequest, type PlaceholderLookup } from '../../daemon/pipeline/proxied';
import type { ResponseSink } from '../../daemon/pipeline/stream-response';
import { Refusal } from '../../shared/errors';
import { makeTestCa, startHttpsUpstream } from '../helpers/https-upstream';
import { startDnsServer, zone } from '../helpers/dns-server';
import { cliAsync, init, makeHome, PASSPHRASE } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';
import { findCanary, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const HOST = 'api.example.test';
const SECRET = makeCanary('PROXIED');
const PH = 'postern-api-0123456789abcdef';

class Sink implements ResponseSink {
  head: { status: number; headers: Record<string, string | string[]> } | null = null;
  chunks: Buffer[] = [];
  state = 'open';
  respond(status: number, headers: Record<string, string | string[]>) {
    this.head = { status, headers };
  }
  write(c: Buffer) {
    this.chunks.push(Buffer.from(c));
  }
  end() {
    this.state = 'ended';
  }
  abort() {
    this.state = 'aborted';
  }
  body() {
    return Buffer.concat(this.chunks).toString('latin1');
  }
}

t.test('proxied requests through the pipeline', async (t) => {
  loadNative();
  await sodiumReady();
  const ca = makeTestCa([HOST]);
  t.teardown(() => ca.cleanup());
  const up = await startHttpsUpstream(ca, (req, _body, res) => {
    if (req.url === '/v1/stall') {
      // One event, then nothing for longer than http.timeout.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      return;
    }
    if (req.url === '/v1/slow') {
      // Five events 400 ms apart: 1.6 s in all, each within http.timeout.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let n = 0;
      const next = (): void => {
        n += 1;
        if (n === 5) res.end(`data: ${n}\n\n`);
        else {
          res.write(`data: ${n}\n\n`);
          setTimeout(next, 400);
        }
      };
      next();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'set-cookie': 's=1' });
    res.write(`data: ${JSON.stringify({ auth: req.headers['authorization'] ?? null })}\n\n`);
    res.end(`data: ${Buffer.from(String(req.headers['authorization'] ?? '')).toString('base64')}\n\n`);
  });
  t.teardown(() => up.close());
  const dns = await startDnsServer(zone({ [HOST]: { A: ['127.0.0.1'] }, 'inside.example.test': { A: ['10.1.2.3'] } }));
  t.teardown(() => dns.close());
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(
    join(h.home, 'config.toml'),
    `[daemon]\n[http]\ntimeout = "1s"\ndns_servers = ["127.0.0.1:${dns.port}"]\nca_file = "${ca.caFile}"\n[audit]\nrefusal_burst = 100000\n`,
    { mode: 0o600 },
  );
  t.equal(init(h).code, 0, 'init');

  // The daemon's parts, as daemon/main.ts puts them together, but for the
  // agent socket: the proxy front door is what will call runProxied.
  const config = loadConfig({ configFlag: undefined, env: h.env });
  const log = createLogger('error', 'json');
  const journal = await Journal.open({
    path: config.paths.auditLog,
    segmentSize: config.config.daemon.audit_segment_size,
  });
  const controller = new Controller({ config, configFlag: undefined, env: h.env, log, journal });
  const admin = createAdminServer(controller, log);
  await listenUnix(admin, config.paths.adminSocket, 0o600);
  const services = createPipelineServices(controller);
  t.teardown(async () => {
    admin.close();
    await controller.shutdown('test over');
  });
  t.equal((await cliAsync(h, ['unlock', '--passphrase-file', h.passFile])).code, 0, 'unlocked');
  const def = `kind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${up.port}]\n`;
  const added = await cliAsync(h, [
    'cred',
    'add',
    '--file',
    h.file('api.toml', `name = "api"\n${def}`),
    '--secret-file',
    h.file('api.secret', SECRET),
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(added.code, 0, `cred add: ${added.stderr}`);
  const approver = await TestAdmin.connect(config.paths.adminSocket);
  t.teardown(() => approver.close());
  t.equal((await approver.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]))['ok'], true, 'approver attached');
  const cards: unknown[] = [];
  approver.onPush = (f) => {
    if (f['push'] !== 'pending') return;
    const card = f['card'] as { id: string };
    cards.push(card);
    void approver.request('approval.decide', { id: card.id, decision: 'once' });
  };

  const ctx = { services, identity: identify(process.pid, process.getuid!()), signal: new AbortController().signal };
  const lookup: PlaceholderLookup = (v) => (v === PH ? { credential: 'api' } : null);
  const defs = (name: string) => {
    try {
      return credentialOfKind(services, name, 'http');
    } catch {
      return undefined;
    }
  };
  const limits = { maxRequestBody: 1 << 20, maxTimeout: 600_000 };
  const request = (headers: [string, string][], host = HOST, target = '/v1/stream') =>
    proxiedRequest(
      {
        method: 'GET',
        target,
        headers: [['Host', `${host}:${up.port}`], ...headers],
        body: null,
        connect: { host, port: up.port },
      },
      limits,
      lookup,
      defs,
    );

  await t.test('with a placeholder: approved, injected, streamed back redacted', async (t) => {
    const sink = new Sink();
    const req = request([
      ['Authorization', `Bearer ${PH}`],
      ['Accept-Encoding', 'gzip'],
    ]);
    t.equal(req.credential, 'api');
    const r = await runProxied(ctx, req, sink);
    t.equal(sink.head?.status, 200);
    t.equal(sink.head?.headers['set-cookie'], undefined, 'Set-Cookie dropped');
    t.equal(sink.state, 'ended');
    t.equal(
      sink.body(),
      'data: {"auth":"[REDACTED:api]"}\n\ndata: [REDACTED:api]\n\n',
      'the real secret was sent, and is redacted',
    );
    t.equal(up.requests.at(-1)?.headers['authorization'], `Bearer ${SECRET}`, 'the upstream got the real secret');
    t.equal(up.requests.at(-1)?.headers['accept-encoding'], 'identity');
    t.equal(cards.length, 1, 'a human was asked');
    t.same(findCanary(sink.body(), SECRET), []);
    t.same(exposures(sink.body(), SECRET), []);
    t.type(r.auditSeq, 'number');
  });

  await t.test('without a placeholder: no credential, no approval, every address classified', async (t) => {
    const before = cards.length;
    for (const [host, what] of [
      [HOST, "loopback, which only a credential's allow_addresses could allow"],
      ['inside.example.test', 'a private address'],
    ] as const) {
      const sink = new Sink();
      const req = request([['Authorization', 'Bearer their-own-token']], host);
      t.equal(req.credential, null);
      const e = await runProxied(ctx, req, sink).then(
        () => null,
        (x: unknown) => x,
      );
      t.ok(e instanceof Refusal && e.code === 'denied_address', `${what}: denied_address`);
      t.ok(e instanceof Refusal && typeof e.auditSeq === 'number', `${what}: journaled`);
      t.equal(sink.head, null, `${what}: no response head`);
    }
    t.equal(cards.length, before, 'nobody was asked');
    t.equal(up.requests.length, 1, 'nothing was sent');
  });

  await t.test('the journal: typed entries, credential absent and via proxy without one, no secret', async (t) => {
    const shown = await cliAsync(h, ['audit', 'show', '--json', '--passphrase-file', h.passFile]);
    t.equal(shown.code, 0);
    t.same(findCanary(shown.stdout, SECRET), [], 'no form of the secret in the journal');
    const entries = shown.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assertEventShapes(entries);
    const intents = entries.filter((e) => e['kind'] === 'http_intent');
    t.equal(intents.length, 1);
    t.match(intents[0], { credential: 'api', via: 'proxy', approval: 'once' });
    const outcomes = entries.filter((e) => e['kind'] === 'http_outcome');
    t.match(outcomes, [{ intent_seq: intents[0]!['seq'], status: 200, truncated: false, redactions: 2 }]);
    const refused = entries.filter((e) => e['kind'] === 'http_refused');
    t.match(refused, [
      { code: 'denied_address', via: 'proxy', host: HOST },
      { code: 'denied_address', via: 'proxy', host: 'inside.example.test' },
    ]);
    for (const r of refused) t.notOk('credential' in r || 'approval' in r, 'no credential, no approval');
  });
  // http.timeout bounds the wait for the head and then for each next piece
  // of a streamed body: a stream may last as long as data keeps coming.
  await t.test('a streamed body: each piece within http.timeout, a stall beyond it aborted', async (t) => {
    const slow = new Sink();
    await runProxied(ctx, request([['Authorization', `Bearer ${PH}`]], HOST, '/v1/slow'), slow);
    t.equal(slow.state, 'ended', 'five events over 1.6 s, none more than 1 s apart: complete');
    t.equal(slow.body(), [1, 2, 3, 4, 5].map((n) => `data: ${n}\n\n`).join(''));

    const stalled = new Sink();
    const started = Date.now();
    const r = await runProxied(ctx, request([['Authorization', `Bearer ${PH}`]], HOST, '/v1/stall'), stalled);
    const waited = Date.now() - started;
    t.equal(stalled.head?.status, 200, 'the head went out');
    t.equal(stalled.body(), 'data: first\n\n', 'the first event went out');
    t.equal(stalled.state, 'aborted', 'then the message was aborted, not ended');
    t.ok(waited >= 1000 && waited < 5000, `aborted after the timeout (${waited} ms)`);
    const shown = await cliAsync(h, ['audit', 'show', '--json', '--passphrase-file', h.passFile]);
    const outcome = shown.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((e) => e['kind'] === 'http_outcome' && e['seq'] === r.auditSeq);
    t.match(outcome, { status: 200, error: 'upstream_timeout', maybe_executed: true }, 'the outcome says why');
  });
});
