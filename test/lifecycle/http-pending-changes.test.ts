// Lifecycle events racing with POST /v1/http requests already past their
// first steps: a card pending while the credential is removed or narrowed,
// a lock while DNS answers, revoke and lock while the upstream connection is
// still being made. After the event returns, nothing may carry the secret
// out, every request gets an answer with a code, the journal verifies.
import t from 'tap';
import { cli } from '../helpers/postern';
import { findCanary, journalText, makeCanary } from '../helpers/canary';
import { code, credRm, credUpdate, httpDef, sessions, raceStack, verify } from '../helpers/lifecycle';

t.test('credential changes and locks while requests wait', async (t) => {
  const { s, relay, m, secrets, add, sentWith } = await raceStack(t);

  await t.test(
    'cred rm while its card is pending, then approved: unknown_credential, nothing sent, no session',
    async (t) => {
      const sec = add('gone', httpDef('gone', s.up.port));
      const before = s.up.requests.length;
      const from = m.cards.length;
      const p = s.request({ credential: 'gone', method: 'GET', url: s.url('api.example.test', '/rm-pending') });
      const card = await m.nextCard(from);
      t.ok(card, 'a card is shown');
      const rm = await credRm(s, 'gone');
      t.equal(rm.code, 0, `cred rm exits 0 (${rm.stderr.trim()})`);
      const d = await m.decide(card!, 'session');
      t.comment(`decide after rm: ${JSON.stringify(d)}`);
      const r = await p;
      t.equal(r.status, 404, `404 after the credential went (${r.text.slice(0, 300)})`);
      t.equal(code(r), 'unknown_credential');
      t.equal(s.up.requests.length, before, 'nothing reached the upstream');
      t.equal(sentWith(sec), 0);
      t.same(
        sessions(s).filter((x) => x.credential === 'gone'),
        [],
        'no session exists for the removed credential',
      );
    },
  );

  await t.test(
    'a credential re-added under a removed name is not covered by a grant made for the old one',
    async (t) => {
      // The grant of the previous row (decided after the rm) must not carry
      // over to a new credential of the same name.
      const sec2 = add('gone', httpDef('gone', s.up.port));
      const from = m.cards.length;
      const p = s.request({ credential: 'gone', method: 'GET', url: s.url('api.example.test', '/readded') });
      const card = await m.nextCard(from, 5000);
      t.ok(card, 'the re-added credential asks the human again');
      if (card) await m.decide(card, 'deny');
      const r = await p;
      t.equal(r.status, 403, r.text.slice(0, 300));
      t.equal(code(r), 'denied_by_user');
      t.equal(sentWith(sec2), 0, 'the new secret was not sent under the old grant');
    },
  );

  // docs/credentials.md: a request is sent only under the definition it was
  // checked against; one changed while it waited is refused as `busy`, to be
  // sent again and checked against the new one.
  await t.test(
    'cred update narrows the paths and replaces the secret while a card is pending: busy, nothing sent',
    async (t) => {
      const old = add('narrow', httpDef('narrow', s.up.port, { paths: ['/*'] }));
      const fresh = makeCanary('NARROWNEW');
      secrets.push(fresh);
      const from = m.cards.length;
      const p = s.request({ credential: 'narrow', method: 'GET', url: s.url('api.example.test', '/admin/delete-all') });
      const card = await m.nextCard(from);
      t.ok(card, 'a card is shown');
      const u = await credUpdate(s, 'narrow', httpDef('narrow', s.up.port, { paths: ['/public/*'] }), fresh);
      t.equal(u.code, 0, `cred update exits 0 (${u.stderr.trim()})`);
      await m.decide(card!, 'once');
      const r = await p;
      t.equal(r.status, 429, `refused: the definition changed (${r.text.slice(0, 300)})`);
      t.equal(code(r), 'busy');
      t.match(r.text, /was changed while this request waited .*send it again/);
      const again = await s.request({
        credential: 'narrow',
        method: 'GET',
        url: s.url('api.example.test', '/admin/delete-all'),
      });
      t.equal(code(again), 'denied_policy', 'sent again: refused under the definition in force');
      t.equal(
        s.up.requests.filter((x) => x.url.startsWith('/admin')).length,
        0,
        'no request to a path the current definition forbids reached the upstream',
      );
      t.equal(sentWith(fresh), 0, 'the new secret was not injected into it');
      t.equal(sentWith(old), 0, 'nor the old one');
    },
  );

  // docs/credentials.md: revoking a session ends what it covers from then
  // on; a request it already approved, waiting for its connection, goes out
  // (SPEC §6.1: past its intent a request completes). What stops requests
  // in flight too is `postern lock` (the row after the next).
  await t.test(
    'sessions revoke --all while a covered request is still connecting: it completes; the next asks again',
    async (t) => {
      const sec = add('relay', httpDef('relay', relay.port));
      relay.release();
      const from = m.cards.length;
      // POST: its connection is closed after the response, so the next one
      // connects again (through the held relay).
      const first = s.request({
        credential: 'relay',
        method: 'POST',
        url: `https://api.example.test:${relay.port}/one`,
        body: 'x',
      });
      const card = await m.nextCard(from);
      await m.decide(card!, 'session');
      t.equal((await first).status, 200);
      relay.hold();
      const p = s.request({
        credential: 'relay',
        method: 'POST',
        url: `https://api.example.test:${relay.port}/two`,
        body: 'y',
      });
      const held = await (async () => {
        for (let i = 0; i < 500 && relay.held() < 1; i++) await new Promise((r) => setTimeout(r, 20));
        return relay.held();
      })();
      t.equal(held, 1, 'the second request waits for its connection');
      t.equal(m.cards.length, from + 1, 'the session covered it (no card)');
      const rv = cli(s.h, ['sessions', 'revoke', '--all']);
      t.equal(rv.code, 0, rv.stderr);
      relay.release();
      const r = await p;
      t.equal(r.status, 200, 'approved before the revoke: completed');
      t.equal(sentWith(sec), 2);
      const third = s.request({
        credential: 'relay',
        method: 'POST',
        url: `https://api.example.test:${relay.port}/three`,
        body: 'z',
      });
      const next = await m.nextCard(from + 1);
      t.ok(next, 'the next request asks the human again');
      await m.decide(next!, 'deny');
      t.equal(code(await third), 'denied_by_user');
      t.equal(sentWith(sec), 2, 'nothing more went out under the revoked session');
    },
  );

  await t.test('lock while a covered request waits for DNS: vault_locked, and no card is shown for it', async (t) => {
    add('dns', httpDef('dns', s.up.port, { host: 'slow.example.test' }));
    const from = m.cards.length;
    const first = s.request({ credential: 'dns', method: 'GET', url: s.url('slow.example.test', '/one') });
    const card = await m.nextCard(from);
    await m.decide(card!, 'session');
    t.equal((await first).status, 200, 'the session is granted');
    const n = s.up.requests.length;
    const cardsBefore = m.cards.length;
    const p = s.request({ credential: 'dns', method: 'GET', url: s.url('slow.example.test', '/two') });
    await new Promise((r) => setTimeout(r, 600));
    t.equal(cli(s.h, ['lock']).code, 0, 'lock');
    const r = await Promise.race([p, new Promise<null>((res) => setTimeout(() => res(null), 8_000))]);
    t.not(r, null, 'answered within 8 s of the lock (DNS answers after 2.5 s)');
    t.equal(r?.status, 423, r?.text.slice(0, 300) ?? '');
    t.equal(r ? (code(r) ?? null) : null, 'vault_locked');
    t.equal(m.cards.length, cardsBefore, 'no card was shown for a request of a locked daemon');
    const late = m.cards[cardsBefore];
    if (late) {
      t.comment(`card shown after the lock: ${JSON.stringify({ credential: late.credential, action: late.action })}`);
      await m.decide(late, 'deny');
      const end = await p;
      t.comment(`that request, denied at last: ${end.status} ${end.text.slice(0, 200)}`);
    }
    t.equal(s.up.requests.length, n, 'nothing sent');
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    t.equal(u.code, 0, u.stderr);
  });

  await t.test(
    'lock while a request (allowed once) waits for its connection: vault_locked, nothing sent',
    async (t) => {
      add('lockc', httpDef('lockc', relay.port, { approve: 'each-use' }));
      relay.hold();
      const n = s.up.requests.length;
      const from = m.cards.length;
      const p = s.request({
        credential: 'lockc',
        method: 'POST',
        url: `https://api.example.test:${relay.port}/l`,
        body: 'z',
      });
      const card = await m.nextCard(from);
      t.ok(card, 'a card');
      const heldBefore = relay.held();
      await m.decide(card!, 'once');
      for (let i = 0; i < 500 && relay.held() <= heldBefore; i++) await new Promise((r) => setTimeout(r, 20));
      t.ok(relay.held() > heldBefore, 'it waits for its connection');
      t.equal(cli(s.h, ['lock']).code, 0, 'lock');
      relay.release();
      const r = await Promise.race([p, new Promise<null>((res) => setTimeout(() => res(null), 20_000))]);
      t.not(r, null, 'answered');
      t.comment(`reply: ${r?.status} ${r?.text.slice(0, 300)}`);
      t.equal(r?.status, 423);
      t.equal(r ? (code(r) ?? null) : null, 'vault_locked');
      await new Promise((res) => setTimeout(res, 300));
      t.equal(s.up.requests.length, n, 'nothing sent after the lock');
      t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
    },
  );

  await t.test('the journal verifies once the daemon stops; no secret in the daemon log or the journal', async (t) => {
    t.equal(await s.d.stop(), 0, 'SIGTERM: exit 0');
    const v = verify(s);
    t.equal(v.code, 0, v.stdout + v.stderr);
    const text = await journalText(s.h);
    for (const sec of secrets) {
      t.same(findCanary(s.d.logs(), sec), [], 'log');
      t.same(findCanary(text, sec), [], 'journal');
    }
  });
});
