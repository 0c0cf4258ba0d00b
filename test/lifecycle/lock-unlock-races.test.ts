// "A request is sent only under the definition it was checked against"
// and "postern lock refuses what is in flight"
// (docs/credentials.md): lock followed at once by unlock while a request
// waits (DNS, its upstream connection), A→B→A updates and rm+add while a
// card is pending.
import t from 'tap';
import { cli } from '../helpers/postern';
import { makeCanary } from '../helpers/canary';
import { code, credRm, credUpdate, httpDef, manualApprover, raceStack, verify } from '../helpers/lifecycle';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('lock+unlock and definition flips while requests wait', async (t) => {
  const race = await raceStack(t);
  const { s, relay, add, sentWith } = race;
  let m = race.m;
  const relock = async (): Promise<void> => {
    t.equal(cli(s.h, ['lock']).code, 0, 'lock');
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    t.equal(u.code, 0, `unlock ${u.stderr}`);
    m = await manualApprover(s);
  };

  await t.test('lock then unlock while a covered request waits for DNS: 423 vault_locked, nothing sent', async (t) => {
    const sec = add('dnsrelock', httpDef('dnsrelock', s.up.port, { host: 'slow.example.test' }));
    const c0 = m.cards.length;
    const first = s.request({ credential: 'dnsrelock', method: 'GET', url: s.url('slow.example.test', '/one') });
    await m.decide((await m.nextCard(c0))!, 'session');
    t.equal((await first).status, 200, 'session granted, first sent');
    const p = s.request({ credential: 'dnsrelock', method: 'GET', url: s.url('slow.example.test', '/two') });
    await sleep(500);
    await relock();
    // If the product shows a card after the unlock, approve it: the row is
    // about whether a request that spanned a lock may still go out.
    const late = await m.nextCard(0, 4000);
    if (late) {
      t.comment(`a card was shown after the unlock for the pre-lock request: ${JSON.stringify(late.action)}`);
      await m.decide(late, 'once');
    }
    const r = await Promise.race([p, sleep(10_000).then(() => null)]);
    t.not(r, null, 'answered');
    t.equal(r?.status, 423, `status (${r?.text.slice(0, 300)})`);
    t.equal(r ? code(r) : null, 'vault_locked');
    t.equal(late, null, 'no card shown for a request that spanned a lock');
    t.equal(sentWith(sec), 1, 'only the first request carried the secret');
  });

  await t.test('lock then unlock while an approved request waits for its connection: 423, nothing sent', async (t) => {
    const sec = add('connrelock', httpDef('connrelock', relay.port, { approve: 'each-use' }));
    relay.hold();
    const c0 = m.cards.length;
    const p = s.request({
      credential: 'connrelock',
      method: 'POST',
      url: `https://api.example.test:${relay.port}/c`,
      body: 'z',
    });
    const card = await m.nextCard(c0);
    const heldBefore = relay.held();
    await m.decide(card!, 'once');
    for (let i = 0; i < 500 && relay.held() <= heldBefore; i++) await sleep(20);
    t.ok(relay.held() > heldBefore, 'waiting for its connection');
    await relock();
    relay.release();
    const r = await Promise.race([p, sleep(20_000).then(() => null)]);
    t.not(r, null, 'answered');
    t.equal(r?.status, 423, `status (${r?.text.slice(0, 300)})`);
    t.equal(r ? code(r) : null, 'vault_locked');
    await sleep(300);
    t.equal(sentWith(sec), 0, 'the secret did not go out after the lock');
  });

  await t.test('update A→B→A while a card is pending: the card is withdrawn (429 busy), nothing sent', async (t) => {
    const A = httpDef('flip', s.up.port, { paths: ['/*'] });
    const B = httpDef('flip', s.up.port, { paths: ['/public/*'] });
    const sec = add('flip', A);
    const c0 = m.cards.length;
    const p = s.request({ credential: 'flip', method: 'GET', url: s.url('api.example.test', '/admin/x') });
    const card = await m.nextCard(c0);
    t.ok(card, 'card');
    t.equal((await credUpdate(s, 'flip', B)).code, 0, 'A→B');
    t.equal((await credUpdate(s, 'flip', A)).code, 0, 'B→A');
    const d = await m.decide(card!, 'session');
    t.comment(`decide: ${JSON.stringify(d)}`);
    const r = await p;
    t.equal(r.status, 429, r.text.slice(0, 300));
    t.equal(code(r), 'busy');
    t.equal(sentWith(sec), 0);
  });

  await t.test('update of the description only while a card is pending: another definition, busy', async (t) => {
    const A = httpDef('desc', s.up.port);
    const B = httpDef('desc', s.up.port, { extra: 'description = "changed"\n' });
    const sec = add('desc', A);
    const c0 = m.cards.length;
    const p = s.request({ credential: 'desc', method: 'GET', url: s.url('api.example.test', '/d') });
    const card = await m.nextCard(c0);
    t.equal((await credUpdate(s, 'desc', B)).code, 0);
    await m.decide(card!, 'once');
    const r = await p;
    t.equal(r.status, 429, r.text.slice(0, 300));
    t.equal(code(r), 'busy');
    t.equal(sentWith(sec), 0);
  });

  await t.test(
    'rm then add (same definition, new secret) while a card is pending: 404, nothing sent, no session',
    async (t) => {
      const A = httpDef('readd', s.up.port);
      const old = add('readd', A);
      const c0 = m.cards.length;
      const p = s.request({ credential: 'readd', method: 'GET', url: s.url('api.example.test', '/r') });
      const card = await m.nextCard(c0);
      t.equal((await credRm(s, 'readd')).code, 0, 'rm');
      const fresh = add('readd', A);
      await m.decide(card!, 'session');
      const r = await p;
      t.equal(r.status, 404, r.text.slice(0, 300));
      t.equal(code(r), 'unknown_credential');
      t.equal(sentWith(old) + sentWith(fresh), 0, 'nothing sent');
      const c1 = m.cards.length;
      const again = s.request({ credential: 'readd', method: 'GET', url: s.url('api.example.test', '/r2') });
      const next = await m.nextCard(c1, 5000);
      t.ok(next, 'asked again: no session from the decision after rm');
      if (next) await m.decide(next, 'deny');
      t.equal(code(await again), 'denied_by_user');
    },
  );

  await t.test('secret replaced alone while a card is pending: a rotation, sent with the new secret', async (t) => {
    const A = httpDef('rot', s.up.port);
    const old = add('rot', A);
    const fresh = makeCanary('ROTNEW');
    const c0 = m.cards.length;
    const p = s.request({ credential: 'rot', method: 'GET', url: s.url('api.example.test', '/rot') });
    const card = await m.nextCard(c0);
    t.equal((await credUpdate(s, 'rot', A, fresh)).code, 0);
    await m.decide(card!, 'once');
    const r = await p;
    t.equal(r.status, 200, r.text.slice(0, 200));
    t.equal(sentWith(fresh), 1, 'new secret');
    t.equal(sentWith(old), 0, 'not the old');
  });

  await t.test('journal verifies after SIGTERM', async (t) => {
    t.equal(await s.d.stop(), 0);
    const v = verify(s);
    t.equal(v.code, 0, v.stdout + v.stderr);
  });
});
