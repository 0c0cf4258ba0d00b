// The secret canary (issue acceptance): after credentials whose secrets are
// unique canaries are added, used in every admin path and refused in others,
// no form of any canary appears in a log line, CLI output, error, or file
// under the home other than inside the encrypted vault.
import t from 'tap';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon, agentRequest, Result } from '../helpers/postern';
import { canaryForms, filesUnder, findCanary, journalText, makeCanary } from '../helpers/canary';
import { readFileSync } from 'node:fs';

t.test('no form of the secret leaves the vault', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const httpSecret = makeCanary('HTTPCANARY');
  const sshPassword = makeCanary('SSHCANARY');
  const outputs: Result[] = [];
  const run = (args: string[], input?: string): Result => {
    const r = cli(h, args, input);
    outputs.push(r);
    return r;
  };

  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(run(['unlock', '--passphrase-file', h.passFile]).code, 0);

  const def = h.file(
    'api.toml',
    'name = "api"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.com"\n',
  );
  const secretFile = h.file('secret', httpSecret + '\n');
  let r = run(['cred', 'add', '--file', def, '--secret-file', secretFile, '--passphrase-file', h.passFile]);
  t.equal(r.code, 0, r.stderr);
  // Same secret from stdin, for a second credential.
  const def2 = h.file(
    'api2.toml',
    'name = "api2"\nkind = "http"\n[inject]\nquery = "key"\n[[allow]]\nhost = "api.example.com"\n',
  );
  r = run(['cred', 'add', '--file', def2, '--secret-file', '-', '--passphrase-file', h.passFile], httpSecret);
  t.equal(r.code, 0, r.stderr);

  const sshDef = h.file(
    'box.toml',
    `name = "box"\nkind = "ssh"\nhost = "build.example.com"\nuser = "deploy"\nauth = "password"\nhost_key = "SHA256:${'A'.repeat(43)}"\ncommands = ["uptime"]\n`,
  );
  r = run([
    'cred',
    'add',
    '--file',
    sshDef,
    '--secret-file',
    h.file('pw', sshPassword),
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(r.code, 0, r.stderr);

  // Refusals that carry the secret in the request must not echo it.
  r = run(['cred', 'add', '--file', def, '--secret-file', secretFile, '--passphrase-file', h.passFile]);
  t.equal(r.code, 1, 'duplicate name refused');
  const badSecret = h.file('bad', `${httpSecret}\u0007tail`);
  r = run([
    'cred',
    'add',
    '--file',
    h.file('api3.toml', readFileSync(def, 'utf8').replace('"api"', '"api3"')),
    '--secret-file',
    badSecret,
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(r.code, 1, 'a secret with a control character is refused');
  r = run(['cred', 'rm', 'api', '--passphrase-file', h.file('wrong', 'wrong passphrase here')]);
  t.equal(r.code, 1);

  for (const args of [
    ['cred', 'list'],
    ['cred', 'list', '--json'],
    ['cred', 'show', 'api'],
    ['cred', 'show', 'box', '--json'],
    ['status', '--json'],
  ]) {
    t.equal(run(args).code, 0, args.join(' '));
  }
  const update = h.file('api-upd.toml', readFileSync(def, 'utf8').replace('api.example.com', 'api2.example.com'));
  t.equal(run(['cred', 'update', 'api', '--file', update, '--passphrase-file', h.passFile]).code, 0);
  t.equal(
    run(['cred', 'update', 'api', '--file', update, '--secret-file', secretFile, '--passphrase-file', h.passFile]).code,
    0,
  );
  const agent = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/credentials');
  t.equal(agent.status, 200);
  t.equal(run(['lock']).code, 0);
  t.equal(run(['unlock', '--passphrase-file', h.passFile]).code, 0);
  t.equal(
    run(['passwd', '--passphrase-file', h.passFile, '--new-passphrase-file', h.file('new', 'another long passphrase')])
      .code,
    0,
  );
  const newPass = h.file('new2', 'another long passphrase');
  t.equal(run(['cred', 'rm', 'api2', '--passphrase-file', newPass]).code, 0);
  await d.stop();

  const sinks: [string, string | Buffer][] = [
    ['daemon log', d.logs()],
    ['agent response', agent.text],
    ...outputs.map((o, i): [string, string] => [`cli output #${i}`, o.stdout + o.stderr]),
    ...filesUnder(h.home, (p) => p === join(h.home, 'vault')).map((p): [string, Buffer] => [p, readFileSync(p)]),
    // The files hold the journal's events encrypted: search them decrypted.
    ['decrypted journal', await journalText(h, newPass)],
  ];
  t.ok(d.logs().length > 0, 'the daemon logged something');
  for (const secret of [httpSecret, sshPassword]) {
    t.ok(canaryForms(secret).length >= 6, 'several forms searched');
    for (const [name, bytes] of sinks) {
      t.same(findCanary(bytes, secret), [], `${name} has no form of the canary`);
    }
    t.same(findCanary(readFileSync(join(h.home, 'vault')), secret), [], 'the vault holds it only encrypted');
  }
});
