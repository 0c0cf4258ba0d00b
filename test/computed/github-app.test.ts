// GitHub App installation tokens (SPEC §13). Keys are made fresh with
// Debian's openssl (RSA in PKCS#1 and PKCS#8, and keys GitHub would never
// issue). Every app JWT is verified by `openssl dgst -sha256 -verify` with
// the app's public key and its claims decoded; the token request built by
// installationTokenRequest is sent by undici to a stand-in for GitHub's
// endpoint that verifies the JWT with node:crypto and checks the narrowing,
// and every answer, GitHub's and hostile ones, is read by
// parseInstallationToken with its exact outcome. No message may carry the
// private key, the JWT or a token.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import {
  MAX_TOKEN_ANSWER_BYTES,
  TokenCache,
  appJwt,
  githubAppKeyProblem,
  installationTokenRequest,
  parseInstallationToken,
} from '../../daemon/pipeline/computed/github-app';
import { packageVersion } from '../../shared/version';
import { findCanary } from '../helpers/canary';
import { startGithubAppServer, AppServer } from '../helpers/github-app-server';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'postern-github-app-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

async function openssl(args: string[]): Promise<string> {
  const r = await run('openssl', args, { cwd: dir });
  return r.stdout;
}

// Every message postern could show, for the canary search at the end.
const messages: string[] = [];
const secrets: string[] = [];
function shown(m: string): string {
  messages.push(m);
  return m;
}

interface Keys {
  pkcs1: Buffer;
  pkcs8: Buffer;
  other: Buffer;
  pub1: string; // path of pkcs1's public key
  pub8: string;
  pubOther: string;
}

const keysP: Promise<Keys> = (async () => {
  await Promise.all([
    openssl(['genrsa', '-traditional', '-out', 'pkcs1.pem', '2048']),
    openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:3072', '-out', 'pkcs8.pem']),
    openssl(['genrsa', '-out', 'other.pem', '2048']),
  ]);
  await Promise.all([
    openssl(['pkey', '-in', 'pkcs1.pem', '-pubout', '-out', 'pub1.pem']),
    openssl(['pkey', '-in', 'pkcs8.pem', '-pubout', '-out', 'pub8.pem']),
    openssl(['pkey', '-in', 'other.pem', '-pubout', '-out', 'pubother.pem']),
  ]);
  const k: Keys = {
    pkcs1: readFileSync(join(dir, 'pkcs1.pem')),
    pkcs8: readFileSync(join(dir, 'pkcs8.pem')),
    other: readFileSync(join(dir, 'other.pem')),
    pub1: join(dir, 'pub1.pem'),
    pub8: join(dir, 'pub8.pem'),
    pubOther: join(dir, 'pubother.pem'),
  };
  secrets.push(k.pkcs1.toString(), k.pkcs8.toString(), k.other.toString());
  return k;
})();

// The base64 lines of a PEM key: any one of them in a message is a leak.
function keyLines(pem: string): string[] {
  return pem.split('\n').filter((l) => l.length >= 16 && !l.startsWith('-----'));
}

function decodePart(part: string): unknown {
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
}

// openssl's verdict on a JWT's signature over "header.payload".
async function opensslVerifies(jwt: string, pubPath: string): Promise<boolean> {
  const [h, p, s] = jwt.split('.') as [string, string, string];
  const data = join(dir, 'jwt-data');
  const sig = join(dir, 'jwt-sig');
  writeFileSync(data, `${h}.${p}`);
  writeFileSync(sig, Buffer.from(s, 'base64url'));
  try {
    const out = await openssl(['dgst', '-sha256', '-verify', pubPath, '-signature', sig, data]);
    return out.trim() === 'Verified OK';
  } catch {
    return false;
  }
}

