// git clone and git push over HTTPS through `postern run` (SPEC §11): a
// smart-HTTP server (git http-backend) that wants Basic
// x-access-token:<secret>; git has only the placeholder as the password in
// the remote URL. Its first request carries no credentials and is sent as
// is; the 401 challenge makes git retry with the placeholder, which postern
// replaces with the real Basic injection.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startProxyStack, sh } from '../helpers/proxy-stack';
import { gitHttpAvailable, gitHttpHandler, makeBareRepo } from '../helpers/git-http-server';
import { makeCanary } from '../helpers/canary';

t.test('clone and push with the placeholder as the password', async (t) => {
  const missing = gitHttpAvailable();
  if (missing !== null) {
    t.fail(`git with its smart-HTTP backend is needed (Debian git): ${missing}`);
    return;
  }
  const root = mkdtempSync(join(tmpdir(), 'pt-git-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const bare = makeBareRepo(root, 'repo.git');
  const secret = makeCanary('GITSECRET');
  const s = await startProxyStack({
    names: ['git.example.test'],
    records: { 'git.example.test': { A: ['127.0.0.1'] } },
    handler: gitHttpHandler(root, secret),
    inject: 'basic_user = "x-access-token"',
    secret,
  });
  t.teardown(() => s.close());
  const work = join(s.h.dir, 'work');
  mkdirSync(work);
  const remote = `https://x-access-token:$GH_TOKEN@git.example.test:${s.up.port}/repo.git`;
  const git = 'git -c user.name=agent -c user.email=agent@example.test -c credential.helper= -c protocol.version=2';
  const r = await s.run(
    sh(
      [
        'set -e',
        `cd ${work}`,
        `${git} clone -q "${remote}" clone`,
        'cd clone',
        'cat README',
        'echo "from the agent" > NOTE',
        'git add NOTE',
        `${git} commit -q -m "a change pushed through postern"`,
        `${git} push -q origin HEAD:main`,
      ].join('\n'),
    ),
    { GIT_TERMINAL_PROMPT: '0' },
  );
  t.equal(r.code, 0, 'clone, commit and push succeeded', { stderr: r.stderr });
  t.equal(r.stdout.toString(), 'hello\n', 'the clone holds the repository');
  const log = execFileSync('git', ['log', '--format=%s', 'main'], { cwd: bare, encoding: 'utf8' });
  t.equal(log.split('\n')[0], 'a change pushed through postern', 'the push reached the server');

  const expected = `Basic ${Buffer.from(`x-access-token:${secret}`).toString('base64')}`;
  const auths = s.up.requests.map((q) => q.headers['authorization']);
  t.ok(auths.includes(undefined), 'git first asked without credentials, sent as is');
  t.ok(auths.includes(expected), 'the server saw the real secret as the Basic password');
  t.ok(
    s.up.requests.some((q) => q.url.includes('git-receive-pack') && q.method === 'POST'),
    'the push went through',
  );
  t.same(await s.exposed(), []);
});
