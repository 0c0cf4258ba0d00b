// Unmodified clients through `postern run` and the proxy front door (SPEC
// §11): curl, Python requests and Node's undici EnvHttpProxyAgent read the
// placeholder from their environment and the proxy from HTTPS_PROXY; the
// upstream sees the real secret, the client gets the answer, and the secret
// is in nothing the client, the daemon's log or the journal holds.
import t from 'tap';
import type { Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { exposures } from '../helpers/exposure';
import { join } from 'node:path';
import { startProxyStack, sh, ProxyStack } from '../helpers/proxy-stack';

const PLACEHOLDER = /^postern-github-[0-9a-f]{16}$/;

// The echo upstream's JSON answer and what the upstream itself saw.
function checkAnswer(t: Test, s: ProxyStack, body: string, path: string): void {
  const echoed = JSON.parse(body) as { url: string; headers: Record<string, string> };
  t.equal(echoed.url, path, 'the client got the upstream answer');
  const seen = s.up.requests.find((r) => r.url === path);
  t.ok(seen, 'the upstream received the request');
  t.equal(seen?.headers['authorization'], `Bearer ${s.secret}`, 'the upstream saw the real secret');
}

// Saves the environment CMD got, to check it held only the placeholder.
const ENV_DUMP = 'env > "$ENV_FILE"';

function envOf(s: ProxyStack): { file: string; token(): string; exposed(): string[] } {
  const file = join(s.h.dir, 'env.txt');
  return {
    file,
    token: () => /^GH_TOKEN=(.*)$/m.exec(readFileSync(file, 'utf8'))?.[1] ?? '',
    exposed: () => exposures(readFileSync(file), s.secret),
  };
}

t.test('curl with the placeholder from its environment', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const url = s.url('api.example.test', '/v1/curl?x=1');
  const env = envOf(s);
  const r = await s.run(
    sh(`${ENV_DUMP}; curl -sS --fail-with-body --max-time 20 -H "Authorization: Bearer $GH_TOKEN" ${url}`),
    { ENV_FILE: env.file },
  );
  t.equal(r.code, 0, 'CMD succeeded', { stderr: r.stderr });
  t.match(env.token(), PLACEHOLDER, 'the environment held the placeholder');
  t.same(env.exposed(), [], 'and not the secret');
  checkAnswer(t, s, r.stdout.toString(), '/v1/curl?x=1');
  t.same(await s.exposed(), []);
});

t.test('Python requests', async (t) => {
  // A missing module fails rather than skips: .ci/run installs python3-requests.
  const probe = spawnSync('python3', ['-c', 'import requests'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    t.fail(
      `python3 with the requests module is needed (Debian python3-requests): ${probe.stderr || probe.error?.message}`,
    );
    return;
  }
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const script = s.h.file(
    'client.py',
    [
      'import os, sys, requests',
      'r = requests.get(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]}, timeout=20)',
      'r.raise_for_status()',
      'sys.stdout.write(r.text)',
    ].join('\n') + '\n',
  );
  const env = envOf(s);
  const r = await s.run(sh(`${ENV_DUMP}; exec python3 ${script} ${s.url('api.example.test', '/v1/python')}`), {
    ENV_FILE: env.file,
  });
  t.equal(r.code, 0, 'CMD succeeded', { stderr: r.stderr });
  t.match(env.token(), PLACEHOLDER, 'the environment held the placeholder');
  t.same(env.exposed(), [], 'and not the secret');
  checkAnswer(t, s, r.stdout.toString(), '/v1/python');
  t.same(await s.exposed(), []);
});

t.test("Node's undici EnvHttpProxyAgent", async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const script = join(s.h.dir, 'client.js');
  writeFileSync(
    script,
    [
      `const { EnvHttpProxyAgent, request } = require(${JSON.stringify(require.resolve('undici'))});`,
      'const dispatcher = new EnvHttpProxyAgent();',
      '(async () => {',
      '  const out = [];',
      '  for (const path of ["/v1/node/1", "/v1/node/2"]) {',
      '    const r = await request(process.argv[2] + path, { dispatcher, headers: { authorization: `Bearer ${process.env.GH_TOKEN}` } });',
      '    const text = await r.body.text();',
      '    if (r.statusCode !== 200) throw new Error(`${r.statusCode} ${text}`);',
      '    out.push(text);',
      '  }',
      '  process.stdout.write(JSON.stringify(out));',
      '  await dispatcher.close();',
      '})().catch((e) => { console.error(e); process.exit(1); });',
    ].join('\n') + '\n',
  );
  const base = s.url('api.example.test', '');
  const env = envOf(s);
  const r = await s.run(sh(`${ENV_DUMP}; exec "${process.execPath}" ${script} ${base}`), { ENV_FILE: env.file });
  t.equal(r.code, 0, 'CMD succeeded', { stderr: r.stderr });
  t.match(env.token(), PLACEHOLDER, 'the environment held the placeholder');
  t.same(env.exposed(), [], 'and not the secret');
  const answers = JSON.parse(r.stdout.toString()) as string[];
  checkAnswer(t, s, answers[0]!, '/v1/node/1');
  checkAnswer(t, s, answers[1]!, '/v1/node/2');
  t.same(await s.exposed(), []);
});

t.test('curl with the placeholder in the body is refused, nothing sent', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const url = s.url('api.example.test', '/v1/curl-body');
  const r = await s.run(
    sh(`curl -sS --max-time 20 -D - -H "Authorization: Bearer $GH_TOKEN" --data-raw "token=$GH_TOKEN" ${url}`),
  );
  t.equal(r.code, 0, 'curl got an answer', { stderr: r.stderr });
  // curl prints the proxy's answer to CONNECT first, then the response.
  const all = r.stdout.toString();
  const out = all.slice(all.lastIndexOf('HTTP/1.1 '));
  t.match(all, /^HTTP\/1\.1 200 Connection Established\r\n/, 'the tunnel was opened');
  t.match(out, /^HTTP\/1\.1 400 /, "postern's status");
  t.match(out, /^x-postern-error: bad_request\r$/im, 'the code in x-postern-error');
  const body = JSON.parse(out.slice(out.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
  t.equal(body.error.code, 'bad_request', 'the JSON error of §6.3');
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.same(await s.exposed(), []);
});