t.test('the app JWT: RS256 over header.payload, verified by openssl, with GitHub’s claims', async (t) => {
  const k = await keysP;
  const now = new Date(Date.UTC(2026, 11, 2, 6, 30, 15, 999));
  const iat = Math.floor(now.getTime() / 1000) - 60;
  for (const [name, pem, pub] of [
    ['PKCS#1', k.pkcs1, k.pub1],
    ['PKCS#8', k.pkcs8, k.pub8],
  ] as const) {
    t.match(pem.toString(), name === 'PKCS#1' ? /^-----BEGIN RSA PRIVATE KEY-----/ : /^-----BEGIN PRIVATE KEY-----/);
    const jwt = appJwt(pem, 123456, now);
    secrets.push(jwt);
    const parts = jwt.split('.');
    t.equal(parts.length, 3, `${name}: three parts`);
    for (const p of parts) t.match(p, /^[A-Za-z0-9_-]+$/, `${name}: base64url without padding`);
    t.same(decodePart(parts[0]!), { alg: 'RS256', typ: 'JWT' }, `${name}: header`);
    t.strictSame(decodePart(parts[1]!), { iat, exp: iat + 540, iss: '123456' }, `${name}: claims`);
    t.equal(await opensslVerifies(jwt, pub), true, `${name}: openssl verifies the signature with the app's public key`);
    t.equal(await opensslVerifies(jwt, k.pubOther), false, `${name}: another key's public key does not verify it`);
    const forged = `${parts[0]}.${Buffer.from(JSON.stringify({ iat, exp: iat + 540, iss: '654321' })).toString('base64url')}.${parts[2]}`;
    t.equal(await opensslVerifies(forged, pub), false, `${name}: changed claims do not verify`);
  }
  // The same instant signs the same claims: RS256 (PKCS#1 v1.5) is deterministic.
  t.equal(appJwt(k.pkcs1, 123456, now), appJwt(k.pkcs1, 123456, now));
  for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 53]) {
    t.throws(
      () => appJwt(k.pkcs1, bad, now),
      { message: 'github_app.app_id must be a positive integer' },
      `app_id ${bad}`,
    );
  }
});

t.test('the stored secret must be an RSA private key in PEM of at least 2048 bits', async (t) => {
  const k = await keysP;
  const store = "store the .pem file from the app's settings page";
  await Promise.all([
    openssl(['genrsa', '-out', 'rsa2047.pem', '2047']),
    openssl(['genrsa', '-traditional', '-out', 'rsa1024.pem', '1024']),
    openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'ec8.pem']),
    openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'ec-sec1.pem']),
    openssl(['genpkey', '-algorithm', 'ED25519', '-out', 'ed25519.pem']),
    openssl(['genpkey', '-algorithm', 'RSA-PSS', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'pss.pem']),
    openssl(['pkey', '-in', 'pkcs8.pem', '-aes-256-cbc', '-passout', 'pass:hunter2', '-out', 'enc8.pem']),
    openssl(['rsa', '-in', 'pkcs1.pem', '-traditional', '-aes256', '-passout', 'pass:hunter2', '-out', 'enc1.pem']),
    openssl(['pkey', '-in', 'pkcs8.pem', '-outform', 'DER', '-out', 'key.der']),
    openssl(['req', '-x509', '-key', 'pkcs8.pem', '-subj', '/CN=app', '-days', '1', '-out', 'cert.pem']),
  ]);
  const file = (n: string) => readFileSync(join(dir, n));
  const pkcs8Text = k.pkcs8.toString();
  const lines = pkcs8Text.split('\n');
  const truncated = Buffer.from([...lines.slice(0, 6), ...lines.slice(-2)].join('\n'));
  const crlf = Buffer.from(pkcs8Text.replace(/\n/g, '\r\n'));
  const cases: [string, Buffer, string | null][] = [
    ['PKCS#1 RSA 2048', k.pkcs1, null],
    ['PKCS#8 RSA 3072', k.pkcs8, null],
    ['PKCS#8 with CRLF line ends', crlf, null],
    ['PKCS#8 with surrounding blank lines', Buffer.from(`\n\n${pkcs8Text}\n\n`), null],
    [
      'RSA 2047',
      file('rsa2047.pem'),
      "the GitHub App key is RSA of 2047 bits; GitHub's app keys are at least 2048 bits",
    ],
    [
      'RSA 1024 PKCS#1',
      file('rsa1024.pem'),
      "the GitHub App key is RSA of 1024 bits; GitHub's app keys are at least 2048 bits",
    ],
    ['EC PKCS#8', file('ec8.pem'), 'the GitHub App key is an EC key, not RSA; GitHub signs app JWTs with RS256 only'],
    ['EC SEC1', file('ec-sec1.pem'), 'the GitHub App key is an EC key, not RSA; GitHub signs app JWTs with RS256 only'],
    [
      'Ed25519',
      file('ed25519.pem'),
      'the GitHub App key is an ED25519 key, not RSA; GitHub signs app JWTs with RS256 only',
    ],
    [
      'RSA-PSS',
      file('pss.pem'),
      'the GitHub App key is an RSA-PSS key, not RSA; GitHub signs app JWTs with RS256 only',
    ],
    ...(['enc8.pem', 'enc1.pem'] as const).map((n): [string, Buffer, string] => [
      `encrypted ${n}`,
      file(n),
      'the GitHub App key is encrypted with a passphrase; store it decrypted (openssl pkey -in key.pem)',
    ]),
    [
      'public key',
      readFileSync(k.pub8),
      `the GitHub App key is a public key or certificate, not the private key; ${store}`,
    ],
    [
      'certificate',
      file('cert.pem'),
      `the GitHub App key is a public key or certificate, not the private key; ${store}`,
    ],
    ['DER', file('key.der'), `the GitHub App key is not in PEM form; ${store}`],
    [
      'base64 body without PEM lines',
      Buffer.from(keyLines(pkcs8Text).join('\n')),
      `the GitHub App key is not in PEM form; ${store}`,
    ],
    ['empty', Buffer.alloc(0), `the GitHub App key is not in PEM form; ${store}`],
    ['truncated PEM', truncated, `the GitHub App key could not be read as a PEM private key; ${store}`],
    [
      'PEM armour around garbage',
      Buffer.from('-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n'),
      `the GitHub App key could not be read as a PEM private key; ${store}`,
    ],
  ];
  const now = new Date();
  for (const [name, secret, want] of cases) {
    const got = githubAppKeyProblem(secret);
    t.equal(got, want, name);
    if (want === null) {
      t.match(appJwt(secret, 1, now), /^[\w-]+\.[\w-]+\.[\w-]+$/, `${name}: signs a JWT`);
      continue;
    }
    t.throws(() => appJwt(secret, 1, now), { message: want }, `${name}: appJwt throws the same message`);
    shown(got!);
    t.notMatch(got!, /\n/, `${name}: one line`);
    const text = secret.toString('latin1');
    if (text.length > 0) t.same(findCanary(got!, text), [], `${name}: no encoding of the secret in the message`);
    for (const l of keyLines(text)) t.notOk(got!.includes(l.slice(0, 16)), `${name}: no line of the key`);
  }
});

