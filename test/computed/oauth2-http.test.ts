// An OAuth 2.0 credential end to end (SPEC §13) through the real daemon,
// against a real authorization server (oidc-provider) and an API that
// accepts only access tokens that server issued and still honours:
// client credentials (Basic and form-body client authentication), the
// token cached; a refresh token rotated by the server, written to the vault
// before use and surviving a daemon restart; an expired access token
// obtained again before the request; the token endpoint on a blocked
// address refused with nothing sent; the card and journal naming the
// endpoint; the client secret, refresh and access tokens never in what
// postern emits.
import t from 'tap';
import type { Test } from 'tap';
import { startStack, auditList, type Stack } from '../helpers/stack';
import { startOAuthServer, type OAuthServer } from '../helpers/oauth-server';
import { cli, startDaemon } from '../helpers/postern';
import { exposures } from '../helpers/exposure';
import { journalText } from '../helpers/canary';

interface Setup {
  s: Stack;
  auth: OAuthServer;
  cards: Record<string, unknown>[];
  apiSeen: string[];
}

async function setup(t: Test, o: { ttlS?: number; records?: Record<string, { A: string[] }> } = {}): Promise<Setup> {
  const s = await startStack({
    names: ['api.example.test', 'auth.example.test'],
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'auth.example.test': { A: ['127.0.0.1'] },
      ...(o.records ?? {}),
    },
    handler: async (req, _body, res) => {
      const token = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ''))?.[1] ?? '';
      apiSeen.push(String(req.headers.authorization ?? ''));
      const ok = await auth.accessTokenValid(token);
      const body = JSON.stringify(
        ok ? { ok: true, client: ok.clientId, echoed: req.headers.authorization } : { error: 'invalid_token' },
      );
      res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' }).end(body);
    },
  });
  t.teardown(() => s.close());
  const apiSeen: string[] = [];
  const auth = await startOAuthServer({ ca: s.ca, host: 'auth.example.test', accessTokenTtlS: o.ttlS ?? 300 });
  t.teardown(() => auth.close());
  const cards: Record<string, unknown>[] = [];
  await s.approver((card) => {
    cards.push(card.action);
    return { decision: 'session', root_key: card.process.key };
  });
  return { s, auth, cards, apiSeen };
}

