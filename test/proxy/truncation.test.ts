// A response body longer than http.max_response_body through `postern run`
// (SPEC §6.4: capped, truncation flagged). Ended as if whole, the cut body
// would pass for a complete one: curl would exit 0 with part of a file, a
// JSON client would get a parse error far from its cause. So the message is
// closed unfinished after the bytes up to the cap, and real clients report
// it: curl exits 18 ("transfer closed with outstanding read data
// remaining"), Python requests raises ChunkedEncodingError, undici rejects.
// The client has exactly the cap's bytes; the outcome says truncated; a body
// within the cap is ended as usual.
import t from 'tap';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, sh } from '../helpers/proxy-stack';
import { auditList } from '../helpers/stack';

const CAP = 64 * 1024;
const BIG = 300 * 1024;
const SMALL = 10 * 1024;

// Declared length or chunked; either way the client gets it chunked.
// A pattern whose period divides the chunk size: the pieces join up.
const body = (n: number): Buffer => Buffer.alloc(n, 'abcdefgh');

t.test('a body cut at max_response_body reaches real clients unfinished, never as if whole', async (t) => {
  const s = await startProxyStack({
    httpConfig: `max_response_body = "${CAP / 1024}KiB"`,
    handler: (req, _body, res) => {
      const n = req.url?.startsWith('/v1/small') ? SMALL : BIG;
      if (req.url?.includes('chunked')) {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        for (let at = 0; at < n; at += 16 * 1024) res.write(body(Math.min(16 * 1024, n - at)));
        res.end();
      } else {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(n) });
        res.end(body(n));
      }
    },
  });
  t.teardown(() => s.close());
  const out = (name: string): string => join(s.h.dir, name);

  await t.test('curl: exit 18, the bytes up to the cap', async (t) => {
    for (const path of ['/v1/big', '/v1/big?chunked=1']) {
      const file = out(`curl-${path.length}`);
      const r = await s.run(
        sh(`curl -sS --max-time 20 -o ${file} -H "Authorization: Bearer $GH_TOKEN" ${s.url('api.example.test', path)}`),
      );
      t.equal(r.code, 18, `${path}: curl reports the transfer incomplete (${r.stderr.trim()})`);
      t.match(r.stderr, /transfer closed with outstanding read data remaining/);
      t.ok(
        readFileSync(file).equals(body(CAP)),
        `${path}: exactly the first ${CAP} bytes (got ${readFileSync(file).length})`,
      );
    }
  });

  await t.test('curl: a body within the cap is whole, exit 0', async (t) => {
    const file = out('curl-small');
    const r = await s.run(
      sh(
        `curl -sS --max-time 20 -o ${file} -H "Authorization: Bearer $GH_TOKEN" ${s.url('api.example.test', '/v1/small')}`,
      ),
    );
    t.equal(r.code, 0, r.stderr);
    t.ok(readFileSync(file).equals(body(SMALL)), 'the whole body');
  });

  await t.test('Python requests: ChunkedEncodingError, not a short body', async (t) => {
    const script = out('get.py');
    writeFileSync(
      script,
      [
        'import os, sys, requests',
        'try:',
        "    r = requests.get(sys.argv[1], headers={'Authorization': 'Bearer ' + os.environ['GH_TOKEN']}, timeout=20)",
        "    print('whole', len(r.content))",
        'except requests.exceptions.ChunkedEncodingError as e:',
        "    print('incomplete')",
      ].join('\n'),
    );
    const r = await s.run(['python3', script, s.url('api.example.test', '/v1/big')]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.toString().trim(), 'incomplete');
  });

  await t.test('the outcomes: truncated, no error; the small one whole', async (t) => {
    const outcomes = auditList<{ kind: string; truncated?: boolean; error?: string; bytes?: number }>(s).filter(
      (e) => e.kind === 'http_outcome',
    );
    t.equal(outcomes.length, 4, 'four requests, four outcomes');
    t.same(
      outcomes.map((o) => [o.truncated, o.error]),
      [
        [true, undefined],
        [true, undefined],
        [false, undefined],
        [true, undefined],
      ],
    );
    t.same(await s.exposed(), []);
  });
});