t.test('the token request: GitHub’s endpoint, headers and narrowing body', async (t) => {
  const jwt = 'h.p.s';
  const ua = `postern/${packageVersion()}`;
  const headers = {
    accept: 'application/vnd.github+json',
    authorization: 'Bearer h.p.s',
    'x-github-api-version': '2022-11-28',
    'content-type': 'application/json',
    'user-agent': ua,
  };
  t.strictSame(installationTokenRequest({ app_id: 1, installation_id: 42, api: 'https://api.github.com' }, jwt), {
    method: 'POST',
    url: 'https://api.github.com/app/installations/42/access_tokens',
    headers,
    body: Buffer.from('{}'),
  });
  const narrowed = installationTokenRequest(
    {
      app_id: 1,
      installation_id: 7,
      api: 'https://ghe.example.com/api/v3/',
      repositories: ['postern', 'docs'],
      permissions: { contents: 'read', issues: 'write' },
    },
    jwt,
  );
  t.equal(narrowed.url, 'https://ghe.example.com/api/v3/app/installations/7/access_tokens', 'GHES api, trailing slash');
  t.strictSame(JSON.parse(narrowed.body.toString()), {
    repositories: ['postern', 'docs'],
    permissions: { contents: 'read', issues: 'write' },
  });
  t.equal(
    installationTokenRequest(
      { app_id: 1, installation_id: 7, api: 'https://x', repositories: [] },
      jwt,
    ).body.toString(),
    '{"repositories":[]}',
    'an empty list is sent as asked, not dropped',
  );
  for (const bad of [0, -3, 2.5, Number.NaN]) {
    t.throws(
      () => installationTokenRequest({ app_id: 1, installation_id: bad, api: 'https://x' }, jwt),
      { message: 'github_app.installation_id must be a positive integer' },
      `installation_id ${bad}`,
    );
  }
});

interface Exchange {
  status: number;
  body: Buffer;
  answer: ReturnType<typeof parseInstallationToken>;
}

async function exchange(
  server: AppServer,
  def: { app_id: number; installation_id: number; repositories?: string[]; permissions?: Record<string, string> },
  key: Buffer,
  jwtNow = new Date(),
): Promise<Exchange> {
  const jwt = appJwt(key, def.app_id, jwtNow);
  secrets.push(jwt);
  const req = installationTokenRequest({ ...def, api: server.api }, jwt);
  const dispatcher = new Agent({ connect: { ca: server.caCert } });
  try {
    const res = await request(req.url, { method: req.method, headers: req.headers, body: req.body, dispatcher });
    const body = Buffer.from(await res.body.arrayBuffer());
    const answer = parseInstallationToken(res.statusCode, body, new Date());
    if (answer.ok) secrets.push(answer.token);
    else shown(answer.message);
    return { status: res.statusCode, body, answer };
  } finally {
    await dispatcher.close();
  }
}

