// `postern config approve` on an unlocked daemon takes effect at once, in
// full (SPEC §3): a removed ca_file is never trusted again, not even on a
// connection pooled before; an added one is used by the next request; new
// DNS servers answer the next request; a smaller max_response_body cuts the
// next reply. Settings that cannot change while running (the agent socket
// here) are named by the command as waiting for the next start, the daemon
// keeps serving where it is, and a lock and unlock do not refuse them.
import t from 'tap';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { startDnsServer, zone } from '../helpers/dns-server';
import { agentRequest, cli } from '../helpers/postern';
import { findCanary, journalText, makeCanary } from '../helpers/canary';

interface Reply {
  status: number;
  body: string;
  truncated: boolean;
}

t.test('config approve on an unlocked daemon', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('CFG');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\n`,
    secret,
  );
  await s.approver();
  const configFile = join(s.h.home, 'config.toml');
  const second = await startDnsServer(zone({ 'api.example.test': { A: ['127.0.0.1'] } }));
  t.teardown(() => second.close());
  const texts: string[] = [];
  const write = (http: string, daemon = ''): void =>
    writeFileSync(configFile, `[daemon]\n${daemon}\n[http]\n${http}\n`, { mode: 0o600 });
  const approve = (): { code: number | null; stdout: string; stderr: string } => {
    const r = cli(s.h, ['config', 'approve', '--passphrase-file', s.h.passFile]);
    texts.push(r.stdout, r.stderr);
    return r;
  };
  const get = async (sock = s.sock): Promise<{ status: number; json: unknown }> => {
    const r = await agentRequest(sock, 'POST', '/v1/http', {
      credential: 'api',
      method: 'GET',
      url: s.url('api.example.test', '/item'),
    });
    texts.push(r.text);
    return r;
  };
  const dns = `dns_servers = ["127.0.0.1:${s.dns.port}"]`;
  const ca = `ca_file = "${s.ca.caFile}"`;
  const cert = new X509Certificate(readFileSync(s.ca.caFile));
  const caNamed = `${JSON.stringify(cert.subject.split('\n').join(', '))} (SHA-256 ${cert.fingerprint256})`;

  await t.test('a removed CA is not trusted again, even on a pooled connection', async (t) => {
    for (let i = 0; i < 3; i++)
      t.match((await get()).json, { status: 200 }, `request ${i} served over the pooled connection`);
    t.equal(s.up.connections(), 1, 'one pooled connection');
    write(dns);
    const r = approve();
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /config approved \(.*\); it is in effect now/, 'the command says it is in effect now');
    t.match(
      r.stdout,
      `\n  http.ca_file: ${JSON.stringify(s.ca.caFile)} → ""\n  http.ca_file certificates: removed ${caNamed}\n`,
      'the removed CA by subject and fingerprint',
    );
    const after = await get();
    t.equal(after.status, 502, 'the next request is refused');
    t.match(after.json, { error: { code: 'upstream_error', message: /not signed by a trusted CA/ } });
  });

  await t.test('an added CA is used by the next request', async (t) => {
    write(`${dns}\n${ca}`);
    const r = approve();
    t.equal(r.code, 0);
    t.match(r.stdout, `\n  http.ca_file certificates: added ${caNamed}\n`, 'the added CA by subject and fingerprint');
    t.match((await get()).json, { status: 200 });
  });

  await t.test('new DNS servers answer the next request', async (t) => {
    const before = second.queries.length;
    write(`dns_servers = ["127.0.0.1:${second.port}"]\n${ca}`);
    t.equal(approve().code, 0);
    t.match((await get()).json, { status: 200 });
    t.ok(second.queries.length > before, 'the new server was asked');
  });

  await t.test('a smaller max_response_body cuts the next reply', async (t) => {
    write(`dns_servers = ["127.0.0.1:${second.port}"]\n${ca}\nmax_response_body = "16B"`);
    const shown = approve();
    t.equal(shown.code, 0);
    t.match(shown.stdout, '\n  http.max_response_body: 8MiB → 16B\n', 'in the units of the file');
    const r = (await get()).json as Reply;
    t.equal(r.body.length, 16);
    t.equal(r.truncated, true);
  });

  await t.test('a setting that waits for a restart is named; the daemon serves where it is', async (t) => {
    const moved = join(s.h.dir, 'elsewhere.sock');
    write(`dns_servers = ["127.0.0.1:${second.port}"]\n${ca}`, `agent_socket = "${moved}"`);
    const r = approve();
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /in effect now, except daemon\.agent_socket, which takes effect at the next start of the daemon/);
    const json = cli(s.h, ['status', '--json']);
    t.equal(json.code, 0);
    t.notOk(existsSync(moved), 'no socket at the new path yet');
    t.match((await get()).json, { status: 200 }, 'served on the running socket');
    t.equal(cli(s.h, ['lock']).code, 0);
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    t.equal(u.code, 0, `unlock does not refuse the waiting setting: ${u.stderr}`);
    t.match((await get()).json, { status: 200 }, 'still served on the running socket after unlock');
  });

  t.same(findCanary(texts.join('\n'), secret), [], 'no form of the secret in any output');
  t.same(findCanary(s.d.logs(), secret), [], 'nor in the daemon log');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor in the decrypted journal');
});
