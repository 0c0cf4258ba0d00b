// git over HTTPS through `postern run` with what real repositories bring:
// a pack of megabytes, protocol v2 with a partial clone (blobs fetched
// lazily at checkout, each a new POST), a fetch of new commits, and a push
// whose pack is over git's http.postBuffer (1 MiB: sent chunked). The
// server is Debian's git http-backend wanting Basic x-access-token:<secret>.
import t from 'tap';
import type { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startProxyStack, sh, ProxyStack } from '../helpers/proxy-stack';
import { gitHttpAvailable, gitHttpHandler, makeBareRepo } from '../helpers/git-http-server';
import { makeCanary } from '../helpers/canary';

const GIT = 'git -c user.name=agent -c user.email=agent@example.test -c credential.helper= -c protocol.version=2';

// A bare repository with `mib` MiB of incompressible files over 4 commits.
function bigRepo(root: string, name: string, mib: number): string {
  const bare = makeBareRepo(root, name);
  execFileSync('git', ['config', 'uploadpack.allowFilter', 'true'], { cwd: bare });
  execFileSync('git', ['config', 'uploadpack.allowAnySHA1InWant', 'true'], { cwd: bare });
  const seed = `${bare}-seed`;
  const per = Math.max(1, Math.floor((mib * 1024) / 4));
  execFileSync(
    'sh',
    [
      '-c',
      `set -e; for i in 1 2 3 4; do head -c ${per}K /dev/urandom > blob$i.bin; git add blob$i.bin; git -c user.name=s -c user.email=s@e.t commit -qm "c$i"; done; git push -q ${bare} HEAD:main`,
    ],
    { cwd: seed },
  );
  return bare;
}

