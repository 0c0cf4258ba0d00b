// An agent's HTTP request through the real daemon, end to end: a real HTTPS
// upstream with a test CA, a real UDP DNS server, an approver deciding over
// admin.sock, and the agent as a real child process (curl-like, over the
// Unix socket).
import t from 'tap';
import { join } from 'node:path';
import { writeFileSync, mkdirSync } from 'node:fs';
import { cli, init, makeHome, startDaemon, agentRequest, PASSPHRASE } from '../helpers/postern';
import { makeTestCa, startHttpsUpstream, echo } from '../helpers/https-upstream';
import { startDnsServer, zone } from '../helpers/dns-server';
import { TestAdmin } from '../helpers/admin';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

t.test('inject, redirect not followed, SSRF refused, approval by session', async (t) => {
  const ca = makeTestCa(['api.example.test', 'redir.example.test']);
  t.teardown(() => ca.cleanup());
  const up = await startHttpsUpstream(ca, (req, body, res) => {
    if (req.url?.startsWith('/redirect')) {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' });
      res.end();
      return;
    }
    return echo(req, body, res);
  });
  t.teardown(() => up.close());
  const dns = await startDnsServer(
    zone({
      'api.example.test': { A: ['127.0.0.1'] },
      'redir.example.test': { A: ['127.0.0.1'] },
      'internal.example.test': { A: ['10.0.0.7'] },
    }),
  );
  t.teardown(() => dns.close());

  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(
    join(h.home, 'config.toml'),
    `[http]\ndns_servers = ["127.0.0.1:${dns.port}"]\nca_file = "${ca.caFile}"\n`,
    { mode: 0o600 },
  );
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const secret = makeCanary('TOKEN');
  const def = h.file(
    'api.toml',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${up.port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*", "/redirect*"]\n[[allow]]\nhost = "internal.example.test"\nports = [${up.port}]\n`,
  );
  t.equal(
    cli(h, ['cred', 'add', '--file', def, '--secret-file', h.file('s', secret), '--passphrase-file', h.passFile]).code,
    0,
  );

  const sock = join(h.home, 'agent.sock');
  const url = (host: string, path: string): string => `https://${host}:${up.port}${path}`;

  // No approver connected: refused at once, saying what to do.
  let r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'api',
    method: 'GET',
    url: url('api.example.test', '/v1/x'),
  });
  t.equal(r.status, 403);
  t.equal((r.json as { error: { code: string } }).error.code, 'no_approver');
  t.match((r.json as { error: { message: string } }).error.message, /postern approver/);

  const admin = await TestAdmin.connect(join(h.home, 'admin.sock'));
  t.teardown(() => admin.close());
  const att = await admin.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]);
  t.equal(att['ok'], true, JSON.stringify(att));
  admin.onPush = (f) => {
    if (f['push'] !== 'pending') return;
    const card = f['card'] as { id: string; process: { key: string }; action: { address: string } };
    t.equal(card.action.address, '127.0.0.1', 'the card shows the checked address');
    void admin.request('approval.decide', { id: card.id, decision: 'session', root_key: card.process.key });
  };

  r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'api',
    method: 'POST',
    url: url('api.example.test', '/v1/items?q=1'),
    headers: { 'content-type': 'application/json' },
    body: '{"a":1}',
  });
  t.equal(r.status, 200, r.text);
  const ok = r.json as {
    status: number;
    body: string;
    redactions: number;
    target: { address: string };
    audit_seq: number;
  };
  t.equal(ok.status, 200);
  t.equal(ok.target.address, '127.0.0.1');
  t.ok(ok.redactions >= 1, 'the echoed secret was redacted');
  t.same(findCanary(r.text, secret), [], 'no form of the secret reaches the agent');
  const seen = up.requests.at(-1)!;
  t.equal(seen.headers['authorization'], `Bearer ${secret}`, 'the upstream received the injected secret');
  t.equal(seen.headers['accept-encoding'], 'identity');
  t.equal(seen.headers['host'], `api.example.test:${up.port}`, 'Host keeps the name');
  t.equal(seen.url, '/v1/items?q=1');

  // Redirect: returned, not followed; the upstream saw exactly one request.
  const before = up.requests.length;
  r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'api',
    method: 'GET',
    url: url('api.example.test', '/redirect'),
  });
  t.equal(r.status, 200, r.text);
  const red = r.json as { status: number; redirect: { location: string } };
  t.equal(red.status, 302);
  t.equal(red.redirect.location, 'http://169.254.169.254/latest/meta-data/');
  t.equal(up.requests.length, before + 1, 'one request upstream, the redirect not followed');

  // SSRF: a name resolving to a private address is refused with the reason.
  r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'api',
    method: 'GET',
    url: url('internal.example.test', '/'),
  });
  t.equal(r.status, 403);
  const err = (r.json as { error: { code: string; message: string; audit_seq: number } }).error;
  t.equal(err.code, 'denied_address');
  t.match(err.message, /10\.0\.0\.7.*private/);
  t.ok(err.audit_seq > 0, 'the refusal is journaled');

  // Policy: a host outside the rules.
  r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'api',
    method: 'GET',
    url: url('evil.example.test', '/v1/x'),
  });
  t.equal((r.json as { error: { code: string } }).error.code, 'denied_policy');

  // Lock ends the session.
  t.equal(cli(h, ['lock']).code, 0);
  r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'api',
    method: 'GET',
    url: url('api.example.test', '/v1/x'),
  });
  t.equal((r.json as { error: { code: string } }).error.code, 'vault_locked');

  // The journal verifies and holds no form of the secret; nor do the logs.
  t.equal(await d.stop(), 0, 'the daemon stops cleanly on SIGTERM, after serving all of the above');
  const v = cli(h, ['audit', 'verify', '--json']);
  t.equal(v.code, 0, v.stdout + v.stderr);
  t.same(findCanary(journalBytes(h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(h), secret), [], 'no decrypted journal entry holds a form of the secret');
  t.same(findCanary(d.logs(), secret), []);
});
