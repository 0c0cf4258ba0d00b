// Adversarial rows for the OAuth 2.0 token cache (SPEC §13, §1): a token, and
// a refresh token a server rotates, must belong to the vault state a human
// left, never to one they replaced or locked away. The token endpoint here
// is a hand-written stand-in on the test's own HTTPS server (test CA), so a
// row can hold its answer while a human acts: `postern lock`, or
// `postern cred update NAME --secret-file` with a new secret. Also: requests
// racing one refresh that the server rotates; the agent's timeout_ms against
// a slow token endpoint; and an upstream that echoes the access token, the
// refresh token and the client secret encoded (base64, hex, percent, JSON
// escapes), found by the independent detector in test/helpers/exposure.ts.
import t from 'tap';
import type { Test } from 'tap';
import { createHash } from 'node:crypto';
import { startStack, type Stack } from '../helpers/stack';
import { cliAsync, eventually } from '../helpers/postern';
import { exposures } from '../helpers/exposure';
import { journalText } from '../helpers/canary';

const HOST = 'api.example.test';

interface TokenCall {
  grant: string;
  refreshToken: string | null;
  clientSecret: string | null; // from HTTP Basic (form-decoded)
}

interface Endpoint {
  calls: TokenCall[];
  // Issued access tokens: which secret (client secret or refresh token) each came from.
  issuedFor: Map<string, string>;
  // Refresh tokens the server still honours (rotation spends them).
  liveRefresh: Set<string>;
  apiSeen: string[]; // Authorization headers the API got
  hold: Promise<void> | null; // while set, token answers wait for it
  delayMs: number;
  expiresIn: number;
  echo: ((token: string) => string) | null; // what the API answers with the token it got
}

function formDecode(s: string): string {
  return decodeURIComponent(s.replace(/\+/g, ' '));
}

function basicSecret(header: string | undefined): string | null {
  const m = /^Basic (\S+)$/.exec(header ?? '');
  if (!m) return null;
  const pair = Buffer.from(m[1]!, 'base64').toString('utf8');
  return formDecode(pair.slice(pair.indexOf(':') + 1));
}

let counter = 0;
const fresh = (prefix: string) =>
  `${prefix}-${createHash('sha256').update(`${process.pid}:${Date.now()}:${counter++}`).digest('hex').slice(0, 32)}`;

async function setup(t: Test): Promise<{ s: Stack; ep: Endpoint; tokenUrl: string }> {
  const ep: Endpoint = {
    calls: [],
    issuedFor: new Map(),
    liveRefresh: new Set(),
    apiSeen: [],
    hold: null,
    delayMs: 0,
    expiresIn: 3600,
    echo: null,
  };
  const s = await startStack({
    names: [HOST],
    records: { [HOST]: { A: ['127.0.0.1'] } },
    handler: async (req, body, res) => {
      if ((req.url ?? '').startsWith('/moved')) {
        ep.calls.push({ grant: 'moved', refreshToken: null, clientSecret: basicSecret(req.headers.authorization) });
        res.writeHead(307, { location: `/token` }).end();
        return;
      }
      if ((req.url ?? '').startsWith('/token')) {
        const form = new URLSearchParams(body.toString('latin1'));
        const call: TokenCall = {
          grant: form.get('grant_type') ?? '',
          refreshToken: form.get('refresh_token'),
          clientSecret: basicSecret(req.headers.authorization),
        };
        ep.calls.push(call);
        if (ep.hold) await ep.hold;
        if (ep.delayMs > 0) await new Promise((r) => setTimeout(r, ep.delayMs));
        if (call.grant === 'refresh_token') {
          if (call.refreshToken === null || !ep.liveRefresh.has(call.refreshToken)) {
            res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant' }));
            return;
          }
          ep.liveRefresh.delete(call.refreshToken);
          const rotated = fresh('rt-rotated');
          ep.liveRefresh.add(rotated);
          const access = fresh('at');
          ep.issuedFor.set(access, call.refreshToken);
          res.writeHead(200, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              access_token: access,
              token_type: 'Bearer',
              expires_in: ep.expiresIn,
              refresh_token: rotated,
            }),
          );
          return;
        }
        const access = fresh('at');
        ep.issuedFor.set(access, call.clientSecret ?? '');
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ access_token: access, token_type: 'Bearer', expires_in: ep.expiresIn }));
        return;
      }
      const auth = String(req.headers.authorization ?? '');
      ep.apiSeen.push(auth);
      const token = auth.replace(/^Bearer /, '');
      const known = ep.issuedFor.has(token);
      res
        .writeHead(known ? 200 : 401, { 'content-type': 'application/json' })
        .end(known && ep.echo ? ep.echo(token) : JSON.stringify({ ok: known }));
    },
  });
  t.teardown(() => s.close());
  await s.approver();
  return { s, ep, tokenUrl: `https://${HOST}:${s.up.port}/token` };
}