async function gitStack(
  t: Test,
  httpConfig?: string,
): Promise<{ s: ProxyStack; root: string; remote: (n: string) => string }> {
  const root = mkdtempSync(join(tmpdir(), 'pt-gitbig-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const secret = makeCanary('GITBIG');
  const s = await startProxyStack({
    names: ['git.example.test'],
    records: { 'git.example.test': { A: ['127.0.0.1'] } },
    handler: gitHttpHandler(root, secret),
    inject: 'basic_user = "x-access-token"',
    secret,
    httpConfig,
  });
  t.teardown(() => s.close());
  return { s, root, remote: (n) => `https://x-access-token:$GH_TOKEN@git.example.test:${s.up.port}/${n}` };
}

// A missing git fails rather than skips: .ci/run installs it.
const missing = gitHttpAvailable();
if (missing !== null) t.fail(`git with its smart-HTTP backend is needed (Debian git): ${missing}`);

t.test('default limits: a 3 MiB clone (v2), a partial clone with lazy blob fetches', async (t) => {
  const { s, root, remote } = await gitStack(t);
  bigRepo(root, 'big.git', 3);
  const work = join(s.h.dir, 'w');
  mkdirSync(work);
  const r = await s.run(
    sh(
      [
        'set -e',
        `cd ${work}`,
        `${GIT} clone -q "${remote('big.git')}" full`,
        'git -C full rev-list --count HEAD',
        `${GIT} clone -q --filter=blob:none --no-checkout "${remote('big.git')}" partial`,
        'cd partial',
        // each missing blob is fetched through the proxy at checkout
        `${GIT} checkout -q main`,
        'cat blob*.bin | sha256sum | cut -c1-16',
        'cat ../full/blob*.bin | sha256sum | cut -c1-16',
      ].join('\n'),
    ),
    { GIT_TERMINAL_PROMPT: '0' },
  );
  t.equal(r.code, 0, 'clone, partial clone and checkout succeeded', { stderr: r.stderr });
  const [count, a, b] = r.stdout.toString().trim().split('\n');
  t.equal(count, '5', 'all commits');
  t.equal(a, b, 'the lazily fetched blobs are the same as the full clone');
  t.ok(
    s.up.requests.filter((q) => q.method === 'POST' && q.url.endsWith('git-upload-pack')).length >= 3,
    'v2 POSTs: ls-refs, the clones, the lazy fetch',
  );
  t.same(await s.exposed(), []);
});

t.test(
  'default limits: a push of a 3 MiB pack (chunked) is refused 413 (git shows only "HTTP 413", not the setting to raise)',
  async (t) => {
    const { s, root, remote } = await gitStack(t);
    makeBareRepo(root, 'push.git');
    const work = join(s.h.dir, 'w');
    mkdirSync(work);
    const r = await s.run(
      sh(
        [
          'set -e',
          `cd ${work}`,
          `${GIT} clone -q "${remote('push.git')}" c`,
          'cd c',
          'head -c 3M /dev/urandom > big.bin',
          'git add big.bin',
          `${GIT} commit -qm big`,
          `${GIT} push origin HEAD:main 2>&1 || echo "push exit $?"`,
        ].join('\n'),
      ),
      { GIT_TERMINAL_PROMPT: '0' },
    );
    const out = r.stdout.toString();
    t.match(out, /HTTP 413/, 'git says 413', { out });
    t.match(out, /push exit [1-9]/, 'the push failed');
    t.notOk(
      s.up.requests.some((q) => q.url.endsWith('git-receive-pack') && q.method === 'POST' && q.body.length > 1024),
      'no pack reached the server',
    );
    t.same(await s.exposed(), []);
  },
);

t.test('raised limits: a 12 MiB clone and a 3 MiB chunked push succeed', async (t) => {
  const { s, root, remote } = await gitStack(t, 'max_request_body = "16MiB"\nmax_response_body = "64MiB"');
  bigRepo(root, 'huge.git', 12);
  const pushRepo = makeBareRepo(root, 'push.git');
  const work = join(s.h.dir, 'w');
  mkdirSync(work);
  const r = await s.run(
    sh(
      [
        'set -e',
        `cd ${work}`,
        `${GIT} clone -q "${remote('huge.git')}" huge`,
        'du -sk huge --exclude=.git | cut -f1',
        `${GIT} clone -q "${remote('push.git')}" c`,
        'cd c',
        'head -c 3M /dev/urandom > big.bin',
        'git add big.bin',
        `${GIT} commit -qm big`,
        `${GIT} push -q origin HEAD:main`,
      ].join('\n'),
    ),
    { GIT_TERMINAL_PROMPT: '0' },
  );
  t.equal(r.code, 0, 'clone and push succeeded', { stderr: r.stderr });
  t.ok(Number(r.stdout.toString().trim()) >= 12 * 1024, 'the whole working tree', { out: r.stdout.toString() });
  const log = execFileSync('git', ['log', '--format=%s', 'main'], { cwd: pushRepo, encoding: 'utf8' });
  t.equal(log.split('\n')[0], 'big', 'the push reached the server');
  const packPost = s.up.requests.find((q) => q.url.endsWith('git-receive-pack') && q.body.length > 1024 * 1024);
  t.ok(packPost, 'the pack went as one large POST');
  t.same(await s.exposed(), []);
});

// The placeholder is random per run; a clone made with it in the remote URL
// (README's `https://x-access-token:$GH_TOKEN@…` pattern, used with clone)
// keeps that run's placeholder in .git/config.
t.test(
  'a later run fetching: the URL keeps an old placeholder (400, nothing sent); a helper reading $GH_TOKEN works',
  async (t) => {
    const { s, root, remote } = await gitStack(t);
    const bare = makeBareRepo(root, 'f.git');
    const work = join(s.h.dir, 'w');
    mkdirSync(work);
    const helper = `credential.helper='!f() { echo username=x-access-token; echo "password=$GH_TOKEN"; }; f'`;
    const base = remote('f.git').replace('x-access-token:$GH_TOKEN@', '');
    const c = await s.run(
      sh(
        `set -e; cd ${work}; ${GIT} clone -q "${remote('f.git')}" inurl; git clone -q -c ${helper} "${base}" helped; git -C inurl config remote.origin.url | grep -c 'postern-github-'`,
      ),
      { GIT_TERMINAL_PROMPT: '0' },
    );
    t.equal(c.code, 0, 'both clones made', { stderr: c.stderr });
    t.equal(c.stdout.toString(), '1\n', 'the first kept the placeholder in .git/config');
    execFileSync(
      'sh',
      [
        '-c',
        `echo more > more.txt && git add more.txt && git -c user.name=s -c user.email=s@e.t commit -qm c2 && git push -q ${bare} HEAD:main`,
      ],
      { cwd: `${bare}-seed` },
    );
    const before = s.up.requests.length;
    const old = await s.run(sh(`cd ${work}/inurl; git fetch -q origin`), { GIT_TERMINAL_PROMPT: '0' });
    t.equal(old.code, 128, 'the fetch with the old placeholder failed');
    t.match(
      old.stderr,
      /The requested URL returned error: 400/,
      'git shows only "400": the reason is in the body git does not print',
    );
    t.same(
      s.up.requests.slice(before).map((q) => q.headers['authorization'] ?? 'none'),
      ['none'],
      'only the unauthenticated first request reached the server (its 401 made git send the placeholder)',
    );
    const helped = await s.run(sh(`set -e; cd ${work}/helped; git fetch -q origin; git rev-list --count origin/main`), {
      GIT_TERMINAL_PROMPT: '0',
    });
    t.equal(helped.code, 0, 'the fetch through a helper succeeded', { stderr: helped.stderr });
    t.equal(helped.stdout.toString(), '2\n', 'the new commit fetched');
    t.same(await s.exposed(), []);
  },
);