function add(x: Setup, name: string, oauth: string, secret: string, tokenUrl = x.auth.tokenUrl): void {
  x.s.addCredential(
    name,
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject.oauth2]\ntoken_url = "${tokenUrl}"\n${oauth}\n[[allow]]\nhost = "api.example.test"\nports = [${x.s.up.port}]\nmethods = ["GET"]\n`,
    secret,
  );
}

const get = (x: Setup, name: string) =>
  x.s.request({ credential: name, method: 'GET', url: `https://api.example.test:${x.s.up.port}/v1/items` });

const status = (r: { json: unknown }) => (r.json as { status?: number }).status;

t.test('client credentials, Basic and form body: a token obtained once, cached, redacted', async (t) => {
  const x = await setup(t);
  const { basic, post } = x.auth.clients;
  add(x, 'cc-basic', `client_id = "${basic.id}"\ngrant = "client_credentials"\nscopes = ["api:read"]`, basic.secret!);
  add(x, 'cc-post', `client_id = "${post.id}"\ngrant = "client_credentials"\nclient_auth = "post"`, post.secret!);
  const replies: string[] = [];
  for (const name of ['cc-basic', 'cc-post']) {
    const r = await get(x, name);
    replies.push(r.text);
    t.equal(status(r), 200, `${name}: ${r.text}`);
    t.match((r.json as { body: string }).body, /\[REDACTED:cc-/, 'the echoed token is redacted');
    const again = await get(x, name);
    replies.push(again.text);
    t.equal(status(again), 200);
  }
  t.equal(x.auth.tokenRequests('client_credentials'), 2, 'one token request per credential, then the cache');
  t.match(x.cards[0], { computed: 'oauth2', token_endpoint: x.auth.tokenUrl });
  const intent = auditList(x.s).find((e) => e['kind'] === 'http_intent');
  t.match(intent, { computed: 'oauth2', token_endpoint: x.auth.tokenUrl });
  const emitted = [...replies, x.s.d.logs(), await journalText(x.s.h)].join('\n');
  t.same(exposures(emitted, basic.secret!), [], 'no form of a client secret');
  t.same(exposures(emitted, post.secret!), []);
  for (const seen of x.apiSeen)
    t.same(exposures(emitted, seen.replace(/^Bearer /, '')), [], 'no form of an access token');
});

t.test('a rotated refresh token is stored before use and survives a restart', async (t) => {
  const x = await setup(t);
  const c = x.auth.clients.refresh;
  const first = await x.auth.mintRefreshToken(c.id, ['api:read']);
  add(x, 'rt', `client_id = "${c.id}"\ngrant = "refresh_token"`, `${first}\n${c.secret}`);
  const r = await get(x, 'rt');
  t.equal(status(r), 200, r.text);
  t.equal(x.auth.tokenRequests('refresh_token'), 1);
  t.notOk(await x.auth.refreshTokenUsable(first), 'the server rotated the first refresh token away');
  const entries = auditList(x.s);
  const rotated = entries.findIndex((e) => e['kind'] === 'oauth_refresh_rotated' && e['credential'] === 'rt');
  t.ok(rotated > 0, 'the rotation is journaled');
  t.equal(entries[rotated + 1]?.['type'], 'vault', 'and the vault written right after');
  const outcome = entries.findIndex((e) => e['kind'] === 'http_outcome');
  t.ok(outcome > rotated, 'before the request’s outcome');

  // A restart loses the cached access token: the next request refreshes
  // with the rotated refresh token, which only the vault holds.
  await x.s.d.stop();
  const d2 = await startDaemon(x.s.h);
  t.teardown(() => d2.stop());
  t.equal(cli(x.s.h, ['unlock', '--passphrase-file', x.s.h.passFile]).code, 0);
  await x.s.approver((card) => ({ decision: 'session', root_key: card.process.key }));
  const after = await get(x, 'rt');
  t.equal(status(after), 200, after.text);
  t.equal(x.auth.tokenRequests('refresh_token'), 2, 'refreshed with the stored, rotated token');
  const emitted = [r.text, after.text, x.s.d.logs(), d2.logs(), await journalText(x.s.h)].join('\n');
  t.same(exposures(emitted, first), [], 'no form of the refresh token');
  t.same(exposures(emitted, c.secret!), [], 'no form of the client secret');
});

t.test('an expired access token is obtained again before the request', async (t) => {
  const x = await setup(t, { ttlS: 2 });
  const c = x.auth.clients.basic;
  add(x, 'short', `client_id = "${c.id}"\ngrant = "client_credentials"`, c.secret!);
  t.equal(status(await get(x, 'short')), 200);
  t.equal(x.auth.tokenRequests('client_credentials'), 1);
  // Kept for half its 2 s life, then obtained again.
  await new Promise((r) => setTimeout(r, 1300));
  const r = await get(x, 'short');
  t.equal(status(r), 200, r.text);
  t.equal(x.auth.tokenRequests('client_credentials'), 2, 'a new token before the request');
});

t.test('a refused refresh token: upstream_error naming the endpoint, nothing sent', async (t) => {
  const x = await setup(t);
  const c = x.auth.clients.refresh;
  const token = await x.auth.mintRefreshToken(c.id, ['api:read']);
  await x.auth.revokeRefreshToken(token);
  add(x, 'revoked', `client_id = "${c.id}"\ngrant = "refresh_token"`, `${token}\n${c.secret}`);
  const before = x.apiSeen.length;
  const r = await get(x, 'revoked');
  t.equal(r.status, 502, r.text);
  const err = (r.json as { error: { code: string; message: string } }).error;
  t.equal(err.code, 'upstream_error');
  t.match(err.message, x.auth.tokenUrl);
  t.match(err.message, /refresh token was refused/);
  t.equal(x.apiSeen.length, before, 'the API request was not sent');
  t.match(
    auditList(x.s)
      .filter((e) => e['kind'] === 'http_outcome')
      .at(-1),
    { error: 'upstream_error', maybe_executed: false },
  );
});

t.test('a token endpoint on a blocked address is refused before anything is sent', async (t) => {
  const x = await setup(t, { records: { 'meta.example.test': { A: ['169.254.169.254'] } } });
  const c = x.auth.clients.basic;
  const port = new URL(x.auth.tokenUrl).port;
  add(
    x,
    'meta',
    `client_id = "${c.id}"\ngrant = "client_credentials"`,
    c.secret!,
    `https://meta.example.test:${port}/token`,
  );
  const r = await get(x, 'meta');
  t.equal(r.status, 403, r.text);
  t.equal((r.json as { error: { code: string } }).error.code, 'denied_address');
  t.equal(x.auth.tokenRequests('client_credentials'), 0);
  t.equal(x.apiSeen.length, 0);
});