const INSTALLATIONS = {
  42: {
    repositories: ['postern', 'docs', 'infra'],
    permissions: { contents: 'write', issues: 'read', metadata: 'read' },
  },
};

t.test('tokens from the stand-in endpoint, over HTTPS with undici', async (t) => {
  const k = await keysP;
  const server = await startGithubAppServer({ appId: 123456, publicKey: k.pkcs8, installations: INSTALLATIONS });
  t.teardown(() => server.close());

  const all = await exchange(server, { app_id: 123456, installation_id: 42 }, k.pkcs8);
  t.equal(all.status, 201);
  const issued = server.issued[0]!;
  t.strictSame(
    all.answer,
    { ok: true, token: issued.token, expiresAt: new Date(issued.expiresAt) },
    'the token and expiry',
  );
  t.equal(issued.repositories, 'all');
  const seen = server.requests[0]!;
  t.equal(seen.method, 'POST');
  t.equal(seen.url, '/app/installations/42/access_tokens');
  t.equal(seen.headers['accept'], 'application/vnd.github+json');
  t.equal(seen.headers['x-github-api-version'], '2022-11-28');
  t.match(seen.headers['authorization'], /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
  t.equal(seen.headers['user-agent'], `postern/${packageVersion()}`);
  t.equal(seen.body.toString(), '{}');

  const narrow = await exchange(
    server,
    { app_id: 123456, installation_id: 42, repositories: ['docs'], permissions: { contents: 'read' } },
    k.pkcs8,
  );
  t.equal(narrow.status, 201);
  t.ok(narrow.answer.ok);
  t.strictSame(
    { repositories: server.issued[1]!.repositories, permissions: server.issued[1]!.permissions },
    { repositories: ['docs'], permissions: { contents: 'read' } },
    'the token is narrowed as the definition asks',
  );
  t.not(server.issued[1]!.token, issued.token, 'a fresh token');
});

t.test('a PKCS#1 key, and GitHub Enterprise Server’s /api/v3 prefix', async (t) => {
  const k = await keysP;
  const server = await startGithubAppServer({
    appId: 9,
    publicKey: k.pkcs1,
    installations: INSTALLATIONS,
    prefix: '/api/v3',
  });
  t.teardown(() => server.close());
  const r = await exchange(server, { app_id: 9, installation_id: 42 }, k.pkcs1);
  t.equal(r.status, 201);
  t.equal(r.answer.ok && r.answer.token, server.issued[0]!.token);
  t.equal(server.requests[0]!.url, '/api/v3/app/installations/42/access_tokens');
});

t.test('GitHub’s refusals, each with its exact message', async (t) => {
  const k = await keysP;
  const server = await startGithubAppServer({ appId: 123456, publicKey: k.pkcs8, installations: INSTALLATIONS });
  t.teardown(() => server.close());
  const m401 =
    'the GitHub App token endpoint answered 401: the app key or github_app.app_id is wrong (or the system clock is far off)';
  const m404 =
    'the GitHub App token endpoint answered 404: no installation has this github_app.installation_id for this app';
  const m422 =
    'the GitHub App token endpoint answered 422: github_app.repositories or github_app.permissions ask for more than the installation has';
  const base = { app_id: 123456, installation_id: 42 };
  const minutes = (n: number) => new Date(Date.now() + n * 60_000);
  const cases: [string, Promise<Exchange>, number, string][] = [
    ['another key', exchange(server, base, k.other), 401, `${m401} (GitHub: "A JSON web token could not be decoded")`],
    [
      'another app id',
      exchange(server, { ...base, app_id: 654321 }, k.pkcs8),
      401,
      `${m401} (GitHub: "Integration not found for this JWT issuer")`,
    ],
    [
      'a JWT signed 10 minutes ago',
      exchange(server, base, k.pkcs8, minutes(-10)),
      401,
      `${m401} (GitHub: "The expiration time is in the past")`,
    ],
    [
      'a clock 5 minutes ahead',
      exchange(server, base, k.pkcs8, minutes(5)),
      401,
      `${m401} (GitHub: "The issued at time is in the future")`,
    ],
    [
      'an unknown installation',
      exchange(server, { ...base, installation_id: 43 }, k.pkcs8),
      404,
      `${m404} (GitHub: "Not Found")`,
    ],
    [
      'a repository the installation lacks',
      exchange(server, { ...base, repositories: ['docs', 'secret-repo'] }, k.pkcs8),
      422,
      `${m422} (GitHub: "There is at least one repository that does not exist or is not accessible to the parent installation.")`,
    ],
    [
      'a higher permission level',
      exchange(server, { ...base, permissions: { issues: 'write' } }, k.pkcs8),
      422,
      `${m422} (GitHub: "The permissions requested are not granted to this installation.")`,
    ],
    [
      'a permission not granted at all',
      exchange(server, { ...base, permissions: { administration: 'read' } }, k.pkcs8),
      422,
      `${m422} (GitHub: "The permissions requested are not granted to this installation.")`,
    ],
  ];
  for (const [name, p, status, message] of cases) {
    const r = await p;
    t.equal(r.status, status, `${name}: status`);
    t.strictSame(r.answer, { ok: false, code: 'upstream_error', message }, name);
  }
  t.equal(server.issued.length, 0, 'no token was issued');
});

t.test('the stand-in refuses JWTs that are not the app’s, so its verdicts mean something', async (t) => {
  const k = await keysP;
  const server = await startGithubAppServer({ appId: 5, publicKey: k.pkcs1, installations: INSTALLATIONS });
  t.teardown(() => server.close());
  const jwt = appJwt(k.pkcs1, 5, new Date());
  const [h, p, s] = jwt.split('.') as [string, string, string];
  const now = Math.floor(Date.now() / 1000);
  const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${p}.`;
  const longLife = Buffer.from(JSON.stringify({ iat: now - 60, exp: now + 3600, iss: '5' })).toString('base64url');
  const flipped = `${s.slice(0, 10)}${s[10] === 'A' ? 'B' : 'A'}${s.slice(11)}`;
  const dispatcher = new Agent({ connect: { ca: server.caCert } });
  t.teardown(() => dispatcher.close());
  for (const [name, bearer, status] of [
    ['the genuine JWT', jwt, 201],
    ['a flipped signature byte', `${h}.${p}.${flipped}`, 401],
    ['alg none', none, 401],
    ['claims changed under the signature', `${h}.${longLife}.${s}`, 401],
  ] as const) {
    const req = installationTokenRequest({ app_id: 5, installation_id: 42, api: server.api }, bearer);
    const res = await request(req.url, { method: 'POST', headers: req.headers, body: req.body, dispatcher });
    await res.body.arrayBuffer();
    t.equal(res.statusCode, status, name);
  }
});

t.test('hostile or broken answers over the wire', async (t) => {
  const k = await keysP;
  const server = await startGithubAppServer({ appId: 1, publicKey: k.pkcs1, installations: INSTALLATIONS });
  t.teardown(() => server.close());
  const def = { app_id: 1, installation_id: 42 };
  const echoedJwt = appJwt(k.pkcs1, 1, new Date());
  const leakyToken = 'ghs_LeakedTokenValue0123456789abcdef';
  secrets.push(leakyToken);
  const cases: [string, number, string | Buffer, string, string][] = [
    [
      'a 500 page',
      500,
      '<html><body>Server Error</body></html>',
      'text/html',
      'the GitHub App token endpoint answered 500: GitHub could not answer; try again later',
    ],
    [
      'a 502 with JSON',
      502,
      '{"message":"Bad gateway"}',
      'application/json',
      'the GitHub App token endpoint answered 502: GitHub could not answer; try again later (GitHub: "Bad gateway")',
    ],
    [
      'a 200 with a token',
      200,
      `{"token":"${leakyToken}","expires_at":"2099-01-01T00:00:00Z"}`,
      'application/json',
      'the GitHub App token endpoint answered 200: a token comes only with 201',
    ],
    ['a 201 that is not JSON', 201, 'token=abc', 'text/plain', 'the GitHub App token answer (201) is not JSON'],
    [
      'a 201 without a token',
      201,
      '{"expires_at":"2099-01-01T00:00:00Z"}',
      'application/json',
      'the GitHub App token answer (201) has no "token"',
    ],
    [
      'a huge 201',
      201,
      Buffer.alloc(MAX_TOKEN_ANSWER_BYTES + 1, 0x20),
      'application/json',
      `the GitHub App token answer is over ${MAX_TOKEN_ANSWER_BYTES} bytes; it is not GitHub's answer`,
    ],
    [
      'a 401 echoing the JWT',
      401,
      JSON.stringify({ message: `Bad JWT ${echoedJwt}` }),
      'application/json',
      'the GitHub App token endpoint answered 401: the app key or github_app.app_id is wrong (or the system clock is far off)',
    ],
    [
      'a 403 echoing a token',
      403,
      JSON.stringify({ message: `token ${leakyToken} suspended` }),
      'application/json',
      'the GitHub App token endpoint answered 403: the app may not create tokens for this installation (suspended, or rate limited)',
    ],
  ];
  for (const [name, status, body, type, message] of cases) {
    server.answerNext(status, body, type);
    const r = await exchange(server, def, k.pkcs1);
    t.equal(r.status, status, `${name}: status`);
    t.strictSame(r.answer, { ok: false, code: 'upstream_error', message }, name);
  }
});

