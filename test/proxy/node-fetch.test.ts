// Node 20's built-in fetch and undici's own fetch/ProxyAgent through a real
// `postern run`: with undici's EnvHttpProxyAgent (as a dispatcher and as the
// global dispatcher), with ProxyAgent given HTTPS_PROXY (its user:password
// as the proxy credentials), a streamed (chunked) upload, and fetch with no
// dispatcher (Node 20 ignores HTTPS_PROXY even with NODE_USE_ENV_PROXY=1).
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, ProxyStack } from '../helpers/proxy-stack';

const UNDICI = JSON.stringify(require.resolve('undici'));

async function runJs(s: ProxyStack, body: string): Promise<{ code: number | null; out: string; err: string }> {
  const js = join(s.h.dir, `c${Math.random().toString(16).slice(2)}.js`);
  writeFileSync(
    js,
    `const undici = require(${UNDICI});
const URL_BASE = process.argv[2];
const auth = { authorization: 'Bearer ' + process.env.GH_TOKEN };
(async () => {
${body}
})().catch((e) => { console.log('ERR ' + (e.cause?.code ?? e.code ?? e.message)); process.exitCode = 1; });
`,
  );
  const r = await s.run([process.execPath, js, s.url('api.example.test', '')]);
  return { code: r.code, out: r.stdout.toString(), err: r.stderr };
}

t.test("built-in fetch with undici's EnvHttpProxyAgent as its dispatcher", async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await runJs(
    s,
    `const dispatcher = new undici.EnvHttpProxyAgent();
const res = await fetch(URL_BASE + '/v1/fetch', { headers: auth, dispatcher });
const j = await res.json();
console.log(res.status + ' ' + j.url + ' ' + j.headers.authorization);
await dispatcher.close();`,
  );
  t.equal(r.out, '200 /v1/fetch [REDACTED:github]\n', 'fetched; the echoed secret redacted', { err: r.err });
  t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${s.secret}`);
  t.same(await s.exposed(), []);
});

t.test('built-in fetch after setGlobalDispatcher(new EnvHttpProxyAgent())', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await runJs(
    s,
    `undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
const res = await fetch(URL_BASE + '/v1/global', { headers: auth });
console.log(res.status + ' ' + (await res.json()).url);
await undici.getGlobalDispatcher().close();`,
  );
  t.equal(r.out, '200 /v1/global\n', { err: r.err });
  t.same(await s.exposed(), []);
});

t.test("undici's ProxyAgent given HTTPS_PROXY, and undici's fetch", async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await runJs(
    s,
    `const dispatcher = new undici.ProxyAgent(process.env.HTTPS_PROXY);
const a = await undici.request(URL_BASE + '/v1/pa/1', { headers: auth, dispatcher });
const b = await undici.fetch(URL_BASE + '/v1/pa/2', { headers: auth, dispatcher });
console.log(a.statusCode + ' ' + JSON.parse(await a.body.text()).url + ' ' + b.status + ' ' + (await b.json()).url);
await dispatcher.close();`,
  );
  t.equal(r.out, '200 /v1/pa/1 200 /v1/pa/2\n', { err: r.err });
  t.equal(s.up.requests.length, 2);
  t.same(await s.exposed(), []);
});

t.test('built-in fetch with a ReadableStream body (duplex half: chunked) through EnvHttpProxyAgent', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await runJs(
    s,
    `const dispatcher = new undici.EnvHttpProxyAgent();
let n = 0;
const body = new ReadableStream({ pull(c) { if (n++ < 64) c.enqueue(new Uint8Array(4096).fill(97)); else c.close(); } });
const res = await fetch(URL_BASE + '/v1/stream-up', { method: 'POST', headers: auth, body, duplex: 'half', dispatcher });
const j = await res.json();
console.log(res.status + ' ' + j.body.length + ' ' + (j.headers['transfer-encoding'] ?? 'cl=' + j.headers['content-length']));
await dispatcher.close();`,
  );
  t.equal(r.out.split(' ').slice(0, 2).join(' '), '200 262144', 'the whole body reached the upstream', {
    out: r.out,
    err: r.err,
  });
  t.same(await s.exposed(), []);
});

t.test(
  'built-in fetch with no dispatcher: Node 20 goes direct (NODE_USE_ENV_PROXY ignored), nothing reaches anyone',
  async (t) => {
    const s = await startProxyStack();
    t.teardown(() => s.close());
    const r = await runJs(
      s,
      `console.log('NODE_USE_ENV_PROXY=' + process.env.NODE_USE_ENV_PROXY);
const res = await fetch(URL_BASE + '/v1/direct', { headers: auth, signal: AbortSignal.timeout(10000) });
console.log('status ' + res.status);`,
    );
    // api.example.test exists only in the test's DNS server, which only the
    // daemon uses: a direct fetch cannot resolve it.
    t.match(r.out, /^NODE_USE_ENV_PROXY=1\nERR (ENOTFOUND|EAI_AGAIN)\n$/, 'a direct attempt that fails to resolve', {
      err: r.err,
    });
    t.equal(s.up.requests.length, 0);
    t.same(await s.exposed(), []);
  },
);
