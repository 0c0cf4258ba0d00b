// A legitimate HTTP/1.1 pipelining client through the proxy, since pipelined
// requests run in turn: all answered, in order, each sent once; a 413 that
// keeps the connection (the body read and dropped) followed by a request; a
// HEAD in the pipe.
import t from 'tap';
import { startProxyStack } from '../helpers/proxy-stack';
import { runCases, parseResponses, type Case } from '../helpers/proxy-sequence-client';

t.test('pipelining through the proxy', async (t) => {
  const s = await startProxyStack({
    httpConfig: 'max_request_body = "1KiB"',
    methods: ['GET', 'POST', 'HEAD'],
    handler: (req, _body, res) => {
      const b = `seen:${req.method} ${req.url}`;
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(b) });
        res.end(req.method === 'HEAD' ? undefined : b);
      }, 100);
    },
  });
  t.teardown(() => s.close());
  const A = `api.example.test:${s.up.port}`;
  const get = (p: string, m = 'GET'): string => `${m} ${p} HTTP/1.1\r\nHost: ${A}\r\n\r\n`;
  const N = 20;
  const cases: Case[] = [
    {
      id: 'pipe20',
      connect: A,
      writes: [{ data: Array.from({ length: N }, (_, i) => get(`/p${i}`)).join('') }],
      idle: 4000,
    },
    {
      id: 'head-in-pipe',
      connect: A,
      writes: [{ data: get('/h1') + get('/h2', 'HEAD') + get('/h3') }],
      idle: 3000,
    },
    {
      id: 'drained-413-then-get',
      connect: A,
      writes: [
        {
          data: `POST /big HTTP/1.1\r\nHost: ${A}\r\ncontent-type: text/plain\r\ncontent-length: 4096\r\n\r\n${'x'.repeat(4096)}${get('/after413')}`,
        },
      ],
      idle: 3000,
    },
  ];
  const started = Date.now();
  const run = await runCases(s.h, cases);
  t.comment(`all cases took ${Date.now() - started} ms; stderr ${run.stderr.slice(0, 200)}`);
  const pipe = run.got.get('pipe20');
  const r = parseResponses(Buffer.from(pipe?.raw ?? '', 'base64')).responses;
  t.equal(r.length, N, `${N} answers (${r.length}; ${pipe?.error ?? ''})`);
  t.same(
    r.map((x) => x.body),
    Array.from({ length: N }, (_, i) => `seen:GET /p${i}`),
    'in order',
  );
  const seen = s.up.requests.filter((q) => /^\/p\d+$/.test(q.url)).length;
  t.equal(seen, N, 'each reached the upstream once');

  // parseResponses reads a HEAD answer's content-length as a body: read raw.
  const hraw = Buffer.from(run.got.get('head-in-pipe')?.raw ?? '', 'base64').toString('latin1');
  t.comment(`head-in-pipe raw: ${JSON.stringify(hraw.replace(/date: [^\r]*/gi, ''))}`);
  t.equal(hraw.split('HTTP/1.1 200').length - 1, 3, 'three answers');
  t.ok(/seen:GET \/h3\r\n0\r\n\r\n$/.test(hraw), 'the GET after HEAD gets its own body, last');
  t.notOk(hraw.includes('seen:HEAD'), 'the HEAD answer carries no body');

  const d = parseResponses(Buffer.from(run.got.get('drained-413-then-get')?.raw ?? '', 'base64')).responses;
  t.comment(`drained: ${d.map((x) => `${x.status}:${x.body.slice(0, 60)}`).join(' | ')}`);
  t.equal(d[0]?.status, 413, '413 first');
  t.equal(d[1]?.body, 'seen:GET /after413', 'then the next request on the same connection');
});
