// Idempotency keys through the real daemon (SPEC §6.5): the same key with
// the same request replays the recorded outcome (a new journal entry, the
// upstream not called again); another request with it is 409
// idempotency_conflict; while the first is in flight, 409 in_progress.
// Records are scoped by session (or, for allow-once, by process instance)
// and credential; each-use requests are never replayed; records are purged
// on lock, revoke and session end; a refusal given before the request left
// frees the key, an upstream_timeout that may have executed is replayed.
import t, { Test } from 'tap';
import { createServer as createHttpsServer } from 'node:https';
import type { ServerResponse } from 'node:http';
import { startStack, Stack, Card, auditList } from '../helpers/stack';
import { cli, eventually, freePort } from '../helpers/postern';
import { echo } from '../helpers/https-upstream';
import { writeAgentScript, Agent } from '../helpers/agent-child';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';
import { credRm, credUpdate } from '../helpers/lifecycle';

type Mode = 'session' | 'once' | 'deny' | 'silent';
type Reply = { status: number; json: unknown; text: string };

interface ErrorBody {
  error: {
    code: string;
    message: string;
    audit_seq: number;
    maybe_executed?: unknown;
    replayed?: unknown;
    replayed_audit_seq?: unknown;
  };
}

interface Ok {
  status: number;
  body: string;
  headers: Record<string, unknown>;
  audit_seq: number;
  replayed?: unknown;
  replayed_audit_seq?: unknown;
}

function err(r: Reply): ErrorBody['error'] | undefined {
  return (r.json as ErrorBody | null)?.error;
}

function ok(r: Reply): Ok {
  return r.json as Ok;
}

