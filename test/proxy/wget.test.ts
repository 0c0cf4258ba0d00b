// GNU Wget 1.21 (Debian, built with GnuTLS) through `postern run`. Wget
// reads https_proxy (its user:password as the proxy credentials) but none
// of the CA variables (SSL_CERT_FILE, CURL_CA_BUNDLE, …): GnuTLS loads the
// system store, and `--ca-certificate` or `ca_certificate` in a wgetrc.
// `postern run` sets WGETRC to a file holding the caller's wgetrc and then
// `ca_certificate`.
import t from 'tap';
import type { Handler } from '../helpers/https-upstream';
import { echo } from '../helpers/https-upstream';
import { makeCanary } from '../helpers/canary';
import { startProxyStack, sh } from '../helpers/proxy-stack';

t.test('wget with no CA option: trusts the local CA through the WGETRC `postern run` sets', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await s.run(
    sh(
      `wget -nv -O - --header "Authorization: Bearer $GH_TOKEN" ${s.url('api.example.test', '/v1/wget')} 2>&1; echo "rc=$?"`,
    ),
  );
  const out = r.stdout.toString();
  t.same(await s.exposed(), [], 'no secret anywhere');
  t.match(out, /"url":"\/v1\/wget"/, 'the answer arrived', { observed: out });
  t.match(out.trim(), /rc=0$/, 'wget succeeded');
  t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${s.secret}`);
});

t.test("the caller's own wgetrc still holds under `postern run`", async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const own = s.h.file('own.wgetrc', 'header = X-From-Wgetrc: yes\n');
  const r = await s.run(
    sh(`wget -q -O - --header "Authorization: Bearer $GH_TOKEN" ${s.url('api.example.test', '/v1/own')}`),
    { WGETRC: own },
  );
  t.equal(r.code, 0, 'wget succeeded', { stderr: r.stderr });
  t.equal(s.up.requests[0]?.headers['x-from-wgetrc'], 'yes', "the caller's wgetrc was read");
  t.same(await s.exposed(), []);
});

t.test('wget --ca-certificate="$SSL_CERT_FILE": works with a Bearer placeholder', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const r = await s.run(
    sh(
      `wget -q -O - --ca-certificate="$SSL_CERT_FILE" --header "Authorization: Bearer $GH_TOKEN" ${s.url('api.example.test', '/v1/wget')}`,
    ),
  );
  t.equal(r.code, 0, 'wget succeeded', { stderr: r.stderr });
  const j = JSON.parse(r.stdout.toString()) as { url: string; headers: Record<string, string> };
  t.equal(j.url, '/v1/wget');
  t.equal(j.headers['authorization'], '[REDACTED:github]', 'the echoed secret redacted');
  t.equal(s.up.requests[0]?.headers['authorization'], `Bearer ${s.secret}`);
  t.same(await s.exposed(), []);
});

t.test('wget --user/--password with the placeholder: challenged, then Basic injected', async (t) => {
  const secret = makeCanary('WGETBASIC');
  const handler: Handler = (req, body, res) => {
    if (req.headers['authorization'] !== `Basic ${Buffer.from(`bot:${secret}`).toString('base64')}`) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="api"', 'content-length': 0 });
      res.end();
      return;
    }
    return echo(req, body, res);
  };
  const s = await startProxyStack({ inject: 'basic_user = "bot"', handler, secret });
  t.teardown(() => s.close());
  const r = await s.run(
    sh(
      `wget -q -O - --ca-certificate="$SSL_CERT_FILE" --user bot --password "$GH_TOKEN" ${s.url('api.example.test', '/v1/wget-basic')}`,
    ),
  );
  t.equal(r.code, 0, 'wget succeeded', { stderr: r.stderr });
  t.equal(JSON.parse(r.stdout.toString()).url, '/v1/wget-basic');
  t.same(
    s.up.requests.map((q) => q.headers['authorization'] === undefined),
    [true, false],
    'first without credentials (401), then with the injected Basic',
  );
  t.same(await s.exposed(), []);
});
