// OAuth 2.0 access tokens (SPEC §13). The token requests oauthTokenRequest
// builds are sent by undici over HTTPS to a real authorization server
// (oidc-provider, which checks the client authentication, the grant, the
// scopes and refresh token rotation by its own rules), and its answers are
// read by parseOAuthTokenResponse; a resource server's view (the provider's
// own token store) says whether the access token obtained is good. The
// stored-secret reader and the answer reader get hostile inputs with their
// exact outcome. No message may carry a client secret or a token.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import {
  MAX_OAUTH_ANSWER_BYTES,
  oauthSecretParts,
  oauthTokenRequest,
  parseOAuthTokenResponse,
  type OAuthDef,
} from '../../daemon/pipeline/computed/oauth2';
import { findCanary, makeCanary } from '../helpers/canary';
import { startOAuthServer, type OAuthClient, type OAuthServer } from '../helpers/oauth-server';

// Every message postern could show, and every secret none may carry.
const messages: string[] = [];
const secrets: string[] = [];
function shown(m: string): string {
  messages.push(m);
  return m;
}

const NO_CLIENT =
  'the client was not authenticated: check client_id, the client secret, and client_auth ("basic" or "post")';
const REFUSED_REFRESH = 'the refresh token was refused (revoked, expired or already used)';

let server: OAuthServer;
let agent: Agent;
const sent: Record<string, number> = { client_credentials: 0, refresh_token: 0 };

t.before(async () => {
  server = await startOAuthServer({ accessTokenTtlS: 120 });
  agent = new Agent({ connect: { ca: server.caCert } });
  for (const c of Object.values(server.clients)) if (c.secret !== null) secrets.push(c.secret);
});
t.teardown(async () => {
  await agent?.close();
  await server?.close();
});

function def(client: OAuthClient, grant: OAuthDef['grant'], over: Partial<OAuthDef> = {}): OAuthDef {
  return {
    token_url: server.tokenUrl,
    client_id: client.id,
    grant,
    client_auth: client.auth === 'post' ? 'post' : 'basic',
    ...over,
  };
}

function partsOf(
  secret: Buffer,
  grant: OAuthDef['grant'],
): { clientSecret: Buffer | null; refreshToken: Buffer | null } {
  const p = oauthSecretParts(secret, grant);
  if (!p.ok) throw new Error(p.problem);
  return p;
}

// Sends what oauthTokenRequest builds, the way the daemon would, and reads the answer.
async function obtain(d: OAuthDef, secret: Buffer, s: OAuthServer = server, a: Agent = agent) {
  const built = oauthTokenRequest(d, partsOf(secret, d.grant));
  sent[d.grant] = (sent[d.grant] ?? 0) + (s === server ? 1 : 0);
  const res = await request(d.token_url, { dispatcher: a, method: 'POST', headers: built.headers, body: built.body });
  const body = Buffer.from(await res.body.arrayBuffer());
  const now = new Date();
  const answer = parseOAuthTokenResponse(res.statusCode, body, now);
  if (answer.ok) {
    secrets.push(answer.accessToken);
    if (answer.refreshToken !== null) secrets.push(answer.refreshToken);
  } else shown(answer.message);
  return { answer, built, now };
}

function ok<T extends { ok: boolean }>(t: Test, a: T, what: string): Extract<T, { ok: true }> {
  if (!a.ok) t.fail(`${what}: ${(a as unknown as { message: string }).message}`);
  return a as Extract<T, { ok: true }>;
}

t.test('client credentials with HTTP Basic: a token the resource server accepts', async (t) => {
  const c = server.clients.basic;
  const d = def(c, 'client_credentials', { scopes: ['api:read', 'reports'] });
  const { answer, built, now } = await obtain(d, Buffer.from(c.secret!));
  const a = ok(t, answer, 'token');
  t.same(await server.accessTokenValid(a.accessToken), { clientId: c.id, scope: 'api:read reports' });
  t.equal(a.scope, 'api:read reports');
  t.equal(a.refreshToken, null, 'no refresh token with client credentials');
  t.equal(a.expiresAt?.getTime(), now.getTime() + 120_000, 'expires_in 120 read into expiresAt');
  t.match(built.headers.authorization, /^Basic [A-Za-z0-9+/]+=*$/);
  t.equal(built.body.toString(), 'grant_type=client_credentials&scope=api%3Aread+reports');
  t.equal(built.headers['content-type'], 'application/x-www-form-urlencoded');
  t.equal(built.headers.accept, 'application/json');
  // RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
  const [user, pass] = Buffer.from(built.headers.authorization!.slice(6), 'base64').toString().split(':');
  const formDecode = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
  t.equal(formDecode(user!), c.id);
  t.equal(formDecode(pass!), c.secret);
  t.equal(server.tokenRequests('client_credentials') >= 1, true);
});

