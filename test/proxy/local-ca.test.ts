// The local CA as a person meets it: made by `postern init` (ca.pem 0644,
// what openssl reads in it), printed by `postern ca` (text and --json, and
// its one-line errors), put back by the daemon at unlock when ca.pem is
// missing or replaced, and its private key in nothing postern prints or
// writes outside the vault.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { X509Certificate, createHash } from 'node:crypto';
import { readFileSync, rmSync, statSync, writeFileSync, chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { cli, eventually, init, makeHome, startDaemon } from '../helpers/postern';
import { journalBytes, journalText } from '../helpers/canary';
import { findKey, keyForms, proxyCaKey } from '../helpers/proxy-ca';

t.test('init makes the CA; `postern ca` prints it; unlock puts ca.pem back; the key stays in the vault', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const outputs: string[] = [];
  const made = init(h, ['--json']);
  outputs.push(made.stdout, made.stderr);
  t.equal(made.code, 0, made.stderr);
  const caFile = join(h.home, 'ca.pem');
  t.equal(statSync(caFile).mode & 0o777, 0o644, 'ca.pem is 0644');
  const pem = readFileSync(caFile, 'utf8');
  const der = new X509Certificate(pem).raw;
  const fingerprint = createHash('sha256').update(der).digest('hex');
  t.match(JSON.parse(made.stdout), { ca_pem: caFile, ca_fingerprint: fingerprint }, 'init names ca.pem and its hash');

  const text = spawnSync('openssl', ['x509', '-in', caFile, '-noout', '-text'], { encoding: 'utf8' });
  t.equal(text.status, 0, text.stderr);
  t.match(text.stdout, /Basic Constraints: critical\s+CA:TRUE, pathlen:0/, 'a CA for leaves only, critical');
  t.match(text.stdout, /Key Usage: critical\s+Certificate Sign, CRL Sign/, 'signs certificates and CRLs only');
  t.match(text.stdout, /Public-Key: \(256 bit\)[\s\S]*NIST CURVE: P-256/, 'an ECDSA P-256 key');
  t.match(text.stdout, /Signature Algorithm: ecdsa-with-SHA256/);
  t.match(text.stdout, /Subject: CN = postern local CA [0-9a-f]{8}\n/, 'named for postern, with a short id');
  t.match(text.stdout, /Issuer: CN = postern local CA [0-9a-f]{8}\n/, 'self-signed');
  const x = new X509Certificate(pem);
  const years = (Date.parse(x.validTo) - Date.now()) / (365 * 24 * 3600_000);
  t.ok(years > 9.9 && years < 10.1, `valid for 10 years (${years.toFixed(2)})`);
  t.equal(x.verify(x.publicKey), true, 'its signature is its own');

  // `postern ca`: the PEM, then the fingerprint line.
  const shown = cli(h, ['ca']);
  outputs.push(shown.stdout, shown.stderr);
  t.equal(shown.code, 0, shown.stderr);
  t.equal(shown.stdout, `${pem.trimEnd()}\nSHA-256 fingerprint: ${x.fingerprint256}\n`);
  t.match(x.fingerprint256, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/, 'hex with colons');
  const json = cli(h, ['ca', '--json']);
  outputs.push(json.stdout, json.stderr);
  t.equal(json.code, 0, json.stderr);
  t.same(JSON.parse(json.stdout), {
    path: caFile,
    subject: x.subject,
    not_after: new Date(x.validTo).toISOString(),
    fingerprint_sha256: fingerprint,
    pem,
  });

  // Unlock writes ca.pem again when it is missing or says something else.
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const unlockThenLock = (): void => {
    const u = cli(h, ['unlock', '--passphrase-file', h.passFile]);
    outputs.push(u.stdout, u.stderr);
    t.equal(u.code, 0, u.stderr);
    t.equal(cli(h, ['lock']).code, 0);
  };
  rmSync(caFile);
  unlockThenLock();
  t.equal(readFileSync(caFile, 'utf8'), pem, 'a missing ca.pem is written again');
  t.equal(statSync(caFile).mode & 0o777, 0o644, 'with mode 0644');
  writeFileSync(caFile, `${rootCertificates[0]}\n`);
  chmodSync(caFile, 0o600);
  unlockThenLock();
  t.equal(readFileSync(caFile, 'utf8'), pem, 'a replaced ca.pem is written again');
  t.equal(statSync(caFile).mode & 0o777, 0o644, 'with mode 0644');
  const before = statSync(caFile).mtimeMs;
  unlockThenLock();
  t.equal(statSync(caFile).mtimeMs, before, 'an intact ca.pem is left alone');
  // A home that cannot take ca.pem (a directory stands at its path) keeps
  // the unlock, and the log says why.
  rmSync(caFile);
  mkdirSync(caFile);
  unlockThenLock();
  t.ok(await eventually(() => d.logs().includes('"event":"ca_pem_write_failed"')), 'the failed write is logged');
  rmSync(caFile, { recursive: true });
  unlockThenLock();
  t.equal(readFileSync(caFile, 'utf8'), pem, 'and written at the next unlock that can');
  await d.stop();

  // The CA key: in the vault, nowhere else.
  const key = await proxyCaKey(h.home);
  t.ok(key && key.length > 100, 'the vault holds the CA key (PKCS#8)');
  const forms = keyForms(key as Buffer);
  const journal = await journalText(h);
  t.same(findKey(journal, forms), [], 'not in the decrypted journal');
  t.same(findKey(journalBytes(h.home), forms), [], 'not in the journal file');
  t.same(findKey(d.logs(), forms), [], 'not in the daemon log');
  t.same(findKey(outputs.join('\n'), forms), [], 'not in CLI output');
  t.same(findKey(readFileSync(caFile), forms), [], 'not in ca.pem');
  t.notMatch(journal, /"kind":"proxy_ca_created"/, 'a CA made at init is no vault write of its own');
});

t.test('`postern ca` errors: one line each, exit 1, saying where the CA comes from', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const caFile = join(h.home, 'ca.pem');
  rmSync(caFile);
  for (const args of [['ca'], ['ca', '--json']]) {
    const r = cli(h, args);
    t.equal(r.code, 1, `${args.join(' ')}: exit 1`);
    if (args.includes('--json'))
      t.match(JSON.parse(r.stdout), { error: { code: 'not_found' } }, '--json: the error as JSON on stdout');
    else t.equal(r.stdout, '', 'nothing on stdout');
    t.equal(
      r.stderr,
      `postern: there is no ${caFile}: the proxy CA is made at \`postern init\`, or when an unlocked daemon first needs it (a vault made before postern had one)\n`,
    );
  }
  writeFileSync(caFile, 'not a certificate\n');
  const bad = cli(h, ['ca']);
  t.equal(bad.code, 1);
  t.match(
    bad.stderr,
    /^postern: .*ca\.pem is not a PEM certificate; remove it and run `postern unlock`, which writes it again from the vault\n$/,
  );
  const nowhere = makeHome();
  t.teardown(() => nowhere.cleanup());
  const none = cli(nowhere, ['ca']);
  t.equal(none.code, 1, 'no home at all');
  t.match(none.stderr, /^postern: there is no .*ca\.pem: the proxy CA is made at `postern init`/);
  t.equal(none.stderr.split('\n').length, 2, 'one line');
});