t.test('parseInstallationToken: every field of the 201 answer checked', async (t) => {
  const now = new Date(Date.UTC(2026, 11, 2, 6, 0, 0));
  const token = 'ghs_16C7e42F292c6912E7710c838347Ae178B4a';
  secrets.push(token);
  const ok = (expiresAt: string) => ({ ok: true, token, expiresAt: new Date(expiresAt) });
  const no = (message: string) => ({ ok: false, code: 'upstream_error', message });
  const body = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o));
  const exp = '2026-12-02T07:00:00Z';
  const notUsable = no('the GitHub App token answer (201) has a "token" that is not a usable token string');
  const notIso = no('the GitHub App token answer (201) has an "expires_at" that is not an ISO 8601 time');
  const past = no('the GitHub App token answer (201) has an "expires_at" in the past; check the system clock');
  const long = `ghs_${'a'.repeat(8188)}`;
  const cases: [string, Buffer, unknown][] = [
    [
      'GitHub’s documented answer',
      body({ token, expires_at: exp, permissions: { issues: 'write' }, repository_selection: 'selected' }),
      ok(exp),
    ],
    ['fractional seconds', body({ token, expires_at: '2026-12-02T07:00:00.250Z' }), ok('2026-12-02T07:00:00.250Z')],
    ['an offset', body({ token, expires_at: '2026-12-02T08:00:00+01:00' }), ok(exp)],
    ['one second left', body({ token, expires_at: '2026-12-02T06:00:01Z' }), ok('2026-12-02T06:00:01Z')],
    [
      'a token of 8192 characters',
      body({ token: long, expires_at: exp }),
      { ok: true, token: long, expiresAt: new Date(exp) },
    ],
    ['not UTF-8', Buffer.from([0xff, 0xfe, 0x7b]), no('the GitHub App token answer (201) is not JSON')],
    ['empty', Buffer.alloc(0), no('the GitHub App token answer (201) is not JSON')],
    [
      'truncated JSON',
      body(`{"token":"${token}","expires_at":"20`),
      no('the GitHub App token answer (201) is not JSON'),
    ],
    ['an array', body([{ token, expires_at: exp }]), no('the GitHub App token answer (201) is not a JSON object')],
    ['null', body('null'), no('the GitHub App token answer (201) is not a JSON object')],
    ['a string', body(JSON.stringify(token)), no('the GitHub App token answer (201) is not a JSON object')],
    ['no token', body({ expires_at: exp }), no('the GitHub App token answer (201) has no "token"')],
    [
      'a token under __proto__',
      body(`{"__proto__":{"token":"${token}"},"expires_at":"${exp}"}`),
      no('the GitHub App token answer (201) has no "token"'),
    ],
    ['a numeric token', body({ token: 12345, expires_at: exp }), notUsable],
    ['a null token', body({ token: null, expires_at: exp }), notUsable],
    ['an array token', body({ token: [token], expires_at: exp }), notUsable],
    ['an empty token', body({ token: '', expires_at: exp }), notUsable],
    ['a token with a space', body({ token: 'ghs_a b', expires_at: exp }), notUsable],
    ['a token with CR LF', body({ token: `${token}\r\nX-Injected: 1`, expires_at: exp }), notUsable],
    ['a token with non-ASCII', body({ token: `${token}é`, expires_at: exp }), notUsable],
    ['a token of 8193 characters', body({ token: `${long}a`, expires_at: exp }), notUsable],
    ['no expires_at', body({ token }), no('the GitHub App token answer (201) has no "expires_at"')],
    ['expires_at null', body({ token, expires_at: null }), notIso],
    ['expires_at a number', body({ token, expires_at: 1796191200 }), notIso],
    ['expires_at prose', body({ token, expires_at: 'in an hour' }), notIso],
    ['expires_at without zone', body({ token, expires_at: '2026-12-02T07:00:00' }), notIso],
    ['expires_at with a space', body({ token, expires_at: '2026-12-02 07:00:00Z' }), notIso],
    ['expires_at 30 February', body({ token, expires_at: '2027-02-30T07:00:00Z' }), notIso],
    ['expires_at month 13', body({ token, expires_at: '2027-13-01T07:00:00Z' }), notIso],
    ['expires_at hour 24', body({ token, expires_at: '2026-12-02T24:00:00Z' }), notIso],
    ['expires_at second 60', body({ token, expires_at: '2026-12-02T07:00:60Z' }), notIso],
    ['expires_at GitHub’s 2016 example', body({ token, expires_at: '2016-07-11T22:14:10Z' }), past],
    ['expires_at exactly now', body({ token, expires_at: '2026-12-02T06:00:00Z' }), past],
    ['expires_at a second ago', body({ token, expires_at: '2026-12-02T05:59:59Z' }), past],
  ];
  for (const [name, b, want] of cases) {
    const got = parseInstallationToken(201, b, now);
    if (!got.ok) shown(got.message);
    t.strictSame(got, want, name);
  }
  // The size limit is on the bytes: exactly the limit is read.
  const padded = Buffer.alloc(MAX_TOKEN_ANSWER_BYTES, 0x20);
  body({ token, expires_at: exp }).copy(padded);
  t.strictSame(parseInstallationToken(201, padded, now), ok(exp), 'an answer of exactly the limit');
  t.strictSame(
    parseInstallationToken(201, Buffer.concat([padded, Buffer.from(' ')]), now),
    no(`the GitHub App token answer is over ${MAX_TOKEN_ANSWER_BYTES} bytes; it is not GitHub's answer`),
    'one byte over',
  );
});

