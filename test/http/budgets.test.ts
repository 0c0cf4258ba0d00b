// Request budgets through the real daemon (SPEC §4 `rate`, §3
// http.max_concurrent, §6.3 429): a credential's rate is spent one request
// at a time and, once spent, refused before a human is asked and before
// anything is sent; each credential has its own budget; concurrent requests
// never overspend it. Beyond max_concurrent requests in flight (approval
// waits included) the next one is 429 busy at once, and slots come back when
// requests end, however they end. Every budget refusal is journaled.
import t from 'tap';
import { startStack, Card, auditEntries } from '../helpers/stack';
import { cli, eventually } from '../helpers/postern';
import { echo } from '../helpers/https-upstream';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

type Mode = 'session' | 'once' | 'deny' | 'silent';
type Reply = { status: number; json: unknown; text: string };

interface ErrorBody {
  error: { code: string; message: string; audit_seq: number };
}

function err(r: Reply): ErrorBody['error'] | undefined {
  return (r.json as ErrorBody | null)?.error;
}

t.test('rate budgets and max_concurrent', async (t) => {
  const gates = new Map<string, () => void>();
  const s = await startStack({
    httpConfig: 'max_concurrent = 2',
    handler: async (req, body, res) => {
      const url = req.url ?? '';
      if (url.startsWith('/gate/')) await new Promise<void>((r) => gates.set(url, r));
      echo(req, body, res);
    },
  });
  t.teardown(() => {
    for (const open of gates.values()) open();
    return s.close();
  });
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  const def = (name: string, extra = ''): string =>
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n${extra}\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\npaths = ["/v1/*", "/gate/*"]\n`;
  s.addCredential('rated', def('rated', 'rate = "3/min"'), secret);
  s.addCredential('rated2', def('rated2', 'rate = "3/min"'), secret);
  s.addCredential('single', def('single', 'rate = "1/min"'), secret);
  s.addCredential('free', def('free'), secret);
  s.addCredential('each', def('each', 'approve = "each-use"'), secret);

  const cards: Card[] = [];
  let mode: Mode = 'once';
  const admin = await s.approver((card) => {
    cards.push(card);
    if (mode === 'silent') return null;
    return mode === 'session' ? { decision: 'session', root_key: card.process.key } : { decision: mode };
  });
  const texts: string[] = [];
  const get = async (credential: string, path: string): Promise<Reply> => {
    const r = await s.request({ credential, method: 'GET', url: s.url('api.example.test', path) });
    texts.push(r.text);
    return r;
  };
  const seen = (prefix: string): number => s.up.requests.filter((q) => q.url.startsWith(prefix)).length;
  const refusals: { code: string; seq: number }[] = [];
  const refused = (r: Reply): void => {
    const e = err(r);
    if (e && typeof e.audit_seq === 'number') refusals.push({ code: e.code, seq: e.audit_seq });
  };

  await t.test('rate = "3/min": three pass, the fourth is 429 before anyone is asked', async (t) => {
    for (let i = 1; i <= 3; i++) {
      const r = await get('rated', `/v1/r${i}`);
      t.equal(r.status, 200, r.text);
      t.equal(cards.length, i, `request ${i} was approved by a human`);
    }
    t.equal(seen('/v1/r'), 3);
    const r = await get('rated', '/v1/r4');
    t.equal(r.status, 429, r.text);
    t.equal(err(r)?.code, 'rate_limited');
    t.match(err(r)?.message, /3\/min/, 'the message names the rate');
    t.type(err(r)?.audit_seq, 'number', 'journaled');
    refused(r);
    t.equal(cards.length, 3, 'no human was asked');
    t.equal(seen('/v1/r'), 3, 'nothing was sent');
    // Policy comes first: a request no rule allows is denied_policy, spent
    // budget or not.
    const p = await get('rated', '/elsewhere');
    t.equal(p.status, 403, p.text);
    t.equal(err(p)?.code, 'denied_policy');
    t.equal(cards.length, 3);
  });

  await t.test('another credential has its own budget', async (t) => {
    let r = await get('rated2', '/v1/other');
    t.equal(r.status, 200, r.text);
    r = await get('free', '/v1/free');
    t.equal(r.status, 200, r.text);
    t.equal(seen('/v1/other') + seen('/v1/free'), 2);
    r = await get('rated', '/v1/r5');
    t.equal(err(r)?.code, 'rate_limited', 'still spent for the first');
    refused(r);
  });

  await t.test('concurrent requests do not overspend', async (t) => {
    // Both pass the early check while waiting for a human; only one may
    // spend the single token.
    mode = 'silent';
    const n = cards.length;
    const a = get('single', '/v1/s1');
    const b = get('single', '/v1/s2');
    t.ok(await eventually(() => cards.length === n + 2, 10_000), 'both wait for a decision');
    for (const c of cards.slice(n)) await admin.request('approval.decide', { id: c.id, decision: 'once' });
    const replies = await Promise.all([a, b]);
    for (const r of replies) refused(r);
    t.same(replies.map((r) => r.status).sort(), [200, 429], replies.map((r) => r.text).join('\n'));
    t.equal(
      replies.map((r) => err(r)?.code).find((c) => c),
      'rate_limited',
    );
    t.equal(seen('/v1/s'), 1, 'one request was sent');
    mode = 'once';
  });

  await t.test('a changed rate takes effect at once', async (t) => {
    const u = cli(s.h, [
      'cred',
      'update',
      'rated',
      '--file',
      s.h.file('rated2.toml', def('rated', 'rate = "2/min"')),
      '--passphrase-file',
      s.h.passFile,
    ]);
    t.equal(u.code, 0, u.stderr);
    for (let i = 1; i <= 2; i++) {
      const r = await get('rated', `/v1/u${i}`);
      t.equal(r.status, 200, r.text);
    }
    const r = await get('rated', '/v1/u3');
    t.equal(err(r)?.code, 'rate_limited', r.text);
    t.match(err(r)?.message, /2\/min/);
    refused(r);
    t.equal(seen('/v1/u'), 2);
  });

  await t.test('max_concurrent = 2: the third in flight is 429 busy at once', async (t) => {
    mode = 'session';
    t.equal((await get('free', '/v1/warm')).status, 200, 'a session for free');
    const one = get('free', '/gate/1');
    const two = get('free', '/gate/2');
    t.ok(
      await eventually(() => gates.has('/gate/1') && gates.has('/gate/2'), 10_000),
      'two requests are at the upstream',
    );
    const started = Date.now();
    const third = await get('free', '/v1/third');
    t.equal(third.status, 429, third.text);
    t.equal(err(third)?.code, 'busy');
    t.type(err(third)?.audit_seq, 'number', 'journaled');
    refused(third);
    t.ok(Date.now() - started < 2000, 'refused at once');
    t.equal(seen('/v1/third'), 0);
    gates.get('/gate/1')!();
    gates.get('/gate/2')!();
    t.equal((await one).status, 200);
    t.equal((await two).status, 200);
    const after = await get('free', '/v1/after');
    t.equal(after.status, 200, after.text);
  });

  await t.test('requests waiting for approval hold no slot (SPEC §7: daemon.max_pending bounds them)', async (t) => {
    mode = 'silent';
    const n = cards.length;
    const one = get('each', '/v1/e1');
    const two = get('each', '/v1/e2');
    t.ok(await eventually(() => cards.length === n + 2, 10_000), 'two wait for a human');
    const third = await get('free', '/v1/third2');
    t.equal(third.status, 200, `with max_concurrent = 2 and two waiting, a covered request is served: ${third.text}`);
    t.equal(cards.length, n + 2, 'no third card');
    for (const c of cards.slice(n)) await admin.request('approval.decide', { id: c.id, decision: 'deny' });
    t.same(
      [await one, await two].map((r) => err(r)?.code),
      ['denied_by_user', 'denied_by_user'],
    );
    mode = 'session';
  });

  await t.test('slots come back however requests end', async (t) => {
    // Every refusal above (rate_limited, denied, busy, policy) released its
    // slot: two can be in flight again, and a third is still refused.
    const one = get('free', '/gate/3');
    const two = get('free', '/gate/4');
    t.ok(
      await eventually(() => gates.has('/gate/3') && gates.has('/gate/4'), 10_000),
      'two requests are at the upstream',
    );
    const third = await get('free', '/v1/third3');
    t.equal(err(third)?.code, 'busy', third.text);
    refused(third);
    gates.get('/gate/3')!();
    gates.get('/gate/4')!();
    t.equal((await one).status, 200);
    t.equal((await two).status, 200);
  });

  await t.test('budget refusals are journaled', async (t) => {
    const entries = auditEntries(s);
    t.ok(refusals.length >= 6, `${refusals.length} refusals`);
    for (const { code, seq } of refusals) {
      const e = entries.get(seq);
      t.ok(
        e?.['kind'] === 'http_refused' || e?.['kind'] === 'agent_refused',
        `entry ${seq} is a refusal (${String(e?.['kind'])})`,
      );
      t.equal(e?.['code'], code, `entry ${seq} names ${code}`);
    }
    const rateEntry = entries.get(refusals.find((x) => x.code === 'rate_limited')!.seq);
    t.equal(rateEntry?.['credential'], 'rated', 'the rate refusal names the credential');
  });

  await s.d.stop();
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor does any decrypted entry');
});