function definition(name: string, tokenUrl: string, grant: 'client_credentials' | 'refresh_token'): string {
  return `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject.oauth2]\ntoken_url = "${tokenUrl}"\nclient_id = "app"\ngrant = "${grant}"\n[[allow]]\nhost = "${HOST}"\nmethods = ["GET"]\nports = [${new URL(tokenUrl).port}]\npaths = ["/v1/*"]\n`;
}

async function updateSecret(s: Stack, name: string, def: string, secret: string): Promise<void> {
  const r = await cliAsync(s.h, [
    'cred',
    'update',
    name,
    '--file',
    s.h.file(`${name}-update.toml`, def),
    '--secret-file',
    s.h.file(`${name}-update.secret`, secret),
    '--passphrase-file',
    s.h.passFile,
  ]);
  if (r.code !== 0) throw new Error(`cred update ${name}: ${r.stderr}`);
}

function gate(ep: Endpoint): () => void {
  let open: () => void = () => undefined;
  ep.hold = new Promise<void>((r) => (open = r));
  return () => {
    ep.hold = null;
    open();
  };
}

const get = (s: Stack, name: string, extra: Record<string, unknown> = {}) =>
  s.request({ credential: name, method: 'GET', url: `https://${HOST}:${s.up.port}/v1/items`, ...extra });

const status = (r: { json: unknown }) => (r.json as { status?: number } | null)?.status;

t.test('a token obtained while the vault was being locked does not outlive the lock', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  s.addCredential('cc', definition('cc', tokenUrl, 'client_credentials'), 'client-secret-one-0123456789');
  const release = gate(ep);
  const first = get(s, 'cc');
  t.ok(await eventually(() => ep.calls.length === 1), 'the token request reached the endpoint');
  const lock = await cliAsync(s.h, ['lock']);
  t.equal(lock.code, 0, lock.stderr);
  release();
  const r1 = await first;
  t.comment(`the request in flight across the lock answered ${r1.status} ${r1.text.slice(0, 200)}`);
  const unlock = await cliAsync(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
  t.equal(unlock.code, 0, unlock.stderr);
  await s.approver();
  const r2 = await get(s, 'cc');
  t.equal(status(r2), 200, r2.text);
  t.equal(ep.calls.length, 2, 'the first request after unlock obtains a new token (none survives the lock)');
});

t.test('a secret replaced while a token is being obtained: later requests use the new secret', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  const def = definition('cc', tokenUrl, 'client_credentials');
  const oldSecret = 'old-client-secret-0123456789';
  const newSecret = 'new-client-secret-9876543210';
  s.addCredential('cc', def, oldSecret);
  const release = gate(ep);
  const first = get(s, 'cc');
  t.ok(await eventually(() => ep.calls.length === 1), 'the token request reached the endpoint');
  // The human rotates the client secret (e.g. the old one leaked).
  await updateSecret(s, 'cc', def, newSecret);
  release();
  await first;
  const r2 = await get(s, 'cc');
  t.equal(status(r2), 200, r2.text);
  const used = ep.apiSeen.at(-1)!.replace(/^Bearer /, '');
  t.equal(
    ep.issuedFor.get(used),
    newSecret,
    'the request after the update carries a token obtained with the new client secret',
  );
});

t.test('a refresh rotated in flight does not overwrite a refresh token the human stored meanwhile', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  ep.expiresIn = 1; // kept half a second: the next request refreshes again
  const def = definition('rt', tokenUrl, 'refresh_token');
  const accountA = fresh('rt-account-a');
  const accountB = fresh('rt-account-b');
  ep.liveRefresh.add(accountA);
  ep.liveRefresh.add(accountB);
  s.addCredential('rt', def, `${accountA}\nclient-secret-0123456789`);
  const release = gate(ep);
  const first = get(s, 'rt');
  t.ok(await eventually(() => ep.calls.length === 1), 'the refresh reached the endpoint');
  // The human replaces the refresh token (another account) while the refresh is in flight.
  await updateSecret(s, 'rt', def, `${accountB}\nclient-secret-0123456789`);
  release();
  await first;
  await new Promise((r) => setTimeout(r, 1100));
  const r2 = await get(s, 'rt');
  t.equal(status(r2), 200, r2.text);
  t.equal(ep.calls.at(-1)?.refreshToken, accountB, 'the next refresh spends the refresh token the human stored');
});

t.test('requests racing one refresh spend the refresh token once, and all succeed', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  const rt = fresh('rt-race');
  ep.liveRefresh.add(rt);
  ep.delayMs = 300;
  s.addCredential('rt', definition('rt', tokenUrl, 'refresh_token'), `${rt}\nclient-secret-0123456789`);
  // One first, so the session is approved; its refresh is then held while others come.
  const replies = await Promise.all([0, 1, 2, 3, 4].map(() => get(s, 'rt')));
  for (const r of replies) t.equal(status(r), 200, r.text);
  t.equal(ep.calls.filter((c) => c.grant === 'refresh_token').length, 1, 'one refresh for all of them');
});