t.test('client credentials with the secret in the form body', async (t) => {
  const c = server.clients.post;
  const d = def(c, 'client_credentials');
  const { answer, built } = await obtain(d, Buffer.from(c.secret!));
  const a = ok(t, answer, 'token');
  t.same(await server.accessTokenValid(a.accessToken), { clientId: c.id, scope: '' });
  t.equal(built.headers.authorization, undefined, 'no Authorization header');
  t.same(Object.fromEntries(new URLSearchParams(built.body.toString())), {
    grant_type: 'client_credentials',
    client_id: c.id,
    client_secret: c.secret,
  });
  t.equal(a.scope, null, 'no scope asked, none answered');
});

t.test('client authentication refused: invalid_client, named', async (t) => {
  const expect = `the OAuth token endpoint answered 401 invalid_client: ${NO_CLIENT} (server: "client authentication failed")`;
  const wrong = makeCanary('WRONG_SECRET');
  secrets.push(wrong);
  const bad = await obtain(def(server.clients.basic, 'client_credentials'), Buffer.from(wrong));
  t.same(bad.answer, { ok: false, code: 'upstream_error', message: expect }, 'wrong secret');
  // Basic without the form-encoding of RFC 6749 §2.3.1 is refused by the
  // server (the secret holds '+', '%' and ':'): so the encoded form it
  // accepted above was checked, not waved through.
  const c = server.clients.basic;
  const raw = Buffer.from(`${c.id}:${c.secret}`).toString('base64');
  const res = await request(server.tokenUrl, {
    dispatcher: agent,
    method: 'POST',
    headers: { authorization: `Basic ${raw}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  sent.client_credentials! += 1;
  const unencoded = parseOAuthTokenResponse(res.statusCode, Buffer.from(await res.body.arrayBuffer()), new Date());
  t.equal(unencoded.ok, false, 'Basic without form-encoding refused');
  if (!unencoded.ok) shown(unencoded.message);
});

t.test('scopes: narrowed to what is asked; more than the client may have is invalid_scope', async (t) => {
  const c = server.clients.post;
  const one = await obtain(def(c, 'client_credentials', { scopes: ['api:write'] }), Buffer.from(c.secret!));
  const a = ok(t, one.answer, 'token');
  t.same(await server.accessTokenValid(a.accessToken), { clientId: c.id, scope: 'api:write' });
  const more = await obtain(def(c, 'client_credentials', { scopes: ['offline_access'] }), Buffer.from(c.secret!));
  t.same(more.answer, {
    ok: false,
    code: 'upstream_error',
    message:
      'the OAuth token endpoint answered 400 invalid_scope: the scopes asked for are unknown to the server or more than the client may have; check scopes (server: "requested scope is not allowed")',
  });
});

t.test('refresh token: an access token and a rotated refresh token; the old one is then refused', async (t) => {
  const c = server.clients.refresh;
  const old = await server.mintRefreshToken(c.id, ['api:read', 'api:write']);
  secrets.push(old);
  const d = def(c, 'refresh_token');
  const { answer, built, now } = await obtain(d, Buffer.from(`${old}\n${c.secret}`));
  const a = ok(t, answer, 'token');
  t.same(await server.accessTokenValid(a.accessToken), { clientId: c.id, scope: 'api:read api:write' });
  t.equal(a.expiresAt?.getTime(), now.getTime() + 120_000);
  t.type(a.refreshToken, 'string');
  t.not(a.refreshToken, old, 'rotated');
  t.equal(await server.refreshTokenUsable(old), false, 'the old one consumed');
  t.equal(await server.refreshTokenUsable(a.refreshToken!), true, 'the rotated one usable');
  t.match(built.headers.authorization, /^Basic /);
  t.same(Object.fromEntries(new URLSearchParams(built.body.toString())), {
    grant_type: 'refresh_token',
    refresh_token: old,
  });

  const again = await obtain(d, Buffer.from(`${old}\n${c.secret}`));
  t.same(again.answer, {
    ok: false,
    code: 'upstream_error',
    message: `the OAuth token endpoint answered 400 invalid_grant: ${REFUSED_REFRESH} (server: "grant request is invalid")`,
  });
  // The server reads a reused token as stolen and revokes the whole grant:
  // why a rotated token must be stored before it is relied on.
  t.equal(await server.refreshTokenUsable(a.refreshToken!), false, 'reuse revoked the rotated one too');
});

t.test('refresh token: scopes narrowed, scopes beyond the grant refused, a revoked token refused', async (t) => {
  const c = server.clients.refresh;
  const rt = await server.mintRefreshToken(c.id, ['api:read', 'api:write', 'reports']);
  secrets.push(rt);
  const narrow = await obtain(def(c, 'refresh_token', { scopes: ['reports'] }), Buffer.from(`${rt}\n${c.secret}`));
  const a = ok(t, narrow.answer, 'token');
  t.same(await server.accessTokenValid(a.accessToken), { clientId: c.id, scope: 'reports' });
  t.equal(a.scope, 'reports');

  const next = a.refreshToken!;
  const beyond = await server.mintRefreshToken(c.id, ['api:read']);
  secrets.push(beyond);
  const wide = await obtain(def(c, 'refresh_token', { scopes: ['api:write'] }), Buffer.from(`${beyond}\n${c.secret}`));
  t.same(wide.answer, {
    ok: false,
    code: 'upstream_error',
    message:
      'the OAuth token endpoint answered 400 invalid_scope: the scopes asked for are unknown to the server or more than the client may have; check scopes (server: "refresh token missing requested scope")',
  });

  await server.revokeRefreshToken(next);
  const revoked = await obtain(def(c, 'refresh_token'), Buffer.from(`${next}\n${c.secret}`));
  t.same(revoked.answer, {
    ok: false,
    code: 'upstream_error',
    message: `the OAuth token endpoint answered 400 invalid_grant: ${REFUSED_REFRESH} (server: "grant request is invalid")`,
  });

  const wrong = makeCanary('WRONG');
  secrets.push(wrong);
  const badClient = await obtain(def(c, 'refresh_token'), Buffer.from(`${beyond}\n${wrong}`));
  t.same(badClient.answer, {
    ok: false,
    code: 'upstream_error',
    message: `the OAuth token endpoint answered 401 invalid_client: ${NO_CLIENT} (server: "client authentication failed")`,
  });
});

t.test('refresh token with the client in the form body: a public client, and client_auth post', async (t) => {
  const cases = [
    // A public client names itself in the body whatever client_auth says.
    { c: server.clients.publicRefresh, scope: 'reports', auth: 'basic' as const },
    { c: server.clients.refresh, scope: 'api:read', auth: 'post' as const },
  ];
  for (const { c, scope, auth } of cases) {
    const rt = await server.mintRefreshToken(c.id, [scope]);
    secrets.push(rt);
    const stored = c.secret === null ? rt : `${rt}\n${c.secret}`;
    const { answer, built } = await obtain(def(c, 'refresh_token', { client_auth: auth }), Buffer.from(stored));
    const a = ok(t, answer, c.id);
    t.same(await server.accessTokenValid(a.accessToken), { clientId: c.id, scope }, c.id);
    t.equal(built.headers.authorization, undefined, `${c.id}: no Authorization header`);
    t.same(
      Object.fromEntries(new URLSearchParams(built.body.toString())),
      {
        grant_type: 'refresh_token',
        refresh_token: rt,
        client_id: c.id,
        ...(c.secret === null ? {} : { client_secret: c.secret }),
      },
      `${c.id}: the form body`,
    );
  }
  const c = server.clients.refresh;
  // What oauthSecretParts never hands over: a grant without its secret part.
  const d = def(c, 'refresh_token');
  t.throws(() => oauthTokenRequest(d, { clientSecret: Buffer.from('s'), refreshToken: null }));
  t.throws(() => oauthTokenRequest({ ...d, grant: 'client_credentials' }, { clientSecret: null, refreshToken: null }));
});

t.test('a short access token life: expiresAt one second on, and the token then refused', async (t) => {
  const short = await startOAuthServer({ accessTokenTtlS: 1 });
  const shortAgent = new Agent({ connect: { ca: short.caCert } });
  t.teardown(async () => {
    await shortAgent.close();
    await short.close();
  });
  const c = short.clients.basic;
  secrets.push(c.secret!);
  const d = { ...def(c, 'client_credentials'), token_url: short.tokenUrl };
  const { answer, now } = await obtain(d, Buffer.from(c.secret!), short, shortAgent);
  const a = ok(t, answer, 'token');
  t.equal(a.expiresAt?.getTime(), now.getTime() + 1000);
  t.same(await short.accessTokenValid(a.accessToken), { clientId: c.id, scope: '' });
  await new Promise((r) => setTimeout(r, 2100));
  t.equal(await short.accessTokenValid(a.accessToken), null, 'expired at the server');
  t.equal(short.tokenRequests('client_credentials'), 1);
});

t.test('the server saw each token request, by grant', async (t) => {
  t.equal(server.tokenRequests('client_credentials'), sent.client_credentials);
  t.equal(server.tokenRequests('refresh_token'), sent.refresh_token);
  t.ok(sent.client_credentials! >= 5 && sent.refresh_token! >= 6);
});

t.test('the form body is what the URL Standard serialises, byte for byte', async (t) => {
  const alphabet = ' !"#$%&\'()*+,-./0123456789:;<=>?@AZaz[\\]^_`{|}~';
  for (let i = 0; i < 300; i++) {
    const secret = Array.from(randomBytes(1 + (i % 40)), (b) => alphabet[b % alphabet.length]).join('');
    const clientId = i % 3 === 0 ? 'app:ü/é' : `id ${alphabet[i % alphabet.length]}`;
    const scopes = i % 2 === 0 ? ['a:b', 'c/d+e'] : undefined;
    const d: OAuthDef = {
      token_url: 'https://x/',
      client_id: clientId,
      grant: 'client_credentials',
      client_auth: 'post',
      scopes,
    };
    const { body } = oauthTokenRequest(d, { clientSecret: Buffer.from(secret), refreshToken: null });
    const expect = new URLSearchParams(<[string, string][]>[
      ['grant_type', 'client_credentials'],
      ...(scopes ? [['scope', scopes.join(' ')] as [string, string]] : []),
      ['client_id', clientId],
      ['client_secret', secret],
    ]).toString();
    if (body.toString() !== expect) {
      t.equal(body.toString(), expect, `secret ${JSON.stringify(secret)}`);
      return;
    }
  }
  t.pass('300 bodies agree with URLSearchParams');
});

t.test('oauthSecretParts: each stored form, exactly', async (t) => {
  const canary = makeCanary('STORED');
  secrets.push(canary);
  const cc = 'give the client secret itself, on one line';
  const rt = 'give the refresh token, then (for a confidential client) a newline and the client secret';
  const rows: [string, OAuthDef['grant'], string | { clientSecret: string | null; refreshToken: string | null }][] = [
    ['', 'client_credentials', `the OAuth client secret is empty; ${cc}`],
    [`${canary}\n`, 'client_credentials', `the OAuth client secret has more than one line; ${cc}`],
    [`${canary}\nmore`, 'client_credentials', `the OAuth client secret has more than one line; ${cc}`],
    [
      `${canary}\r`,
      'client_credentials',
      `the OAuth secret's client secret contains a carriage return; ${cc}, with "\\n" line ends only`,
    ],
    [
      `${canary}\t`,
      'client_credentials',
      `the OAuth secret's client secret contains a control character (a tab, NUL...); ${cc}`,
    ],
    [
      `\x00${canary}`,
      'client_credentials',
      `the OAuth secret's client secret contains a control character (a tab, NUL...); ${cc}`,
    ],
    [
      `${canary}\x7f`,
      'client_credentials',
      `the OAuth secret's client secret contains a control character (a tab, NUL...); ${cc}`,
    ],
    [
      `${canary}\x1b[0m`,
      'client_credentials',
      `the OAuth secret's client secret contains a control character (a tab, NUL...); ${cc}`,
    ],
    [`${canary}é`, 'client_credentials', `the OAuth secret's client secret contains a byte that is not ASCII; ${cc}`],
    [`${canary} :+%~`, 'client_credentials', { clientSecret: `${canary} :+%~`, refreshToken: null }],
    ['', 'refresh_token', `the OAuth secret is empty; ${rt}`],
    ['\n', 'refresh_token', `the OAuth secret's first line (the refresh token) is empty; ${rt}`],
    [`\n${canary}`, 'refresh_token', `the OAuth secret's first line (the refresh token) is empty; ${rt}`],
    [
      `${canary}\n`,
      'refresh_token',
      `the OAuth secret's second line (the client secret) is empty; ${rt} (a public client has no second line)`,
    ],
    [`${canary}\nsecret\nthird`, 'refresh_token', `the OAuth secret has more than two lines; ${rt}`],
    [`${canary}\nsecret\n`, 'refresh_token', `the OAuth secret has more than two lines; ${rt}`],
    [`${canary}\n\n`, 'refresh_token', `the OAuth secret has more than two lines; ${rt}`],
    [
      `${canary}\r\nsecret`,
      'refresh_token',
      `the OAuth secret's refresh token contains a carriage return; ${rt}, with "\\n" line ends only`,
    ],
    [
      `${canary}\nsecret\r`,
      'refresh_token',
      `the OAuth secret's client secret contains a carriage return; ${rt}, with "\\n" line ends only`,
    ],
    [
      `${canary}\x00`,
      'refresh_token',
      `the OAuth secret's refresh token contains a control character (a tab, NUL...); ${rt}`,
    ],
    [
      `${canary}\nsec\tret`,
      'refresh_token',
      `the OAuth secret's client secret contains a control character (a tab, NUL...); ${rt}`,
    ],
    [`${canary}\nsecrét`, 'refresh_token', `the OAuth secret's client secret contains a byte that is not ASCII; ${rt}`],
    [`${canary}`, 'refresh_token', { clientSecret: null, refreshToken: canary }],
    [`${canary}\n${canary}-s`, 'refresh_token', { clientSecret: `${canary}-s`, refreshToken: canary }],
  ];
  for (const [input, grant, expect] of rows) {
    const got = oauthSecretParts(Buffer.from(input), grant);
    const name = `${grant} ${JSON.stringify(input.replace(canary, 'CANARY'))}`;
    if (typeof expect === 'string') {
      t.same(got, { ok: false, problem: expect }, name);
      if (!got.ok) shown(got.problem);
    } else {
      t.same(
        got.ok && {
          clientSecret: got.clientSecret?.toString() ?? null,
          refreshToken: got.refreshToken?.toString() ?? null,
        },
        expect,
        name,
      );
    }
  }
  // Views, not copies: wiping the stored secret wipes the parts.
  const stored = Buffer.from(`${canary}\n${canary}-s`);
  const parts = partsOf(stored, 'refresh_token');
  stored.fill(0);
  t.ok(
    parts.refreshToken!.every((b) => b === 0) && parts.clientSecret!.every((b) => b === 0),
    'parts wiped with the secret',
  );
});

t.test('parseOAuthTokenResponse: every answer, exactly', async (t) => {
  const now = new Date('2026-01-01T00:00:00Z');
  const token = makeCanary('ACCESS');
  const rotated = makeCanary('ROTATED');
  secrets.push(token, rotated);
  const at = 'the OAuth token answer (200)';
  const usable = '(visible ASCII, at most 8192)';
  const ep = 'the OAuth token endpoint answered';
  const json = (v: unknown) => Buffer.from(JSON.stringify(v));
  const good = (extra: Record<string, unknown>) => json({ access_token: token, token_type: 'Bearer', ...extra });
  const rows: [string, number, Buffer, string | Record<string, unknown>][] = [
    ['not JSON', 200, Buffer.from('hello'), `${at} is not a JSON object`],
    ['a JSON array', 200, json([token]), `${at} is not a JSON object`],
    ['JSON null', 200, Buffer.from('null'), `${at} is not a JSON object`],
    ['empty', 200, Buffer.alloc(0), `${at} is not a JSON object`],
    ['no access_token', 200, json({ token_type: 'Bearer' }), `${at} has no "access_token"`],
    ['access_token null', 200, json({ access_token: null, token_type: 'Bearer' }), `${at} has no "access_token"`],
    [
      'access_token empty',
      200,
      good({ access_token: '' }),
      `${at} has an "access_token" that is not a usable token ${usable}`,
    ],
    [
      'access_token number',
      200,
      good({ access_token: 12345 }),
      `${at} has an "access_token" that is not a usable token ${usable}`,
    ],
    [
      'access_token space',
      200,
      good({ access_token: `${token} x` }),
      `${at} has an "access_token" that is not a usable token ${usable}`,
    ],
    [
      'access_token newline',
      200,
      good({ access_token: `${token}\r\nX-Evil: 1` }),
      `${at} has an "access_token" that is not a usable token ${usable}`,
    ],
    [
      'access_token non-ASCII',
      200,
      good({ access_token: `${token}é` }),
      `${at} has an "access_token" that is not a usable token ${usable}`,
    ],
    [
      'access_token 8193',
      200,
      good({ access_token: 'a'.repeat(8193) }),
      `${at} has an "access_token" that is not a usable token ${usable}`,
    ],
    [
      'access_token 8192',
      200,
      good({ access_token: 'a'.repeat(8192) }),
      { accessToken: 'a'.repeat(8192), expiresAt: null, refreshToken: null, scope: null },
    ],
    ['no token_type', 200, json({ access_token: token }), `${at} has no "token_type"`],
    [
      'token_type mac',
      200,
      good({ token_type: 'mac' }),
      `${at} has "token_type" MAC; postern sends Bearer tokens only`,
    ],
    [
      'token_type DPoP',
      200,
      good({ token_type: 'DPoP' }),
      `${at} has "token_type" DPoP; postern sends Bearer tokens only`,
    ],
    [
      'token_type named like a property every object has',
      200,
      good({ token_type: 'constructor' }),
      `${at} has a "token_type" other than Bearer; postern sends Bearer tokens only`,
    ],
    [
      'token_type echoing the token',
      200,
      good({ token_type: token }),
      `${at} has a "token_type" other than Bearer; postern sends Bearer tokens only`,
    ],
    [
      'token_type number',
      200,
      good({ token_type: 1 }),
      `${at} has a "token_type" other than Bearer; postern sends Bearer tokens only`,
    ],
    [
      'token_type bEaReR',
      200,
      good({ token_type: 'bEaReR' }),
      { accessToken: token, expiresAt: null, refreshToken: null, scope: null },
    ],
    [
      'expires_in negative',
      200,
      good({ expires_in: -5 }),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in 0',
      200,
      good({ expires_in: 0 }),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in float',
      200,
      good({ expires_in: 1.5 }),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in string',
      200,
      good({ expires_in: '3600' }),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in true',
      200,
      good({ expires_in: true }),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in 2^31',
      200,
      good({ expires_in: 2 ** 31 }),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in 1e400',
      200,
      Buffer.from(`{"access_token":"${token}","token_type":"Bearer","expires_in":1e400}`),
      `${at} has an "expires_in" that is not a positive whole number of seconds`,
    ],
    [
      'expires_in null',
      200,
      good({ expires_in: null }),
      { accessToken: token, expiresAt: null, refreshToken: null, scope: null },
    ],
    [
      'expires_in 3600',
      200,
      good({ expires_in: 3600, scope: 'a b' }),
      { accessToken: token, expiresAt: new Date('2026-01-01T01:00:00Z'), refreshToken: null, scope: 'a b' },
    ],
    [
      'refresh_token rotated',
      200,
      good({ refresh_token: rotated, expires_in: 60 }),
      { accessToken: token, expiresAt: new Date('2026-01-01T00:01:00Z'), refreshToken: rotated, scope: null },
    ],
    [
      'refresh_token empty',
      200,
      good({ refresh_token: '' }),
      `${at} has a "refresh_token" that is not a usable token ${usable}`,
    ],
    [
      'refresh_token with space',
      200,
      good({ refresh_token: `${rotated} x` }),
      `${at} has a "refresh_token" that is not a usable token ${usable}`,
    ],
    [
      'refresh_token object',
      200,
      good({ refresh_token: { value: rotated } }),
      `${at} has a "refresh_token" that is not a usable token ${usable}`,
    ],
    ['scope number', 200, good({ scope: 5 }), `${at} has a "scope" that is not a string`],
    [
      'huge body',
      200,
      good({ pad: 'x'.repeat(MAX_OAUTH_ANSWER_BYTES) }),
      `${at} is over 65536 bytes; it is not a token answer`,
    ],
    ['an error with 200', 200, json({ error: 'invalid_grant' }), `${ep} 200 invalid_grant: ${REFUSED_REFRESH}`],
    [
      '500 HTML',
      500,
      Buffer.from(`<html><body>${token}</body></html>`),
      `${ep} 500: the server failed; try again later`,
    ],
    [
      '503 server_error',
      503,
      json({ error: 'temporarily_unavailable' }),
      `${ep} 503 temporarily_unavailable: the server is temporarily unavailable; try again later`,
    ],
    [
      '400 HTML',
      400,
      Buffer.from('<html>Bad</html>'),
      `${ep} 400 without an OAuth error (a JSON object with "error"); check token_url`,
    ],
    ['401 empty', 401, Buffer.alloc(0), `${ep} 401: ${NO_CLIENT}`],
    [
      '404',
      404,
      Buffer.from('Not Found'),
      `${ep} 404 without an OAuth error (a JSON object with "error"); check token_url`,
    ],
    ['201', 201, good({}), `${ep} 201; a token answer comes with 200 (RFC 6749 §5.1)`],
    ['302', 302, Buffer.alloc(0), `${ep} 302 (a redirect, not followed); check token_url`],
    [
      'invalid_grant with prose',
      400,
      json({ error: 'invalid_grant', error_description: 'grant request is invalid' }),
      `${ep} 400 invalid_grant: ${REFUSED_REFRESH} (server: "grant request is invalid")`,
    ],
    [
      'invalid_grant echoing the token',
      400,
      json({ error: 'invalid_grant', error_description: `refresh token ${rotated} was revoked` }),
      `${ep} 400 invalid_grant: ${REFUSED_REFRESH}`,
    ],
    [
      'a short secret echoed',
      400,
      json({ error: 'invalid_client', error_description: 'secret hunter2 is wrong' }),
      `${ep} 400 invalid_client: ${NO_CLIENT}`,
    ],
    [
      'description with a quote',
      400,
      json({ error: 'invalid_request', error_description: 'bad "x"' }),
      `${ep} 400 invalid_request: the server found the token request malformed (a parameter missing, repeated or not supported)`,
    ],
    [
      'description with a newline',
      400,
      json({ error: 'invalid_scope', error_description: 'bad\nscope' }),
      `${ep} 400 invalid_scope: the scopes asked for are unknown to the server or more than the client may have; check scopes`,
    ],
    [
      'description too long',
      400,
      json({ error: 'unauthorized_client', error_description: 'word '.repeat(50) }),
      `${ep} 400 unauthorized_client: this client may not use this grant; check the grant of the definition and the client at the server`,
    ],
    [
      'error code echoing the token',
      400,
      json({ error: token }),
      `${ep} 400 with an error code that is not a standard OAuth one`,
    ],
    [
      'error code __proto__',
      400,
      json({ error: '__proto__' }),
      `${ep} 400 with an error code that is not a standard OAuth one`,
    ],
    [
      'error code not a string',
      400,
      json({ error: 7 }),
      `${ep} 400 without an OAuth error (a JSON object with "error"); check token_url`,
    ],
    [
      'unsupported_grant_type',
      400,
      json({ error: 'unsupported_grant_type' }),
      `${ep} 400 unsupported_grant_type: the server does not support this grant`,
    ],
    [
      'access_denied',
      403,
      json({ error: 'access_denied', error_description: 'Access denied.' }),
      `${ep} 403 access_denied: the server denied the request (server: "Access denied.")`,
    ],
  ];
  for (const [name, status, body, expect] of rows) {
    const got = parseOAuthTokenResponse(status, body, now);
    if (typeof expect === 'string') {
      t.same(got, { ok: false, code: 'upstream_error', message: expect }, name);
      if (!got.ok) shown(got.message);
    } else t.same(got, { ok: true, ...expect }, name);
  }
});

t.test('no message carries a secret or a token', async (t) => {
  t.ok(messages.length > 60, `${messages.length} messages searched`);
  t.ok(secrets.length > 15, `${secrets.length} secrets searched for`);
  const hay = messages.join('\n');
  for (const s of secrets) t.same(findCanary(hay, s), [], `no encoding of a ${s.slice(0, 6)}… secret`);
});
