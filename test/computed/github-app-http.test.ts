// A GitHub App credential end to end (SPEC §13) through the real daemon:
// postern signs the app JWT, obtains an installation token from a stand-in
// of GitHub's token endpoint that verifies the JWT with the app's public
// key and checks the narrowing, caches it, and sends the agent's request
// with `Authorization: Bearer <token>`. The token endpoint is a checked
// target (a blocked address is refused, nothing sent); its failures are
// refusals naming it; the card and the journal name the kind and the
// endpoint; lock forgets the token; the app key and the tokens never appear
// in what postern emits.
import t from 'tap';
import type { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, auditList, type Stack, type Card } from '../helpers/stack';
import { startGithubAppServer, type AppServer } from '../helpers/github-app-server';
import { cli } from '../helpers/postern';
import { cliBytes } from '../helpers/cli-bytes';
import { findCanary, journalText } from '../helpers/canary';

const APP_ID = 4242;
const INSTALLATION = 99;

interface Setup {
  s: Stack;
  app: AppServer;
  keyPem: string;
  cards: Card[];
  apiSeen: { authorization: string | undefined; url: string }[];
}

async function setup(
  t: Test,
  o: { records?: Record<string, { A: string[] }>; tokenLifeS?: number; tokenDelayMs?: number } = {},
): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'pt-ghapp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('openssl', ['genrsa', '-out', join(dir, 'app.pem'), '2048'], { stdio: 'ignore' });
  const keyPem = readFileSync(join(dir, 'app.pem'), 'utf8');
  const s = await startStack({
    records: { 'api.example.test': { A: ['127.0.0.1'] }, ...(o.records ?? {}) },
  });
  t.teardown(() => s.close());
  const apiSeen: Setup['apiSeen'] = [];
  const app = await startGithubAppServer({
    appId: APP_ID,
    publicKey: keyPem,
    installations: {
      [INSTALLATION]: { repositories: ['app', 'docs'], permissions: { contents: 'write', issues: 'read' } },
    },
    ca: s.ca,
    host: 'api.example.test',
    ...(o.tokenLifeS !== undefined ? { tokenLifeS: o.tokenLifeS } : {}),
    ...(o.tokenDelayMs !== undefined ? { tokenDelayMs: o.tokenDelayMs } : {}),
    api: (req, _body, res) => {
      apiSeen.push({ authorization: req.headers.authorization, url: req.url ?? '' });
      const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
      const known = app.issued.find((i) => i.token === token);
      const body = Buffer.from(
        JSON.stringify(known ? { ok: true, echoed: req.headers.authorization } : { message: 'Bad credentials' }),
      );
      res.writeHead(known ? 200 : 401, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    },
  });
  t.teardown(() => app.close());
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'session', root_key: card.process.key };
  });
  return { s, app, keyPem, cards, apiSeen };
}

function definition(app: AppServer, extra = ''): string {
  const port = new URL(app.api).port;
  return `name = "bot"\nkind = "http"\nenv = ["GH_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject.github_app]\napp_id = ${APP_ID}\ninstallation_id = ${INSTALLATION}\napi = "${app.api}"\n${extra}\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/repos/*"]\n`;
}

function addBot(x: Setup, extra = ''): { code: number | null; stdout: string; stderr: string } {
  return cli(x.s.h, [
    'cred',
    'add',
    '--file',
    x.s.h.file('bot.toml', definition(x.app, extra)),
    '--secret-file',
    x.s.h.file('bot.pem', x.keyPem),
    '--passphrase-file',
    x.s.h.passFile,
  ]);
}

const get = (x: Setup, path = '/repos/acme/app') =>
  x.s.request({ credential: 'bot', method: 'GET', url: `${x.app.api}${path}` });

