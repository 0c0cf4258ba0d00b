// gh, GitHub's CLI, through `postern run` (SPEC §11), pointed at a local
// GitHub Enterprise-style API: GH_HOST names the host, GH_ENTERPRISE_TOKEN
// holds the placeholder (the credential's env names it), and gh reads
// HTTPS_PROXY and SSL_CERT_FILE like any Go program. The upstream answers
// /api/v3/user as GitHub does and sees the real token.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, sh } from '../helpers/proxy-stack';
import type { Handler } from '../helpers/https-upstream';

const user: Handler = (req, _body, res) => {
  const text = JSON.stringify({ login: 'octo-agent', id: 1, url: req.url });
  res.writeHead(req.url === '/api/v3/user' ? 200 : 404, {
    'content-type': 'application/json; charset=utf-8',
    'x-github-media-type': 'github.v3; format=json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
};

t.test('gh api user against a local API', async (t) => {
  // A missing gh fails rather than skips: .ci/run installs Debian's gh.
  const probe = spawnSync('gh', ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    t.fail(`gh is needed (Debian gh): ${probe.error?.message ?? probe.stderr}`);
    return;
  }
  const s = await startProxyStack({ handler: user, inject: 'header = "Authorization"\ntemplate = "token {secret}"' });
  t.teardown(() => s.close());
  const config = join(s.h.dir, 'gh-config');
  mkdirSync(config);
  const r = await s.run(sh(`GH_ENTERPRISE_TOKEN="$GH_TOKEN" exec gh api user --jq .login`), {
    GH_HOST: `api.example.test:${s.up.port}`,
    GH_CONFIG_DIR: config,
    GH_NO_UPDATE_NOTIFIER: '1',
    GH_PROMPT_DISABLED: '1',
  });
  t.equal(r.code, 0, 'gh succeeded', { stderr: r.stderr });
  t.equal(r.stdout.toString(), 'octo-agent\n', 'gh printed the login the API answered');
  const seen = s.up.requests.find((q) => q.url === '/api/v3/user');
  t.equal(seen?.headers['authorization'], `token ${s.secret}`, 'the upstream saw the real token');
  t.same(await s.exposed(), []);
});
