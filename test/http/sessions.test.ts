// Sessions and approval through the real daemon (SPEC §7, §6.3): a session
// spares further cards until it ends — by lock, by `postern sessions revoke`,
// or by expiry; each-use credentials ask every time; a human's denial, no
// decision in time, a requester that goes away while waiting, and more than
// 16 pending requests from one process. Counting the cards the approver
// receives is what shows whether a session covered a request.
import t, { Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, Stack, Card } from '../helpers/stack';
import { cli, eventually, openRequest } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';
import { findCanary, journalText, makeCanary } from '../helpers/canary';

type Mode = 'session' | 'once' | 'deny' | 'silent';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown };
}

interface Harness {
  s: Stack;
  admin: TestAdmin;
  cards: Card[];
  setMode(m: Mode): void;
  get(credential: string, path?: string): Promise<{ status: number; json: unknown; text: string }>;
  texts: string[];
  secret: string;
}

async function harness(config?: string): Promise<Harness> {
  const s = await startStack(config === undefined ? {} : { config });
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  const def = (name: string, approve: string): string =>
    `name = "${name}"\nkind = "http"\napprove = "${approve}"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\n`;
  s.addCredential('api', def('api', 'session'), secret);
  s.addCredential('api2', def('api2', 'session'), secret);
  if (config === undefined) s.addCredential('each', def('each', 'each-use'), secret);
  const cards: Card[] = [];
  let mode: Mode = 'session';
  const admin = await s.approver((card) => {
    cards.push(card);
    if (card.action['address'] !== '127.0.0.1') return { decision: 'deny' };
    if (mode === 'silent') return null;
    return mode === 'session' ? { decision: 'session', root_key: card.process.key } : { decision: mode };
  });
  const texts: string[] = [];
  return {
    s,
    admin,
    cards,
    texts,
    secret,
    setMode: (m) => (mode = m),
    async get(credential, path = '/') {
      const r = await s.request({ credential, method: 'GET', url: s.url('api.example.test', path) });
      texts.push(r.text);
      return r;
    },
  };
}

function code(r: { json: unknown }): string | undefined {
  return (r.json as ErrorBody | null)?.error?.code;
}

