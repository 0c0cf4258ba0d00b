// an OAuth 2.0 client-credentials credential used through the proxy
// front door (SPEC §11, §13) by curl and Python requests under `postern run`,
// against a hand-written token endpoint that can turn hostile: it echoes the
// client secret in its error, answers with a huge token, a token carrying
// CR/LF, or not at all. Nothing the client receives, nor the daemon log, nor
// the journal, may hold any form of the client secret or the access token;
// every refusal must be an HTTP response with a code; nothing may hang.
import t from 'tap';
import type { Test } from 'tap';
import { createHash } from 'node:crypto';
import { startStack, type Stack } from '../helpers/stack';
import { cliBytes, type BytesResult } from '../helpers/cli-bytes';
import { exposures } from '../helpers/exposure';
import { journalText } from '../helpers/canary';

const HOST = 'api.example.test';
const CLIENT_SECRET = 'CrmClientSecret-7f3a9c2e41d84b6b';

type Mode = 'ok' | 'echo-secret' | 'huge' | 'crlf' | 'silent' | 'secret-as-token';

interface X {
  s: Stack;
  mode: { m: Mode };
  issued: string[];
  apiSeen: { auth: string; headers: Record<string, unknown> }[];
  tokenCalls: number;
  outputs: Buffer[];
  run(script: string, env?: Record<string, string>): Promise<BytesResult>;
  emitted(): Promise<Buffer>;
}

let n = 0;
const fresh = () =>
  `at-${createHash('sha256').update(`${process.pid}:${Date.now()}:${n++}`).digest('hex').slice(0, 40)}`;

