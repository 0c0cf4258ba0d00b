// Keep-alive clients reusing one tunnel after an error answer: postern's
// own refusals (403 denied_policy, 400 bad_request for a placeholder out of
// its slot) and the upstream's 500, each followed by a good request on the
// same connection. curl (several URLs in one invocation, num_connects per
// transfer), a Python requests Session and undici's EnvHttpProxyAgent.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Handler } from '../helpers/https-upstream';
import { echo } from '../helpers/https-upstream';
import { startProxyStack, sh } from '../helpers/proxy-stack';

const handler: Handler = (req, body, res) => {
  if (req.url === '/ok/500') {
    res.writeHead(500, { 'content-type': 'text/plain', 'content-length': 4 });
    res.end('oops');
    return;
  }
  return echo(req, body, res);
};

const opts = { handler, paths: ['/ok/*'] };

t.test('curl: refusals and an upstream 500, each followed by a 200 on the same tunnel', async (t) => {
  const s = await startProxyStack(opts);
  t.teardown(() => s.close());
  const u = (p: string): string => s.url('api.example.test', p);
  const r = await s.run(
    sh(
      `curl -sS --max-time 20 -H "Authorization: Bearer $GH_TOKEN" -w '%{http_code} %{num_connects}\\n' -o /dev/null ${u('/denied')} -o /dev/null ${u('/ok/1')} -o /dev/null "${u('/ok/q')}?t=$GH_TOKEN" -o /dev/null ${u('/ok/2')} -o /dev/null ${u('/ok/500')} -o /dev/null ${u('/ok/3')}`,
    ),
  );
  t.equal(r.code, 0, 'curl ran', { stderr: r.stderr });
  t.equal(
    r.stdout.toString(),
    ['403 1', '200 0', '400 0', '200 0', '500 0', '200 0', ''].join('\n'),
    'one tunnel for all six: 403, 200, 400, 200, 500, 200',
  );
  t.same(
    s.up.requests.map((q) => q.url),
    ['/ok/1', '/ok/2', '/ok/500', '/ok/3'],
    'only the allowed ones reached the upstream',
  );
  t.same(await s.exposed(), []);
});

t.test('Python requests Session: a 400 for a placeholder in the body, then GETs on the same connection', async (t) => {
  const s = await startProxyStack(opts);
  t.teardown(() => s.close());
  const py = s.h.file(
    'k.py',
    [
      'import os, sys, requests, urllib3.connection as uc',
      'n = [0]; orig = uc.HTTPSConnection.connect',
      'def counted(self):',
      '    n[0] += 1; return orig(self)',
      'uc.HTTPSConnection.connect = counted',
      'b = sys.argv[1]; tok = os.environ["GH_TOKEN"]',
      'h = {"Authorization": "Bearer " + tok}',
      'with requests.Session() as s:',
      '    out = [s.post(b + "/ok/form", data={"token": tok}, headers=h, timeout=20),',
      '           s.get(b + "/ok/a", headers=h, timeout=20),',
      '           s.get(b + "/denied", headers=h, timeout=20),',
      '           s.get(b + "/ok/b", headers=h, timeout=20)]',
      '    print(" ".join("%d:%s" % (r.status_code, r.headers.get("x-postern-error", "-")) for r in out), n[0])',
    ].join('\n') + '\n',
  );
  const r = await s.run(['python3', py, s.url('api.example.test', '')]);
  t.equal(r.code, 0, 'the script ran', { stderr: r.stderr });
  t.equal(r.stdout.toString(), '400:bad_request 200:- 403:denied_policy 200:- 1\n', 'answers in order, one connection');
  t.same(await s.exposed(), []);
});

t.test('undici EnvHttpProxyAgent: a refusal, then requests on the pooled tunnel', async (t) => {
  const s = await startProxyStack(opts);
  t.teardown(() => s.close());
  const js = join(s.h.dir, 'k.js');
  writeFileSync(
    js,
    `const undici = require(${JSON.stringify(require.resolve('undici'))});
const d = new undici.EnvHttpProxyAgent({ connections: 1 });
const h = { authorization: 'Bearer ' + process.env.GH_TOKEN };
(async () => {
  const out = [];
  for (const [p, extra] of [['/denied', {}], ['/ok/1', {}], ['/ok/2', { 'x-token': process.env.GH_TOKEN }], ['/ok/500', {}], ['/ok/3', {}]]) {
    const r = await undici.request(process.argv[2] + p, { dispatcher: d, headers: { ...h, ...extra } });
    await r.body.text();
    out.push(r.statusCode + ':' + (r.headers['x-postern-error'] ?? '-'));
  }
  console.log(out.join(' '));
  await d.close();
})().catch((e) => { console.log('ERR ' + (e.code ?? e.message)); });
`,
  );
  const r = await s.run([process.execPath, js, s.url('api.example.test', '')]);
  t.equal(r.stdout.toString(), '403:denied_policy 200:- 400:bad_request 500:- 200:-\n', { stderr: r.stderr });
  t.same(await s.exposed(), []);
});