function sessionsOf(h: Harness): { id: string; credential: string }[] {
  const r = cli(h.s.h, ['sessions', '--json']);
  if (r.code !== 0) throw new Error(`postern sessions: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { sessions: { id: string; credential: string }[] }).sessions;
}

async function noSecret(t: Test, h: Harness): Promise<void> {
  await h.s.d.stop();
  t.same(findCanary(h.texts.join('\n'), h.secret), [], 'no reply carries the secret');
  t.same(findCanary(h.s.d.logs(), h.secret), [], 'the daemon log holds no form of the secret');
  t.same(
    findCanary(readFileSync(join(h.s.h.home, 'audit.log')), h.secret),
    [],
    'the journal file holds no form of the secret',
  );
  t.same(findCanary(await journalText(h.s.h), h.secret), [], 'no decrypted journal entry holds a form of the secret');
}

t.test('sessions end on revoke and lock; each-use, denial, withdrawal, busy', async (t) => {
  const h = await harness();
  t.teardown(() => h.s.close());
  const { s, cards } = h;

  // A session: one card, then none.
  let r = await h.get('api');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 1, 'the first request asked');
  r = await h.get('api');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 1, 'the session covered the second request');

  // A second session, for another credential.
  r = await h.get('api2');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 2, 'the other credential asked once');

  // `postern sessions revoke ID` ends one, and only that one.
  const listed = sessionsOf(h);
  t.same(listed.map((x) => x.credential).sort(), ['api', 'api2']);
  const rv = cli(s.h, ['sessions', 'revoke', listed.find((x) => x.credential === 'api')!.id]);
  t.equal(rv.code, 0, rv.stderr);
  t.same(
    sessionsOf(h).map((x) => x.credential),
    ['api2'],
    'the revoked session is gone, the other stays',
  );
  r = await h.get('api2');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 2, 'the other session still covers its credential');
  r = await h.get('api');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 3, 'after revoke the next request asks again');
  t.equal(sessionsOf(h).length, 2, 'and a new session was approved');

  // Lock ends every session.
  t.equal(cli(s.h, ['lock']).code, 0);
  r = await h.get('api');
  t.equal(r.status, 423);
  t.equal(code(r), 'vault_locked');
  const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
  t.equal(u.code, 0, u.stderr);
  t.same(sessionsOf(h), [], 'no session survives a lock');
  r = await h.get('api');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 4, 'after lock and unlock the next request asks again');

  // each-use asks every time, even with a session for another credential.
  h.setMode('once');
  for (let i = 0; i < 3; i++) {
    r = await h.get('each');
    t.equal(r.status, 200, r.text);
  }
  t.equal(cards.length, 7, 'three each-use requests, three cards');
  t.ok(cards.slice(4).every((c) => c.credential === 'each' && c.approve === 'each-use'));

  // A human denies.
  t.equal(cli(s.h, ['sessions', 'revoke', '--all']).code, 0);
  h.setMode('deny');
  let before = s.up.requests.length;
  r = await h.get('api', '/denied');
  t.equal(r.status, 403, r.text);
  t.equal(code(r), 'denied_by_user');
  t.type((r.json as ErrorBody).error.audit_seq, 'number', 'the denial is journaled');
  t.equal(s.up.requests.length, before, 'nothing was sent upstream');

  // A requester that hangs up while waiting withdraws its card, and nothing
  // is sent later, even if a human approves the card after all.
  h.setMode('silent');
  before = s.up.requests.length;
  const gone = openRequest(s.sock, { credential: 'api', method: 'GET', url: s.url('api.example.test', '/withdrawn') });
  t.ok(await eventually(() => cards.length === 8), 'the card arrived');
  const card = cards[7]!;
  gone.socket.destroy();
  t.ok(
    await eventually(() => h.admin.pushes.some((p) => p['push'] === 'withdrawn' && p['id'] === card.id)),
    'the approver was told the card is withdrawn',
  );
  const late = await h.admin.request('approval.decide', {
    id: card.id,
    decision: 'session',
    root_key: card.process.key,
  });
  t.equal((late['result'] as { taken: boolean }).taken, false, 'a late decision is not taken');
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(s.up.requests.length, before, 'nothing was sent upstream');
  t.same(sessionsOf(h), [], 'and no session was made');

  // At most 16 pending per process: the 17th, from the same process over
  // its own connection, is refused at once with 429 busy.
  const pending = Array.from({ length: 17 }, (_, i) => h.get('api', `/busy/${i}`));
  const firstDone = await Promise.race(pending.map((p, i) => p.then((reply) => ({ i, reply }))));
  t.equal(firstDone.reply.status, 429, firstDone.reply.text);
  t.equal(code(firstDone.reply), 'busy');
  t.type((firstDone.reply.json as ErrorBody).error.audit_seq, 'number', 'the refusal is journaled');
  t.ok(await eventually(() => cards.length === 8 + 16), '16 cards are pending');
  const list = await h.admin.request('approvals.list');
  t.equal((list['result'] as { pending: unknown[] }).pending.length, 16);
  // Deny them all: each waiting request ends denied, none was sent.
  for (const c of cards.slice(8)) await h.admin.request('approval.decide', { id: c.id, decision: 'deny' });
  const rest = await Promise.all(pending.filter((_, i) => i !== firstDone.i));
  t.same(rest.map(code), Array(16).fill('denied_by_user'));
  t.equal(s.up.requests.length, before, 'nothing was sent upstream');

  await noSecret(t, h);
});

t.test('sessions expire; no decision in time is approval_timeout', async (t) => {
  const h = await harness('session_ttl = "5s"\napproval_timeout = "1s"');
  t.teardown(() => h.s.close());
  const { s, cards } = h;

  let r = await h.get('api');
  t.equal(r.status, 200, r.text);
  r = await h.get('api');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 1, 'the session covered the second request');
  // A second session, granted 2.5 s later, outlives the first.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  r = await h.get('api2');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 2);
  t.ok(await eventually(() => !sessionsOf(h).some((x) => x.credential === 'api'), 6000), 'the first session expired');
  t.same(
    sessionsOf(h).map((x) => x.credential),
    ['api2'],
    'the later one has not',
  );
  r = await h.get('api2');
  t.equal(cards.length, 2, 'and still covers its credential');
  r = await h.get('api');
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 3, 'after expiry the next request asks again');

  // Nobody answers: refused after approval_timeout, card withdrawn.
  t.equal(cli(s.h, ['sessions', 'revoke', '--all']).code, 0);
  h.setMode('silent');
  const before = s.up.requests.length;
  const started = Date.now();
  r = await h.get('api', '/late');
  const waited = Date.now() - started;
  t.equal(r.status, 403, r.text);
  t.equal(code(r), 'approval_timeout');
  t.type((r.json as ErrorBody).error.audit_seq, 'number', 'the timeout is journaled');
  t.ok(waited >= 900 && waited < 5000, `waited about approval_timeout (${waited} ms)`);
  t.equal(cards.length, 4);
  t.ok(
    h.admin.pushes.some((p) => p['push'] === 'withdrawn' && p['id'] === cards[3]!.id),
    'the approver was told the card is withdrawn',
  );
  t.equal(s.up.requests.length, before, 'nothing was sent upstream');

  await noSecret(t, h);
});