t.test('a request gets an installation token, cached for the next, redacted in the reply', async (t) => {
  const x = await setup(t);
  const add = addBot(x, 'repositories = ["app"]\npermissions = { contents = "read" }');
  t.equal(add.code, 0, add.stderr);
  const r = await get(x);
  t.equal(r.status, 200, r.text);
  const reply = r.json as { status: number; body: string };
  t.equal(reply.status, 200, 'the API accepted the token');
  t.equal(x.app.issued.length, 1, 'one token issued');
  const token = x.app.issued[0]!.token;
  t.same(x.app.issued[0]!.repositories, ['app'], 'narrowed to the repositories named');
  t.same(x.app.issued[0]!.permissions, { contents: 'read' }, 'and the permissions');
  t.equal(x.apiSeen.at(-1)?.authorization, `Bearer ${token}`);
  t.notMatch(reply.body, token, 'the echoed token is redacted');
  t.match(reply.body, /\[REDACTED:bot\]/);
  const again = await get(x, '/repos/acme/app/issues');
  t.equal((again.json as { status: number }).status, 200);
  t.equal(x.app.issued.length, 1, 'the cached token is used: no second token request');
  t.equal(x.apiSeen.at(-1)?.authorization, `Bearer ${token}`);
  // The card and the journal name the kind and the endpoint.
  const endpoint = `${x.app.api}/app/installations/${INSTALLATION}/access_tokens`;
  t.equal(x.cards[0]?.action['computed'], 'github_app');
  t.equal(x.cards[0]?.action['token_endpoint'], endpoint);
  const intents = auditList(x.s).filter((e) => e['kind'] === 'http_intent');
  t.equal(intents.length, 2);
  t.match(intents[0], { computed: 'github_app', token_endpoint: endpoint });
  // Nothing postern emitted holds the app key or the token.
  const emitted = [r.text, again.text, add.stdout, add.stderr, x.s.d.logs(), await journalText(x.s.h)].join('\n');
  for (const line of x.keyPem.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----')))
    t.same(findCanary(emitted, line), [], 'no line of the app key');
  t.same(findCanary(emitted, token), [], 'no form of the token');
});

t.test('through postern run: a client sends its placeholder as `token …` or `Bearer …`', async (t) => {
  const x = await setup(t);
  t.equal(addBot(x).code, 0);
  for (const scheme of ['token', 'Bearer']) {
    const r = await cliBytes({ ...x.s.h.env }, [
      'run',
      '--credential',
      'bot',
      '--',
      'sh',
      '-c',
      `curl -sS -H "Authorization: ${scheme} $GH_TOKEN" ${x.app.api}/repos/acme/app`,
    ]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout.toString(), /"ok":true/, `${scheme}: the API accepted the installation token`);
    t.match(r.stdout.toString(), /\[REDACTED:bot\]/, 'its echo redacted');
    t.match(x.apiSeen.at(-1)?.authorization, /^Bearer /);
    t.notMatch(x.apiSeen.at(-1)?.authorization, /postern-bot-/, 'the placeholder never reached the API');
  }
  t.equal(x.app.issued.length, 1, 'one token for both');
});

t.test('a token near its expiry is replaced before the request', async (t) => {
  // A 2 s token is kept for half its life, then obtained again.
  const x = await setup(t, { tokenLifeS: 2 });
  t.equal(addBot(x).code, 0);
  t.equal(((await get(x)).json as { status: number }).status, 200);
  t.equal(((await get(x)).json as { status: number }).status, 200);
  t.equal(x.app.issued.length, 1, 'cached while it has life left');
  await new Promise((r) => setTimeout(r, 1300));
  const r = await get(x);
  t.equal((r.json as { status: number }).status, 200, r.text);
  t.equal(x.app.issued.length, 2, 'a new token before the request');
  t.equal(x.apiSeen.at(-1)?.authorization, `Bearer ${x.app.issued[1]!.token}`);
});

t.test('requests that need a token at once share one token request', async (t) => {
  // Tokens of 2 s are replaced after 1 s; the endpoint takes 300 ms to
  // answer, so six requests made together all find the token to replace.
  const x = await setup(t, { tokenLifeS: 2, tokenDelayMs: 300 });
  t.equal(addBot(x).code, 0);
  t.equal((await get(x)).status, 200, 'the first request, approved for the session');
  t.equal(x.app.issued.length, 1);
  await new Promise((r) => setTimeout(r, 1100));
  const replies = await Promise.all(Array.from({ length: 6 }, () => get(x)));
  for (const r of replies) t.equal((r.json as { status: number }).status, 200, r.text);
  t.equal(x.app.issued.length, 2, 'one token request for the six');
  const fresh = x.app.issued[1]!.token;
  t.ok(
    x.apiSeen.slice(-6).every((seen) => seen.authorization === `Bearer ${fresh}`),
    'each sent the new token',
  );
});

t.test('lock forgets the token; the next request after unlock obtains a new one', async (t) => {
  const x = await setup(t);
  t.equal(addBot(x).code, 0);
  t.equal((await get(x)).status, 200);
  t.equal(cli(x.s.h, ['lock']).code, 0);
  t.equal(cli(x.s.h, ['unlock', '--passphrase-file', x.s.h.passFile]).code, 0);
  await x.s.approver((card) => ({ decision: 'session', root_key: card.process.key }));
  const r = await get(x);
  t.equal((r.json as { status: number }).status, 200, r.text);
  t.equal(x.app.issued.length, 2, 'a second token after the lock');
});

t.test('a token endpoint that refuses: upstream_error naming it, the request not sent', async (t) => {
  const x = await setup(t);
  t.equal(addBot(x).code, 0);
  const rows: [number, string, RegExp][] = [
    [401, '{"message":"A JSON web token could not be decoded"}', /401/],
    [404, '{"message":"Not Found"}', /404/],
    [500, '<html>oops</html>', /500/],
    [201, '{"token": 5}', /token/],
  ];
  for (const [status, body, words] of rows) {
    x.app.answerNext(status, body);
    const before = x.apiSeen.length;
    const r = await get(x);
    t.equal(r.status, 502, `${status}: ${r.text}`);
    const err = (r.json as { error: { code: string; message: string; maybe_executed?: boolean } }).error;
    t.equal(err.code, 'upstream_error');
    t.match(err.message, /access_tokens/, 'names the token endpoint');
    t.match(err.message, words);
    t.equal(x.apiSeen.length, before, 'the API request was not sent');
  }
  const outcomes = auditList(x.s).filter((e) => e['kind'] === 'http_outcome');
  t.ok(outcomes.length >= rows.length);
  for (const o of outcomes.slice(-rows.length)) t.match(o, { error: 'upstream_error', maybe_executed: false });
});

t.test('narrowing beyond the installation: the endpoint says 422, refused', async (t) => {
  const x = await setup(t);
  t.equal(addBot(x, 'repositories = ["secret-repo"]').code, 0);
  const r = await get(x);
  t.equal(r.status, 502, r.text);
  t.match((r.json as { error: { message: string } }).error.message, /422/);
  t.equal(x.app.issued.length, 0);
});

t.test('a token endpoint on a blocked address is refused before anything is sent', async (t) => {
  const x = await setup(t, { records: { 'meta.example.test': { A: ['169.254.169.254'] } } });
  const port = new URL(x.app.api).port;
  const def = definition(x.app).replace(`api = "${x.app.api}"`, `api = "https://meta.example.test:${port}"`);
  const add = cli(x.s.h, [
    'cred',
    'add',
    '--file',
    x.s.h.file('bot.toml', def),
    '--secret-file',
    x.s.h.file('bot.pem', x.keyPem),
    '--passphrase-file',
    x.s.h.passFile,
  ]);
  t.equal(add.code, 0, add.stderr);
  const before = x.app.requests.length;
  const r = await get(x);
  t.equal(r.status, 403, r.text);
  t.equal((r.json as { error: { code: string } }).error.code, 'denied_address');
  t.equal(x.app.requests.length, before, 'nothing reached any server');
});

t.test('cred add refuses a key that is not an RSA private key, naming why', async (t) => {
  const x = await setup(t);
  const dir = mkdtempSync(join(tmpdir(), 'pt-ghapp-ec-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('openssl', ['ecparam', '-genkey', '-name', 'prime256v1', '-noout', '-out', join(dir, 'ec.pem')]);
  const rows: [string, RegExp][] = [
    [readFileSync(join(dir, 'ec.pem'), 'utf8'), /not RSA/],
    ['ghp_notakeyatall', /not in PEM form/],
  ];
  for (const [secret, why] of rows) {
    const r = cli(x.s.h, [
      'cred',
      'add',
      '--file',
      x.s.h.file('bot.toml', definition(x.app)),
      '--secret-file',
      x.s.h.file('bad.pem', secret),
      '--passphrase-file',
      x.s.h.passFile,
    ]);
    t.equal(r.code, 1, r.stderr);
    t.match(r.stderr, why);
  }
});
