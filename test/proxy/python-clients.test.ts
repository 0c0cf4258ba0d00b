// Python's standard urllib (not requests), and requests with a streamed
// (chunked, generator) upload and a stream=True download, through a real
// `postern run`. Each row: the exact outcome the client sees, and the
// secret in nothing the client printed, the daemon's log or the journal.
import t from 'tap';
import { createHash } from 'node:crypto';
import { startProxyStack } from '../helpers/proxy-stack';
import type { Handler } from '../helpers/https-upstream';
import { echo } from '../helpers/https-upstream';
import { makeCanary } from '../helpers/canary';

t.test('urllib.request GET with the placeholder as a Bearer token', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const py = s.h.file(
    'u.py',
    [
      'import os, sys, json, urllib.request',
      'req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]})',
      'with urllib.request.urlopen(req, timeout=20) as r:',
      '    sys.stdout.write(str(r.status) + " " + json.loads(r.read())["url"])',
    ].join('\n') + '\n',
  );
  const r = await s.run(['python3', py, s.url('api.example.test', '/v1/urllib?q=1')]);
  t.equal(r.code, 0, 'urllib succeeded', { stderr: r.stderr });
  t.equal(r.stdout.toString(), '200 /v1/urllib?q=1');
  t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${s.secret}`, 'the upstream saw the secret');
  t.same(await s.exposed(), []);
});

t.test('urllib HTTPBasicAuthHandler: challenged, then the placeholder as the Basic password', async (t) => {
  let secret = '';
  const handler: Handler = (req, body, res) => {
    if (req.headers['authorization'] !== `Basic ${Buffer.from(`bot:${secret}`).toString('base64')}`) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="api"', 'content-length': 0 });
      res.end();
      return;
    }
    return echo(req, body, res);
  };
  secret = makeCanary('PYBASIC');
  const s = await startProxyStack({ inject: 'basic_user = "bot"', handler, secret });
  t.teardown(() => s.close());
  const py = s.h.file(
    'b.py',
    [
      'import os, sys, json, urllib.request',
      'pm = urllib.request.HTTPPasswordMgrWithDefaultRealm()',
      'pm.add_password(None, sys.argv[1], "bot", os.environ["GH_TOKEN"])',
      'op = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(pm))',
      'try:',
      '    with op.open(sys.argv[1], timeout=20) as r:',
      '        sys.stdout.write(str(r.status) + " " + json.loads(r.read())["url"])',
      'except urllib.error.HTTPError as e:',
      '    sys.stdout.write(str(e.code) + " " + e.read().decode())',
    ].join('\n') + '\n',
  );
  const r = await s.run(['python3', py, s.url('api.example.test', '/v1/basic')]);
  t.equal(r.code, 0, 'urllib succeeded', { stderr: r.stderr });
  t.equal(r.stdout.toString(), '200 /v1/basic');
  t.same(
    s.up.requests.map((q) => q.headers['authorization'] === undefined),
    [true, false],
    'first unauthenticated (401), then with the injected Basic',
  );
  t.same(await s.exposed(), []);
});

t.test('requests: a generator body (chunked) of 600 KiB reaches the upstream whole', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const py = s.h.file(
    'up.py',
    [
      'import os, sys, requests',
      'def gen():',
      '    for i in range(600):',
      '        yield bytes([65 + i % 26]) * 1024',
      'r = requests.post(sys.argv[1], data=gen(), headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]}, timeout=30)',
      'sys.stdout.write(str(r.status_code) + " " + str(len(r.json()["body"])))',
    ].join('\n') + '\n',
  );
  const r = await s.run(['python3', py, s.url('api.example.test', '/v1/upload')]);
  t.equal(r.code, 0, 'requests succeeded', { stderr: r.stderr });
  t.equal(r.stdout.toString(), '200 614400', 'the echo counted every byte');
  const seen = s.up.requests[0];
  t.equal(seen?.body.length, 614400, 'the upstream got the whole body');
  t.equal(seen?.headers['authorization'], `Bearer ${s.secret}`);
  t.same(await s.exposed(), []);
});

t.test('requests: a generator body over http.max_request_body gets 413 body_too_large', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const py = s.h.file(
    'big.py',
    [
      'import os, sys, requests',
      'def gen():',
      '    for i in range(2048):',
      '        yield b"x" * 1024',
      'r = requests.post(sys.argv[1], data=gen(), headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]}, timeout=30)',
      'sys.stdout.write(str(r.status_code) + " " + r.headers.get("x-postern-error", "-") + " " + r.json()["error"]["message"])',
    ].join('\n') + '\n',
  );
  const r = await s.run(['python3', py, s.url('api.example.test', '/v1/upload')]);
  t.equal(r.code, 0, 'requests got an answer', { stderr: r.stderr });
  t.match(r.stdout.toString(), /^413 body_too_large .*http\.max_request_body/, 'the 413 naming the setting');
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.same(await s.exposed(), []);
});

t.test('requests stream=True: a 5 MiB download arrives whole, the secret inside it redacted', async (t) => {
  let secret = '';
  const big = Buffer.alloc(5 * 1024 * 1024, 'abcdefghij');
  const handler: Handler = (_req, _body, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    // in pieces, with the secret in the middle of the stream
    let i = 0;
    const step = (): void => {
      if (i >= big.length) {
        res.end();
        return;
      }
      res.write(big.subarray(i, i + 256 * 1024));
      if (i === 2 * 1024 * 1024) res.write(secret);
      i += 256 * 1024;
      setImmediate(step);
    };
    step();
  };
  secret = makeCanary('PYSTREAM');
  const s = await startProxyStack({ handler, secret });
  t.teardown(() => s.close());
  const py = s.h.file(
    'down.py',
    [
      'import os, sys, hashlib, requests',
      'h = hashlib.sha256(); n = 0; found = b""',
      'with requests.get(sys.argv[1], stream=True, headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]}, timeout=30) as r:',
      '    for chunk in r.iter_content(65536):',
      '        h.update(chunk); n += len(chunk)',
      '        if b"[REDACTED" in chunk: found = b"mark"',
      '        if b"PYSTREAM" in chunk: found = b"SECRET"',
      '    sys.stdout.write("%d %d %s %s" % (r.status_code, n, h.hexdigest(), found.decode()))',
    ].join('\n') + '\n',
  );
  const r = await s.run(['python3', py, s.url('api.example.test', '/v1/download')]);
  t.equal(r.code, 0, 'requests succeeded', { stderr: r.stderr });
  const mark = Buffer.from('[REDACTED:github]');
  const expected = Buffer.concat([
    big.subarray(0, 2 * 1024 * 1024 + 256 * 1024),
    mark,
    big.subarray(2 * 1024 * 1024 + 256 * 1024),
  ]);
  const hash = createHash('sha256').update(expected).digest('hex');
  t.equal(r.stdout.toString(), `200 ${expected.length} ${hash} mark`, 'every byte, the secret replaced by the mark');
  t.same(await s.exposed(), []);
});