function sessionsOf(s: Stack): { id: string; credential: string }[] {
  const r = cli(s.h, ['sessions', '--json']);
  if (r.code !== 0) throw new Error(`postern sessions: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { sessions: { id: string; credential: string }[] }).sessions;
}

const auditEntries = (s: Stack): Record<string, unknown>[] => auditList<Record<string, unknown>>(s);

t.test('idempotency keys through the daemon', async (t) => {
  // Upstream: /gate/* waits until the test opens the gate; /hang/* never
  // answers; everything else is echoed.
  const gates = new Map<string, () => void>();
  const hanging: ServerResponse[] = [];
  let flipTo = '10.0.0.7';
  const s = await startStack({
    names: ['api.example.test', 'flip.example.test'],
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'flip.example.test': () => ({ A: [flipTo] }),
    },
    handler: async (req, body, res) => {
      const url = req.url ?? '';
      if (url.startsWith('/gate/')) await new Promise<void>((r) => gates.set(url, r));
      if (url.startsWith('/hang/')) {
        hanging.push(res);
        return;
      }
      // The request arrived; the response breaks: closed, or not HTTP.
      if (url.startsWith('/closed/')) return void req.socket.destroy();
      if (url.startsWith('/garbage/')) return void req.socket.end('HTTP/1.1 2x0 Nope\r\n\r\n');
      echo(req, body, res);
    },
  });
  t.teardown(() => {
    for (const r of hanging) r.destroy();
    return s.close();
  });
  const P = s.up.port;
  const deadPort = await freePort();
  const secret = makeCanary('TOKEN');
  const def = (name: string, extra = '', port = P): string =>
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n${extra}\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
    `[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST", "PUT"]\n` +
    `[[allow]]\nhost = "flip.example.test"\nports = [${port}]\nmethods = ["POST"]\n` +
    `[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = ["/strict/*"]\napprove = "each-use"\n`;
  s.addCredential('api', def('api'), secret);
  s.addCredential('other', def('other'), secret);
  s.addCredential('each', def('each', 'approve = "each-use"'), secret);
  s.addCredential('rated', def('rated', 'rate = "1/min"'), secret);
  s.addCredential('dead', def('dead', '', deadPort), secret);

  const cards: Card[] = [];
  let mode: Mode = 'session';
  const admin = await s.approver((card) => {
    cards.push(card);
    if (mode === 'silent') return null;
    return mode === 'session' ? { decision: 'session', root_key: card.process.key } : { decision: mode };
  });
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const agents: Agent[] = [];
  t.teardown(() => {
    for (const a of agents) a.kill();
  });

  const texts: string[] = [];
  const send = async (body: Record<string, unknown>): Promise<Reply> => {
    const r = await s.request(body);
    texts.push(r.text);
    return r;
  };
  const seen = (path: string): number => s.up.requests.filter((q) => q.url === path).length;
  const post = (key: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    credential: 'api',
    method: 'POST',
    url: s.url('api.example.test', '/items?x=1'),
    headers: { 'content-type': 'application/json', 'x-trace': 'one' },
    body: '{"a":1}',
    idempotency_key: key,
    ...extra,
  });
  const revokeAll = (): void => {
    const r = cli(s.h, ['sessions', 'revoke', '--all']);
    if (r.code !== 0) throw new Error(`revoke --all: ${r.stderr}`);
  };

  let firstSeq = 0;
  let firstBody = '';
  await t.test('the same request with the same key is replayed, not sent again', async (t) => {
    const r1 = await send(post('k-replay'));
    t.equal(r1.status, 200, r1.text);
    const a = ok(r1);
    t.equal(a.status, 200);
    t.notOk('replayed' in a, 'the first reply is not marked as a replay');
    t.equal(seen('/items?x=1'), 1);
    firstSeq = a.audit_seq;
    firstBody = a.body;
    const cardsBefore = cards.length;
    let last = firstSeq;
    for (let i = 0; i < 2; i++) {
      const r = await send(post('k-replay'));
      t.equal(r.status, 200, r.text);
      const b = ok(r);
      t.equal(b.replayed, true);
      t.equal(b.replayed_audit_seq, firstSeq, 'names the original request');
      t.ok(b.audit_seq > last, 'the replay has its own journal entry');
      last = b.audit_seq;
      t.equal(b.status, a.status);
      t.equal(b.body, firstBody, 'the recorded body');
      t.same(b.headers, a.headers);
    }
    t.equal(seen('/items?x=1'), 1, 'the upstream saw one request');
    t.equal(cards.length, cardsBefore, 'the session covered the replays');
  });

  await t.test('normalisation: header name case and order, host case', async (t) => {
    const r = await send(
      post('k-replay', {
        url: s.url('API.Example.TEST', '/items?x=1'),
        headers: { 'X-Trace': 'one', 'Content-Type': 'application/json' },
      }),
    );
    t.equal(r.status, 200, r.text);
    t.equal(ok(r).replayed, true);
    t.equal(ok(r).replayed_audit_seq, firstSeq);
    t.equal(seen('/items?x=1'), 1);
  });

  await t.test('another request with the same key is 409 idempotency_conflict', async (t) => {
    const variants: [string, Record<string, unknown>][] = [
      ['body', { body: '{"a":2}' }],
      ['no body', { body: undefined }],
      ['header value', { headers: { 'content-type': 'application/json', 'x-trace': 'two' } }],
      ['header added', { headers: { 'content-type': 'application/json', 'x-trace': 'one', 'x-more': '1' } }],
      ['header removed', { headers: { 'content-type': 'application/json' } }],
      ['method', { method: 'PUT' }],
      ['path', { url: s.url('api.example.test', '/items/2?x=1') }],
      ['query', { url: s.url('api.example.test', '/items?x=2') }],
    ];
    const before = s.up.requests.length;
    for (const [what, change] of variants) {
      const r = await send(post('k-replay', change));
      t.equal(r.status, 409, `${what}: ${r.text}`);
      t.equal(err(r)?.code, 'idempotency_conflict', what);
      t.type(err(r)?.audit_seq, 'number', `${what}: journaled`);
    }
    t.equal(s.up.requests.length, before, 'nothing was sent');
    const again = await send(post('k-replay'));
    t.equal(ok(again).replayed, true, 'the original record is intact');
    t.equal(ok(again).body, firstBody);
  });

  await t.test('while the first is in flight: 409 in_progress, then its outcome', async (t) => {
    const body = post('k-flight', { url: s.url('api.example.test', '/gate/1') });
    const first = send(body);
    t.ok(await eventually(() => gates.has('/gate/1'), 10_000), 'the first request reached the upstream');
    const started = Date.now();
    const second = await send(body);
    t.equal(second.status, 409, second.text);
    t.equal(err(second)?.code, 'in_progress');
    t.type(err(second)?.audit_seq, 'number');
    t.ok(Date.now() - started < 3000, 'answered at once, not after the first');
    const conflict = await send({ ...body, body: 'other' });
    t.equal(err(conflict)?.code, 'idempotency_conflict', 'a different request is still a conflict');
    gates.get('/gate/1')!();
    const r1 = await first;
    t.equal(r1.status, 200, r1.text);
    const r3 = await send(body);
    t.equal(ok(r3).replayed, true);
    t.equal(ok(r3).replayed_audit_seq, ok(r1).audit_seq);
    t.equal(seen('/gate/1'), 1, 'the upstream saw one request');
  });

  // SPEC §6.5 names the purges (lock, revoke, session end); a credential
  // update is none of them. It used to forget the credential's records,
  // the one of a request still in flight too, so a retry with its key ran
  // a second time beside it (the request sent before the change completes:
  // docs/credentials.md).
  await t.test('a credential update keeps its keys; a narrowing still refuses; removal forgets them', async (t) => {
    const body = post('k-update', { credential: 'other', url: s.url('api.example.test', '/gate/u1') });
    const first = send(body);
    t.ok(await eventually(() => gates.has('/gate/u1'), 10_000), 'the first request reached the upstream');
    const rotated = await credUpdate(s, 'other', def('other'), makeCanary('ROTATED'));
    t.equal(rotated.code, 0, rotated.stderr);
    const during = await send(body);
    t.equal(err(during)?.code, 'in_progress', `after a rotation, while the first is in flight: ${during.text}`);
    gates.get('/gate/u1')!();
    const r1 = await first;
    t.equal(r1.status, 200, r1.text);
    const replay = await send(body);
    t.equal(ok(replay).replayed, true, `after the rotation, the outcome is replayed: ${replay.text}`);
    t.equal(ok(replay).replayed_audit_seq, ok(r1).audit_seq);
    const redefined = await credUpdate(s, 'other', def('other', 'rate = "100/min"'));
    t.equal(redefined.code, 0, redefined.stderr);
    t.equal(ok(await send(body)).replayed, true, 'after a new definition that allows it: replayed');
    const narrowed = await credUpdate(
      s,
      'other',
      `name = "other"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET"]\n`,
    );
    t.equal(narrowed.code, 0, narrowed.stderr);
    t.equal(err(await send(body))?.code, 'denied_policy', 'a definition that no longer allows it refuses, no replay');
    const removed = await credRm(s, 'other');
    t.equal(removed.code, 0, removed.stderr);
    s.addCredential('other', def('other'), secret);
    const again = send(body);
    t.ok(await eventually(() => seen('/gate/u1') === 2, 10_000), 'after removal and a new add, the key runs again');
    gates.get('/gate/u1')!();
    t.equal(ok(await again).replayed, undefined, 'not a replay');
  });

  await t.test('another credential with the same key is independent', async (t) => {
    const r = await send(post('k-replay', { credential: 'other' }));
    t.equal(r.status, 200, r.text);
    t.notOk('replayed' in ok(r));
    t.equal(seen('/items?x=1'), 2, 'sent again, for the other credential');
    const again = await send(post('k-replay', { credential: 'other' }));
    t.equal(ok(again).replayed, true);
    t.equal(ok(again).replayed_audit_seq, ok(r).audit_seq, "the other credential's own record");
    t.equal(seen('/items?x=1'), 2);
  });

  await t.test('a session is shared by its processes; another session is independent', async (t) => {
    // A child of this process is covered by this process's session: the
    // same key from it is a replay of this process's request.
    const child = await Agent.start(script);
    agents.push(child);
    const cardsBefore = cards.length;
    let r: Reply = await child.request(s.sock, post('k-replay'));
    t.equal(r.status, 200, r.text);
    t.equal(ok(r).replayed, true, 'same session, another process: replayed');
    t.equal(ok(r).replayed_audit_seq, firstSeq);
    t.equal(cards.length, cardsBefore);
    await child.exit();
    // An agent with its own session, then this process with another.
    revokeAll();
    const a = await Agent.start(script);
    agents.push(a);
    r = await a.request(s.sock, post('k-sess', { url: s.url('api.example.test', '/sess') }));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, cardsBefore + 1, 'the agent asked and got a session rooted at itself');
    r = await send(post('k-sess', { url: s.url('api.example.test', '/sess') }));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, cardsBefore + 2, 'this process is not covered by the agent session');
    t.notOk('replayed' in ok(r), 'another session: not a replay');
    t.equal(seen('/sess'), 2, 'the upstream saw both');
    await a.exit();
  });

  await t.test('each-use requests are never replayed: the human is asked again', async (t) => {
    mode = 'once';
    const cardsBefore = cards.length;
    for (let i = 1; i <= 2; i++) {
      const r = await send(post('k-each', { credential: 'each', url: s.url('api.example.test', '/each') }));
      t.equal(r.status, 200, r.text);
      t.notOk('replayed' in ok(r), `request ${i} is not a replay`);
      t.equal(cards.length, cardsBefore + i, `request ${i} asked`);
      t.equal(seen('/each'), i, `request ${i} was sent`);
    }
    // A rule-level each-use on a session credential, with a session present.
    mode = 'session';
    const warm = await send({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/warm') });
    t.equal(warm.status, 200, warm.text);
    mode = 'once';
    const before = cards.length;
    for (let i = 1; i <= 2; i++) {
      const r = await send(post('k-strict', { url: s.url('api.example.test', '/strict/x') }));
      t.equal(r.status, 200, r.text);
      t.notOk('replayed' in ok(r));
      t.equal(cards.length, before + i, `strict request ${i} asked`);
      t.equal(cards.at(-1)?.approve, 'each-use');
      t.equal(seen('/strict/x'), i);
    }
    mode = 'session';
  });

  await t.test('allow-once requests are scoped to the process; lock purges them', async (t) => {
    revokeAll();
    mode = 'once';
    const body = post('k-once', { url: s.url('api.example.test', '/once') });
    const r1 = await send(body);
    t.equal(r1.status, 200, r1.text);
    const n = cards.length;
    const r2 = await send(body);
    t.equal(r2.status, 200, r2.text);
    t.equal(cards.length, n + 1, 'allow-once asks every time');
    t.equal(ok(r2).replayed, true, 'the same process instance: replayed');
    t.equal(ok(r2).replayed_audit_seq, ok(r1).audit_seq);
    t.equal(seen('/once'), 1);
    t.equal(cli(s.h, ['lock']).code, 0);
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    t.equal(u.code, 0, u.stderr);
    const r3 = await send(body);
    t.equal(r3.status, 200, r3.text);
    t.notOk('replayed' in ok(r3), 'after lock the key runs again');
    t.equal(seen('/once'), 2);
    mode = 'session';
  });

  await t.test('revoke purges: the same key runs again in the new session', async (t) => {
    const body = post('k-rev', { url: s.url('api.example.test', '/rev') });
    t.equal((await send(body)).status, 200);
    t.equal(ok(await send(body)).replayed, true);
    const mine = sessionsOf(s).filter((x) => x.credential === 'api');
    t.equal(mine.length, 1);
    const rv = cli(s.h, ['sessions', 'revoke', mine[0]!.id]);
    t.equal(rv.code, 0, rv.stderr);
    const r = await send(body);
    t.equal(r.status, 200, r.text);
    t.notOk('replayed' in ok(r), 'not a replay after revoke');
    t.equal(seen('/rev'), 2);
  });

  await t.test('session end (root exited) purges', async (t) => {
    revokeAll();
    const a = await Agent.start(script);
    agents.push(a);
    const body = post('k-end', { url: s.url('api.example.test', '/end') });
    t.equal((await a.request(s.sock, body)).status, 200);
    t.equal(ok(await a.request(s.sock, body)).replayed, true);
    const id = sessionsOf(s).find((x) => x.credential === 'api')?.id;
    await a.exit();
    t.ok(await eventually(() => !sessionsOf(s).some((x) => x.id === id), 5000), 'the session ended with its root');
    const b = await Agent.start(script);
    agents.push(b);
    const r = await b.request(s.sock, body);
    t.equal(r.status, 200, r.text);
    t.notOk('replayed' in ok(r));
    t.equal(seen('/end'), 2);
    await b.exit();
  });

  await t.test('refusals before sending do not burn the key', async (t) => {
    // denied_by_user
    revokeAll();
    mode = 'deny';
    const body = post('k-deny', { url: s.url('api.example.test', '/deny') });
    let r = await send(body);
    t.equal(err(r)?.code, 'denied_by_user', r.text);
    mode = 'session';
    r = await send(body);
    t.equal(r.status, 200, r.text);
    t.notOk('replayed' in ok(r));
    t.equal(seen('/deny'), 1);
    // denied_address: the name points at a private address, then not.
    const flip = post('k-flip', { url: s.url('flip.example.test', '/flip') });
    r = await send(flip);
    t.equal(err(r)?.code, 'denied_address', r.text);
    flipTo = '127.0.0.1';
    r = await send(flip);
    t.equal(r.status, 200, r.text);
    t.notOk('replayed' in ok(r));
    t.equal(seen('/flip'), 1);
    // rate_limited after the lookup: two requests pass the early budget
    // check while both wait for a human; the second is refused when it
    // would spend the budget, and its key must be free again.
    mode = 'silent';
    const n = cards.length;
    const a = send(post('k-ra', { credential: 'rated', url: s.url('api.example.test', '/rated/a') }));
    const b = send(post('k-rb', { credential: 'rated', url: s.url('api.example.test', '/rated/b') }));
    t.ok(await eventually(() => cards.length === n + 2, 10_000), 'both wait for a decision');
    const cardFor = (p: string): Card => cards.slice(n).find((c) => String(c.action['path']) === p)!;
    await admin.request('approval.decide', { id: cardFor('/rated/a').id, decision: 'once' });
    t.equal((await a).status, 200);
    await admin.request('approval.decide', { id: cardFor('/rated/b').id, decision: 'once' });
    r = await b;
    t.equal(r.status, 429, r.text);
    t.equal(err(r)?.code, 'rate_limited');
    t.equal(seen('/rated/b'), 0);
    // A credential update refills the budget; the key is free.
    const up = cli(s.h, [
      'cred',
      'update',
      'rated',
      '--file',
      s.h.file('rated2.toml', def('rated', 'rate = "1/min"')),
      '--passphrase-file',
      s.h.passFile,
    ]);
    t.equal(up.code, 0, up.stderr);
    mode = 'once';
    r = await send(post('k-rb', { credential: 'rated', url: s.url('api.example.test', '/rated/b') }));
    t.equal(r.status, 200, r.text);
    t.notOk('replayed' in ok(r), 'the refused key runs, neither in_progress nor replayed');
    t.equal(seen('/rated/b'), 1);
    mode = 'session';
  });

  await t.test('an upstream_timeout that may have executed is replayed as the same refusal', async (t) => {
    const body = post('k-timeout', { url: s.url('api.example.test', '/hang/1'), timeout_ms: 500 });
    const r1 = await send(body);
    t.equal(r1.status, 504, r1.text);
    const e1 = err(r1)!;
    t.equal(e1.code, 'upstream_timeout');
    t.equal(e1.maybe_executed, true);
    t.notOk('replayed' in e1);
    const r2 = await send(body);
    t.equal(r2.status, 504, r2.text);
    const e2 = err(r2)!;
    t.equal(e2.code, 'upstream_timeout');
    t.equal(e2.maybe_executed, true);
    t.equal(e2.replayed, true);
    t.equal(e2.replayed_audit_seq, e1.audit_seq);
    t.ok(e2.audit_seq > e1.audit_seq, 'the replay has its own journal entry');
    t.equal(seen('/hang/1'), 1, 'the upstream saw one request');
  });

  await t.test('a response that broke after the request arrived is replayed, not sent again', async (t) => {
    for (const path of ['/closed/1', '/garbage/1']) {
      const body = post(`k-${path}`, { url: s.url('api.example.test', path) });
      const r1 = await send(body);
      t.equal(r1.status, 502, r1.text);
      t.equal(err(r1)?.code, 'upstream_error');
      t.equal(err(r1)?.maybe_executed, true, `${path}: the request reached the upstream, so it may have executed`);
      const r2 = await send(body);
      t.equal(r2.status, 502, r2.text);
      t.equal(err(r2)?.code, 'upstream_error');
      t.equal(err(r2)?.replayed, true, `${path}: the retry is a replay`);
      t.equal(err(r2)?.replayed_audit_seq, err(r1)?.audit_seq);
      t.equal(seen(path), 1, `${path}: the upstream saw one request`);
    }
  });

  await t.test('a refused connection does not burn the key', async (t) => {
    const body = post('k-dead', { credential: 'dead', url: `https://api.example.test:${deadPort}/dead` });
    const r1 = await send(body);
    t.equal(r1.status, 502, r1.text);
    t.equal(err(r1)?.code, 'upstream_error');
    t.notOk(err(r1) && 'maybe_executed' in err(r1)!, 'maybe_executed is absent');
    // Now something listens there: the same key runs.
    let got = 0;
    const srv = createHttpsServer({ key: s.ca.key, cert: s.ca.cert }, (req, res) => {
      got += 1;
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('alive');
    });
    await new Promise<void>((r) => srv.listen(deadPort, '127.0.0.1', () => r()));
    t.teardown(
      () =>
        new Promise<void>((r) => {
          srv.closeAllConnections();
          srv.close(() => r());
        }),
    );
    const r2 = await send(body);
    t.equal(r2.status, 200, r2.text);
    t.notOk('replayed' in ok(r2));
    t.equal(ok(r2).body, 'alive');
    t.equal(got, 1);
  });

  await t.test('replays are journaled, naming the original', async (t) => {
    const entries = auditEntries(s);
    const replays = entries.filter((e) => e['kind'] === 'http_replayed');
    t.ok(replays.length >= 8, `${replays.length} replays journaled`);
    t.ok(
      replays.some((e) => e['replayed_seq'] === firstSeq && e['idempotency_key'] === 'k-replay'),
      'a replay names the first outcome',
    );
    const orig = entries.find((e) => e['seq'] === firstSeq);
    t.equal(orig?.['kind'], 'http_outcome', 'the original audit_seq is its outcome entry');
  });

  await s.d.stop();
  await noSecret(t, s, texts, secret);
});

async function noSecret(t: Test, s: Stack, texts: string[], secret: string): Promise<void> {
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor does any decrypted entry');
}
