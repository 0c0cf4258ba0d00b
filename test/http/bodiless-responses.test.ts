// Responses that have no body whatever their headers say (RFC 9110 §6.4.1),
// through both front doors: a 304 to a conditional GET carrying the
// Content-Length a 200 would have had (§8.6 allows it; ASP.NET, Tornado and
// others send it), a 204 with Content-Length: 0, a 304 without one, and the
// answer to HEAD with the length of what GET would get. undici took a 304's
// Content-Length for its body's and failed the empty body as a length
// mismatch, so every conditional request to such a server was a 502
// upstream_error that may have executed, and through `postern run` curl
// got an empty reply. Asserted: the agent gets the status and headers with
// an empty body, the journal's outcome has the status and no error, the
// upstream saw each request once, and a request after each, on the same
// connections, is answered as usual. Through the proxy, the content-length
// of the answer to HEAD and of a 304 is passed on (it frames nothing there
// and tells the size of what a GET would get: `curl -I`, a download's
// size before it begins); a 204's is not.
import t from 'tap';
import type { Test } from 'tap';
import { startProxyStack, sh, ProxyStack } from '../helpers/proxy-stack';
import { auditList } from '../helpers/stack';
import { exposures } from '../helpers/exposure';

const ETAG = '"v1-0123456789"';
const FULL_LENGTH = 1234;

interface Outcome {
  kind: string;
  status?: number;
  error?: string;
}

function handler(req: { url?: string; method?: string }, res: import('node:http').ServerResponse): void {
  const path = req.url ?? '';
  if (path.startsWith('/v1/not-modified-length')) {
    res.writeHead(304, { etag: ETAG, 'content-length': String(FULL_LENGTH) });
    res.end();
  } else if (path.startsWith('/v1/not-modified')) {
    res.writeHead(304, { etag: ETAG });
    res.end();
  } else if (path.startsWith('/v1/no-content')) {
    res.writeHead(204, { 'content-length': '0', 'x-done': 'yes' });
    res.end();
  } else if (path.startsWith('/v1/file')) {
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': String(FULL_LENGTH),
      etag: ETAG,
    });
    res.end(req.method === 'HEAD' ? undefined : Buffer.alloc(FULL_LENGTH, 'a'));
  } else {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path }));
  }
}

// `length`: the content-length the client of the proxy gets (what a GET
// would get), or none.
const ROWS: {
  path: string;
  method: 'GET' | 'HEAD';
  status: number;
  headers: Record<string, string>;
  length: string | null;
}[] = [
  {
    path: '/v1/not-modified-length',
    method: 'GET',
    status: 304,
    headers: { etag: ETAG },
    length: String(FULL_LENGTH),
  },
  { path: '/v1/not-modified', method: 'GET', status: 304, headers: { etag: ETAG }, length: null },
  { path: '/v1/no-content', method: 'GET', status: 204, headers: { 'x-done': 'yes' }, length: null },
  { path: '/v1/file', method: 'HEAD', status: 200, headers: { etag: ETAG }, length: String(FULL_LENGTH) },
];

function outcomes(s: ProxyStack): Outcome[] {
  return auditList<Outcome>(s).filter((e) => e.kind === 'http_outcome');
}

function lastOutcome(s: ProxyStack): Outcome | undefined {
  return outcomes(s).at(-1);
}

function seen(s: ProxyStack, path: string): number {
  return s.up.requests.filter((r) => r.url === path).length;
}

let s: ProxyStack;
const replies: string[] = [];
t.before(async () => {
  s = await startProxyStack({ methods: ['GET', 'HEAD'], handler: (req, _body, res) => handler(req, res) });
});
t.teardown(() => s.close());

t.test('POST /v1/http: the status and headers, an empty body, no error', async (t) => {
  for (const row of ROWS) {
    await t.test(`${row.method} ${row.path}`, async (t: Test) => {
      const r = await s.request({
        credential: s.credential,
        method: row.method,
        url: s.url('api.example.test', row.path),
        headers: { 'if-none-match': ETAG },
      });
      replies.push(r.text);
      t.equal(r.status, 200, r.text);
      const reply = r.json as { status: number; body: string; headers: Record<string, string>; truncated: boolean };
      t.equal(reply.status, row.status, 'the upstream status');
      t.equal(reply.body, '', 'no body');
      t.equal(reply.truncated, false, 'not truncated');
      for (const [k, v] of Object.entries(row.headers)) t.equal(reply.headers[k], v, `header ${k}`);
      t.equal(lastOutcome(s)?.status, row.status, 'the outcome has the status');
      t.equal(lastOutcome(s)?.error, undefined, 'and no error');
      t.equal(seen(s, row.path), 1, 'the upstream saw it once');
      const next = await s.request({
        credential: s.credential,
        method: 'GET',
        url: s.url('api.example.test', `/v1/after${row.path}`),
      });
      t.equal((next.json as { status?: number }).status, 200, 'a request after it is answered');
      s.up.requests.length = 0;
    });
  }
});

t.test('through postern run: curl gets the status and headers, and exits 0', async (t) => {
  // One curl per row, then a GET on the same curl connection (curl reuses
  // it for a second URL of the same host).
  for (const row of ROWS) {
    await t.test(`${row.method} ${row.path}`, async (t: Test) => {
      const url = s.url('api.example.test', row.path);
      const after = s.url('api.example.test', `/v1/after${row.path}`);
      const head = row.method === 'HEAD' ? '-I' : '';
      const r = await s.run(
        sh(
          `curl -sS --max-time 20 ${head} -D - -o /dev/null -H "Authorization: Bearer $GH_TOKEN" -H 'If-None-Match: ${ETAG}' ${url} ` +
            `--next -sS --max-time 20 -o /dev/null -w 'after=%{http_code} reused=%{num_connects}\\n' -H "Authorization: Bearer $GH_TOKEN" ${after}`,
        ),
      );
      const out = r.stdout.toString();
      t.equal(r.code, 0, 'curl exited 0', { stderr: r.stderr, out });
      t.match(
        out,
        new RegExp(`^HTTP/1\\.1 200 Connection Established\\r\\n\\r\\nHTTP/1\\.1 ${row.status} `),
        'the status',
      );
      for (const [k, v] of Object.entries(row.headers)) t.match(out, `\n${k}: ${v}\r\n`, `header ${k}`);
      const length = /\r\ncontent-length: *([^\r]*)\r\n/i.exec(out)?.[1] ?? null;
      t.equal(length, row.length, 'the content-length a GET would get, where the upstream gave one');
      t.notMatch(out, /transfer-encoding/i, 'no transfer-encoding on a message without a body');
      t.match(out, /after=200 reused=0/, 'the next request on the same connection is answered');
      t.same(
        outcomes(s).filter((o) => o.error !== undefined),
        [],
        'no outcome has an error',
      );
      t.ok(
        outcomes(s).some((o) => o.status === row.status),
        `an outcome with status ${row.status}`,
      );
      t.equal(seen(s, row.path), 1, 'the upstream saw it once');
      s.up.requests.length = 0;
    });
  }
  t.same(exposures(replies.join('\n'), s.secret), [], 'no form of the secret in the JSON replies');
  t.same(await s.exposed(), [], "nor in curl's output, the daemon log or the journal");
});