t.test('a slow token endpoint: the agent’s timeout_ms still bounds the request', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  s.addCredential('cc', definition('cc', tokenUrl, 'client_credentials'), 'client-secret-0123456789');
  // Approved first, with a token cached; then the cache is emptied by a lock.
  t.equal(status(await get(s, 'cc')), 200);
  t.equal((await cliAsync(s.h, ['lock'])).code, 0);
  t.equal((await cliAsync(s.h, ['unlock', '--passphrase-file', s.h.passFile])).code, 0);
  await s.approver();
  t.equal(status(await get(s, 'cc')), 200, 'approved again');
  t.equal((await cliAsync(s.h, ['lock'])).code, 0);
  t.equal((await cliAsync(s.h, ['unlock', '--passphrase-file', s.h.passFile])).code, 0);
  await s.approver();
  const wait = gate(ep);
  t.teardown(wait);
  // Approval is a fresh card each unlock; measure from the token request on.
  const started = Date.now();
  const r = get(s, 'cc', { timeout_ms: 1000 });
  // The endpoint never answers; the daemon gives up on it on its own clock.
  const reply = await Promise.race([r, new Promise<null>((res) => setTimeout(() => res(null), 15000))]);
  const took = Date.now() - started;
  wait();
  t.comment(`timeout_ms 1000, token endpoint silent: answered after ${took} ms: ${reply?.text.slice(0, 300)}`);
  t.not(reply, null, `an answer within 15 s (took ${took} ms)`);
  if (reply) {
    t.equal(reply.status, 504, reply.text);
    t.equal((reply.json as { error?: { code: string } }).error?.code, 'upstream_timeout');
  }
  t.ok(took < 4000, `answered within a few seconds of timeout_ms 1000 (took ${took} ms)`);
});

t.test('an upstream echoing the access token, refresh token and client secret encoded: all redacted', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  const rt = fresh('rt-echo');
  const clientSecret = 'echo-client-secret-ABCDEFGHIJ0123456789';
  ep.liveRefresh.add(rt);
  ep.echo = (token) => {
    const both = [token, rt, ...ep.liveRefresh, clientSecret];
    const parts: Record<string, string> = {};
    both.forEach((v, i) => {
      const b = Buffer.from(v, 'utf8');
      parts[`raw${i}`] = v;
      parts[`b64${i}`] = b.toString('base64');
      parts[`b64u${i}`] = Buffer.concat([Buffer.from('x:'), b]).toString('base64url');
      parts[`hex${i}`] = b.toString('hex').toUpperCase();
      parts[`pct${i}`] = [...b].map((c) => `%${c.toString(16).padStart(2, '0')}`).join('');
      parts[`json${i}`] = [...v].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
    });
    // The JSON escapes must reach the reply as written: built by hand.
    return `{${Object.entries(parts)
      .map(([k, v]) => `"${k}":"${v}"`)
      .join(',')}}`;
  };
  s.addCredential('rt', definition('rt', tokenUrl, 'refresh_token'), `${rt}\n${clientSecret}`);
  const r = await get(s, 'rt');
  t.equal(status(r), 200, r.text);
  const rotated = [...ep.liveRefresh][0]!;
  const token = ep.apiSeen.at(-1)!.replace(/^Bearer /, '');
  const emitted = [r.text, s.d.logs(), await journalText(s.h)].join('\n');
  t.same(exposures(emitted, token), [], 'no form of the access token');
  t.same(exposures(emitted, clientSecret), [], 'no form of the client secret');
  t.same(exposures(emitted, rt), [], 'no form of the refresh token spent');
  t.same(exposures(emitted, rotated), [], 'no form of the rotated refresh token the vault now holds');
  t.ok((r.json as { redactions: number }).redactions >= 12, 'each echo counted');
});

t.test('a token endpoint that redirects: not followed, the credentials not sent on, nothing sent', async (t) => {
  const { s, ep, tokenUrl } = await setup(t);
  // A 307 keeps method and body: a client that followed it would post the
  // client secret again to the Location.
  s.addCredential(
    'cc',
    definition('cc', tokenUrl.replace('/token', '/moved'), 'client_credentials'),
    'moved-secret-0123456789',
  );
  const r = await get(s, 'cc');
  t.equal(r.status, 502, r.text);
  const err = (r.json as { error: { code: string; message: string; maybe_executed: boolean } }).error;
  t.equal(err.code, 'upstream_error');
  t.match(err.message, /307 \(a redirect, not followed\)/);
  t.equal(err.maybe_executed, false);
  t.same(
    ep.calls.map((c) => c.grant),
    ['moved'],
    'only the configured endpoint was asked; the Location was not',
  );
  t.equal(ep.apiSeen.length, 0, 'the API request was not sent');
  t.same(exposures([r.text, s.d.logs()].join('\n'), 'moved-secret-0123456789'), []);
});
