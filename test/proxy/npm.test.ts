// npm through `postern run` against a private registry (a local HTTPS
// stand-in requiring the token), as people use it: `.npmrc` names the
// registry and `_authToken=${GH_TOKEN}`, so npm sends the placeholder as
// a Bearer token through HTTPS_PROXY, trusting postern's CA through
// NODE_EXTRA_CA_CERTS. The first install fetches the packument and the
// tarball (its integrity checked by npm); the second revalidates the
// packument with If-None-Match and gets a 304 carrying the Content-Length
// a 200 would have had (RFC 9110 §8.6), the answer that used to be a 502.
// The registry saw the real token on every request, npm only the
// placeholder, and no form of the secret is in anything postern or npm
// emitted.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, sh } from '../helpers/proxy-stack';
import { exposures } from '../helpers/exposure';

const ETAG = '"packument-1"';

interface Hit {
  method: string;
  url: string;
  ifNoneMatch: string | undefined;
  authorization: string | undefined;
  status: number;
}

t.test('npm install from a private registry, then again revalidating with a 304', async (t) => {
  let tarball = Buffer.alloc(0);
  let port = 0;
  let secret = '';
  const hits: Hit[] = [];
  const s = await startProxyStack({
    methods: ['GET'],
    handler: (req, _body, res) => {
      const answer = (status: number, headers: Record<string, string>, body?: Buffer | string): void => {
        hits.push({
          method: req.method ?? '',
          url: req.url ?? '',
          ifNoneMatch: req.headers['if-none-match'],
          authorization: req.headers.authorization,
          status,
        });
        res.writeHead(status, headers);
        res.end(body);
      };
      if (req.headers.authorization !== `Bearer ${secret}`)
        return answer(401, { 'content-type': 'application/json' }, '{"error":"token required"}');
      if (req.url === '/demo-pkg') {
        if (req.headers['if-none-match'] === ETAG) return answer(304, { etag: ETAG, 'content-length': '321' });
        const packument = JSON.stringify({
          name: 'demo-pkg',
          'dist-tags': { latest: '1.0.0' },
          versions: {
            '1.0.0': {
              name: 'demo-pkg',
              version: '1.0.0',
              dist: {
                tarball: `https://api.example.test:${port}/demo-pkg/-/demo-pkg-1.0.0.tgz`,
                integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
              },
            },
          },
        });
        return answer(200, { 'content-type': 'application/json', etag: ETAG, 'cache-control': 'max-age=0' }, packument);
      }
      if (req.url === '/demo-pkg/-/demo-pkg-1.0.0.tgz')
        return answer(
          200,
          { 'content-type': 'application/octet-stream', 'content-length': String(tarball.length) },
          tarball,
        );
      return answer(404, { 'content-type': 'application/json' }, '{}');
    },
  });
  t.teardown(() => s.close());
  port = s.up.port;
  secret = s.secret;

  const source = join(s.h.dir, 'source', 'package');
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'package.json'), JSON.stringify({ name: 'demo-pkg', version: '1.0.0' }));
  writeFileSync(join(source, 'index.js'), 'module.exports = "the answer from demo-pkg";\n');
  execFileSync('tar', ['czf', join(s.h.dir, 'demo-pkg.tgz'), '-C', join(s.h.dir, 'source'), 'package']);
  tarball = readFileSync(join(s.h.dir, 'demo-pkg.tgz'));

  const project = join(s.h.dir, 'project');
  mkdirSync(project);
  writeFileSync(
    join(project, '.npmrc'),
    `registry=https://api.example.test:${port}/\n//api.example.test:${port}/:_authToken=\${GH_TOKEN}\n`,
  );
  const cache = join(s.h.dir, 'npm-cache');
  const install = () =>
    s.run(
      sh(
        `cd ${project} && npm install demo-pkg --no-audit --no-fund --no-update-notifier --cache ${cache} --prefer-online && node -e 'console.log(require("demo-pkg"))'`,
      ),
    );

  const first = await install();
  t.equal(first.code, 0, 'the first install succeeded', { stderr: first.stderr });
  t.match(first.stdout.toString(), /the answer from demo-pkg/, 'the package installed works');
  t.same(
    hits.map((h) => [h.url, h.status]),
    [
      ['/demo-pkg', 200],
      ['/demo-pkg/-/demo-pkg-1.0.0.tgz', 200],
    ],
    'the packument, then the tarball',
  );

  const second = await install();
  t.equal(second.code, 0, 'the second install succeeded', { stderr: second.stderr });
  t.match(second.stdout.toString(), /the answer from demo-pkg/);
  const revalidated = hits.slice(2);
  t.same(
    revalidated.map((h) => [h.url, h.ifNoneMatch, h.status]),
    [['/demo-pkg', ETAG, 304]],
    'the packument revalidated with If-None-Match, answered 304',
  );
  t.ok(
    hits.every((h) => h.authorization === `Bearer ${secret}`),
    'the registry saw the real token on every request',
  );
  t.same(exposures(readFileSync(join(project, '.npmrc')), secret), [], '.npmrc holds no form of the secret');
  t.same(await s.exposed(), [], "no form of the secret in npm's output, the daemon log or the journal");
});