async function setup(t: Test, httpConfig = ''): Promise<X> {
  const mode = { m: 'ok' as Mode };
  const issued: string[] = [];
  const apiSeen: X['apiSeen'] = [];
  let tokenCalls = 0;
  const held: (() => void)[] = [];
  const s = await startStack({
    names: [HOST],
    records: { [HOST]: { A: ['127.0.0.1'] } },
    httpConfig,
    handler: async (req, body, res) => {
      if ((req.url ?? '').startsWith('/token')) {
        tokenCalls++;
        const basic = Buffer.from(String(req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString();
        switch (mode.m) {
          case 'echo-secret':
            res.writeHead(401, { 'content-type': 'application/json' }).end(
              JSON.stringify({
                error: 'invalid_client',
                error_description: `client secret ${CLIENT_SECRET} rejected (basic ${req.headers.authorization}, ${basic}) body=${body.toString()}`,
              }),
            );
            return;
          case 'silent':
            await new Promise<void>((r) => held.push(r));
            res.destroy();
            return;
          case 'huge': {
            const tok = 'h'.repeat(200 * 1024);
            issued.push(tok);
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ access_token: tok, token_type: 'Bearer', expires_in: 3600 }));
            return;
          }
          case 'crlf': {
            const tok = `${fresh()}\r\nX-Injected: yes`;
            issued.push(tok);
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ access_token: tok, token_type: 'Bearer', expires_in: 3600 }));
            return;
          }
          case 'secret-as-token': {
            // A hostile server that makes the client secret the access token,
            // and puts it in its own extra fields.
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(
                JSON.stringify({ access_token: fresh(), token_type: 'Bearer', expires_in: 3600, note: CLIENT_SECRET }),
              );
            return;
          }
          default: {
            const tok = fresh();
            issued.push(tok);
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ access_token: tok, token_type: 'Bearer', expires_in: 3600 }));
            return;
          }
        }
      }
      const auth = String(req.headers.authorization ?? '');
      apiSeen.push({ auth, headers: req.headers as Record<string, unknown> });
      const ok = issued.includes(auth.replace(/^Bearer /, ''));
      res
        .writeHead(ok ? 200 : 401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ ok, echoed: auth, b64: Buffer.from(auth).toString('base64') }));
    },
  });
  t.teardown(async () => {
    held.forEach((r) => r());
    await s.close();
  });
  s.addCredential(
    'crm',
    `name = "crm"\nkind = "http"\nenv = ["CRM_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject.oauth2]\ntoken_url = "https://${HOST}:${s.up.port}/token"\nclient_id = "crm-app"\ngrant = "client_credentials"\nscopes = ["read"]\n[[allow]]\nhost = "${HOST}"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    CLIENT_SECRET,
  );
  await s.approver();
  const outputs: Buffer[] = [];
  const x: X = {
    s,
    mode,
    issued,
    apiSeen,
    get tokenCalls() {
      return tokenCalls;
    },
    outputs,
    async run(script, env = {}) {
      const r = await cliBytes({ ...s.h.env, ...env }, ['run', '--credential', 'crm', '--', 'sh', '-c', script]);
      outputs.push(r.stdout, Buffer.from(r.stderr));
      return r;
    },
    async emitted() {
      return Buffer.concat([...outputs, Buffer.from(s.d.logs()), Buffer.from(await journalText(s.h))]);
    },
  };
  return x;
}

const api = (x: X) => `https://${HOST}:${x.s.up.port}/v1/items`;
const CURL = (x: X) =>
  `curl -sS -w '\\n%{http_code} %header{x-postern-error}' -H "Authorization: Bearer $CRM_TOKEN" ${api(x)}`;

function split(r: BytesResult): { body: string; status: string } {
  const text = r.stdout.toString();
  const i = text.lastIndexOf('\n');
  return { body: text.slice(0, i), status: text.slice(i + 1) };
}

async function noLeaks(t: Test, x: X, extra: string[] = []): Promise<void> {
  const all = await x.emitted();
  t.same(exposures(all, CLIENT_SECRET), [], 'no form of the client secret in run output, daemon log, journal');
  for (const tok of [...x.issued, ...extra].filter((v) => v.length < 1000))
    t.same(exposures(all, tok), [], `no form of the access token ${tok.slice(0, 12)}…`);
}

t.test('curl under postern run with an OAuth placeholder', async (t) => {
  const x = await setup(t);
  const r = await x.run(CURL(x));
  const { body, status } = split(r);
  t.equal(status, '200 ', `curl got 200: ${body} ${r.stderr}`);
  t.match(body, /"ok":true/);
  t.match(x.apiSeen.at(-1)?.auth, /^Bearer at-/, 'the API saw the real token');
  t.notMatch(body, /at-[0-9a-f]{40}/, 'the echoed token is redacted');
  await noLeaks(t, x);
});

t.test('Python requests under postern run with an OAuth placeholder', async (t) => {
  const x = await setup(t);
  const py = `import os,requests\nr=requests.get("${api(x)}",headers={"Authorization":"Bearer "+os.environ["CRM_TOKEN"]},timeout=20)\nprint(r.status_code)\nprint(r.text)`;
  const r = await x.run(`python3 -c '${py}'`);
  t.equal(r.code, 0, r.stderr);
  const [code, ...rest] = r.stdout.toString().split('\n');
  t.equal(code, '200', `requests got 200: ${rest.join('\n')} ${r.stderr}`);
  t.equal(x.tokenCalls, 1, 'one token request');
  await noLeaks(t, x);
});

t.test(
  'a token endpoint echoing the client secret in its error: refused with a code, no secret reaches curl',
  async (t) => {
    const x = await setup(t);
    x.mode.m = 'echo-secret';
    const r = await x.run(CURL(x));
    const { body, status } = split(r);
    t.equal(status, '502 upstream_error', `status and code: ${body}`);
    t.match(body, /"code":"upstream_error"/);
    t.equal(x.apiSeen.length, 0, 'the API request not sent');
    await noLeaks(t, x);
  },
);

t.test('a token endpoint naming the client secret in an extra field of a 200', async (t) => {
  const x = await setup(t);
  x.mode.m = 'secret-as-token';
  const r = await x.run(CURL(x));
  t.equal(r.code, 0, r.stderr);
  await noLeaks(t, x);
});

t.test('a huge access token: a clear refusal or success, no hang, not echoed', async (t) => {
  const x = await setup(t);
  x.mode.m = 'huge';
  const started = Date.now();
  const r = await x.run(`timeout 40 ${CURL(x)}`);
  const took = Date.now() - started;
  const { body, status } = split(r);
  t.ok(took < 35000, `answered in ${took} ms`);
  t.match(status, /^(200 |502 upstream_error)$/, `a 200 or a named refusal: ${status} ${body.slice(0, 300)}`);
  t.ok(r.stdout.length < 100 * 1024, `the huge token did not come back to the client (${r.stdout.length} bytes)`);
  await noLeaks(t, x);
});

t.test('an access token with CR/LF: no header injected upstream', async (t) => {
  const x = await setup(t);
  x.mode.m = 'crlf';
  const r = await x.run(CURL(x));
  const { body, status } = split(r);
  t.ok(
    x.apiSeen.every((a) => a.headers['x-injected'] === undefined),
    'no X-Injected header reached the API',
  );
  t.equal(status, '502 upstream_error', `refused with a code: ${body}`);
  t.equal(x.apiSeen.length, 0, 'nothing sent');
  await noLeaks(
    t,
    x,
    x.issued.map((v) => v.split('\r')[0]!),
  );
});

t.test('a silent token endpoint through the proxy: a 504 within http.timeout, no hang', async (t) => {
  const x = await setup(t, 'timeout = "2s"');
  x.mode.m = 'silent';
  const started = Date.now();
  const r = await x.run(`timeout 30 ${CURL(x)}`);
  const took = Date.now() - started;
  const { body, status } = split(r);
  t.equal(status, '504 upstream_timeout', `a named timeout: ${body} ${r.stderr}`);
  t.ok(took < 12000, `answered within a few seconds of http.timeout 2s (took ${took} ms)`);
  await noLeaks(t, x);
});