t.test('parseInstallationToken: statuses, and which of GitHub’s words are shown', async (t) => {
  const now = new Date();
  const say = (message: unknown) => Buffer.from(JSON.stringify({ message }));
  const prefix = 'the GitHub App token endpoint answered';
  const wrong401 = `${prefix} 401: the app key or github_app.app_id is wrong (or the system clock is far off)`;
  const cases: [string, number, Buffer, string][] = [
    ['401 without a body', 401, Buffer.alloc(0), wrong401],
    [
      '404 HTML',
      404,
      Buffer.from('<h1>Not Found</h1>'),
      `${prefix} 404: no installation has this github_app.installation_id for this app`,
    ],
    [
      '422 prose',
      422,
      say('Validation Failed'),
      `${prefix} 422: github_app.repositories or github_app.permissions ask for more than the installation has (GitHub: "Validation Failed")`,
    ],
    [
      '400',
      400,
      say('Problems parsing JSON'),
      `${prefix} 400: a token comes only with 201 (GitHub: "Problems parsing JSON")`,
    ],
    ['302', 302, Buffer.alloc(0), `${prefix} 302: a token comes only with 201`],
    [
      '503',
      503,
      say('Service unavailable'),
      `${prefix} 503: GitHub could not answer; try again later (GitHub: "Service unavailable")`,
    ],
    [
      'a message with a newline',
      422,
      say('line one\nline two'),
      `${prefix} 422: github_app.repositories or github_app.permissions ask for more than the installation has`,
    ],
    ['a message with a long run', 401, say('key abcdefghijklmnopqrstuvwxyz'), wrong401],
    ['a message over 200 characters', 401, say('word '.repeat(41)), wrong401],
    ['a message that is not a string', 401, say({ nested: 'x' }), wrong401],
    [
      'an error body over 64 KiB',
      422,
      Buffer.from(`{"message":"Validation Failed"${' '.repeat(64 * 1024)}}`),
      `${prefix} 422: github_app.repositories or github_app.permissions ask for more than the installation has`,
    ],
    ['a message with a double quote', 401, say('bad "key"'), wrong401],
    ['a message with control characters', 401, say('bad \u001b[31m red'), wrong401],
  ];
  for (const [name, status, b, message] of cases) {
    const got = parseInstallationToken(status, b, now);
    if (!got.ok) shown(got.message);
    t.strictSame(got, { ok: false, code: 'upstream_error', message }, name);
  }
});

t.test('TokenCache: kept until 5 minutes before expiry, or half a shorter life', async (t) => {
  const t0 = Date.UTC(2026, 11, 2, 6, 0, 0);
  const at = (ms: number) => new Date(t0 + ms);
  const MIN = 60_000;

  const c = new TokenCache();
  c.put('gh', 'h1', 'tok-1', at(60 * MIN), c.ticket(), at(0));
  t.equal(c.get('gh', 'h1', at(0)), 'tok-1', 'fresh');
  t.equal(c.get('gh', 'h1', at(55 * MIN - 1)), 'tok-1', 'one millisecond before the margin');
  t.equal(c.get('gh', 'h1', at(55 * MIN)), null, 'exactly at the margin: obtain a new one');
  t.equal(c.get('gh', 'h1', at(0)), null, 'and the stale token was dropped');

  c.put('short', 'h', 'tok-s', at(6 * MIN), c.ticket(), at(0));
  t.equal(c.get('short', 'h', at(3 * MIN - 1)), 'tok-s', 'a 6-minute life: kept for half of it');
  t.equal(c.get('short', 'h', at(3 * MIN)), null, 'a 6-minute life: gone at half');

  c.put('ten', 'h', 'tok-10', at(10 * MIN), c.ticket(), at(0));
  t.equal(c.get('ten', 'h', at(5 * MIN - 1)), 'tok-10', 'a 10-minute life: both margins are 5 minutes');
  t.equal(c.get('ten', 'h', at(5 * MIN)), null);

  c.put('gh', 'h1', 'tok-2', at(60 * MIN), c.ticket(), at(0));
  t.equal(c.get('gh', 'h2', at(1)), null, 'the definition changed: not used');
  t.equal(c.get('gh', 'h1', at(1)), null, 'and not kept for the old definition either');

  c.put('gh', 'h1', 'tok-3', at(60 * MIN), c.ticket(), at(0));
  c.put('gh', 'h1', 'tok-4', at(60 * MIN), c.ticket(), at(0));
  t.equal(c.get('gh', 'h1', at(1)), 'tok-4', 'a new token replaces the old');
  c.put('gh', 'h1', 'tok-5', at(0), c.ticket(), at(0));
  t.equal(c.get('gh', 'h1', at(0)), null, 'a token already expired is not kept, and the old one is dropped');
  t.equal(c.get('gh', 'h1', at(-MIN)), null);

  c.put('a', 'h', 'tok-a', at(60 * MIN), c.ticket(), at(0));
  c.put('b', 'h', 'tok-b', at(60 * MIN), c.ticket(), at(0));
  c.forget('a');
  t.equal(c.get('a', 'h', at(1)), null, 'forget drops that credential');
  t.equal(c.get('b', 'h', at(1)), 'tok-b', 'and only that one');
  c.put('a', 'h', 'tok-a', at(60 * MIN), c.ticket(), at(0));
  c.clear();
  t.equal(c.get('a', 'h', at(1)), null, 'clear drops all');
  t.equal(c.get('b', 'h', at(1)), null);

  // Tokens obtained by requests begun before a change (a rotated secret
  // keeps the definition's hash) or a lock are not kept.
  const before = c.ticket();
  c.forget('a');
  c.put('a', 'h', 'tok-old-secret', at(60 * MIN), before, at(0));
  t.equal(c.get('a', 'h', at(1)), null, 'obtained before its credential changed: not kept');
  c.put('b', 'h', 'tok-other', at(60 * MIN), before, at(0));
  t.equal(c.get('b', 'h', at(1)), 'tok-other', 'another credential unchanged since: kept');
  const beforeLock = c.ticket();
  c.clear();
  c.put('b', 'h', 'tok-b2', at(60 * MIN), beforeLock, at(0));
  t.equal(c.get('b', 'h', at(1)), null, 'obtained before a clear (a lock): not kept');
  c.put('b', 'h', 'tok-b3', at(60 * MIN), c.ticket(), at(0));
  t.equal(c.get('b', 'h', at(1)), 'tok-b3', 'obtained after it: kept');

  const live = new TokenCache();
  live.put('x', 'h', 'tok-x', new Date(Date.now() + 60 * MIN), live.ticket());
  t.equal(live.get('x', 'h', new Date()), 'tok-x', 'put without a time means now');
});

// Last: every message shown in this file, searched for every private key,
// JWT and token the tests made or received.
t.test('no message carries a private key, a JWT or a token', async (t) => {
  t.ok(messages.length > 50, `${messages.length} messages searched`);
  t.ok(secrets.length > 10, `${secrets.length} secrets searched for`);
  const hay = messages.join('\n');
  for (const s of secrets) {
    t.same(findCanary(hay, s), [], `no encoding of a ${s.slice(0, 4)}… secret`);
    for (const l of keyLines(s)) t.notOk(hay.includes(l.slice(0, 16)), 'no line of a key');
    for (const part of s.split('.').filter((p) => p.length >= 16)) t.notOk(hay.includes(part), 'no part of a JWT');
  }
});
