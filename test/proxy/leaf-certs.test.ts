// Leaf certificates of the proxy front door, made by the daemon's own code
// (LeafCertificates over the real vault, journal and vault-write bracket)
// on a home made by the real `postern init`: a vault from before the CA
// existed gets one at first use, journaled and verified; each leaf is
// served by a real TLS server and checked by openssl and by Node for the
// right name (and refused for another); the cache, its bound, its renewal
// and purge; the CA key nowhere in what postern wrote.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as tls from 'node:tls';
import * as net from 'node:net';
import { AddressInfo } from 'node:net';
import { Home, PASSPHRASE, cli, init, makeHome, startDaemon } from '../helpers/postern';
import { journalBytes, journalText } from '../helpers/canary';
import { findKey, keyForms, proxyCaKey, removeProxyCa } from '../helpers/proxy-ca';
import { Journal } from '../../daemon/audit/journal';
import { VaultWrites } from '../../daemon/vault-writes';
import { createLogger } from '../../daemon/logger';
import { LeafCertificates, MAX_CACHED_HOSTS, storeCaAtFirstUse } from '../../daemon/proxy/leaf-certs';
import { UnlockedVault, unlockVaultFile } from '../../daemon/vault/unlocked-vault';
import { parseHeader, readVaultFile } from '../../shared/vault-format';
import { isRefusal } from '../../shared/errors';
import { sodiumReady } from '../../shared/crypto';

const DAY = 24 * 3600_000;

interface Rig {
  h: Home;
  leaves: LeafCertificates;
  vault: UnlockedVault;
  clock: { now: number };
  epoch: { n: number };
  close(): Promise<void>;
}

async function rig(h: Home, validity = DAY): Promise<Rig> {
  await sodiumReady();
  const journal = await Journal.open({ path: join(h.home, 'audit.log'), segmentSize: 64 * 1024 * 1024 });
  const file = readVaultFile(join(h.home, 'vault'));
  const vault = await unlockVaultFile(join(h.home, 'vault'), file, parseHeader(file).header, Buffer.from(PASSPHRASE));
  await vault.withAuditSigningKey((k) => journal.setSigningKey(k));
  const writes = new VaultWrites({
    record: (p) => journal.append(p),
    journal,
    log: createLogger('silent', 'json'),
    vaultPath: () => join(h.home, 'vault'),
  });
  const clock = { now: Date.now() };
  const epoch = { n: 1 };
  const leaves = new LeafCertificates({
    vault: () => vault,
    lockEpoch: () => epoch.n,
    leafValidity: () => validity,
    storeCa: (v, ca) => storeCaAtFirstUse(writes, join(h.home, 'ca.pem'), v, ca),
    now: () => clock.now,
  });
  return {
    h,
    leaves,
    vault,
    clock,
    epoch,
    async close() {
      leaves.purge();
      await writes.settled();
      vault.wipe();
      await journal.close();
    },
  };
}

// A real TLS server presenting the leaf for `host`, as the proxy front door
// does after a CONNECT: each accepted socket wrapped with the leaf's context.
async function serveLeaf(leaves: LeafCertificates, host: string): Promise<net.Server> {
  const secureContext = await leaves.secureContextFor(host);
  const server = net.createServer((raw) => {
    const s = new tls.TLSSocket(raw, { isServer: true, secureContext, ALPNProtocols: ['http/1.1'] });
    s.on('error', () => undefined);
    s.on('secure', () => s.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

// The client checks the leaf against ca.pem for `name`.
async function handshake(
  leaves: LeafCertificates,
  host: string,
  name: string,
  caPem: string,
): Promise<{ ok: true } | { ok: false; code: string }> {
  const server = await serveLeaf(leaves, host);
  const port = (server.address() as AddressInfo).port;
  try {
    return await new Promise((resolve) => {
      const isIp = /^[0-9.]+$|:/.test(name);
      const c = tls.connect({
        host: '127.0.0.1',
        port,
        ca: caPem,
        ...(isIp ? {} : { servername: name }),
        checkServerIdentity: (_h, cert) => tls.checkServerIdentity(name, cert),
      });
      c.once('secureConnect', () => {
        c.destroy();
        resolve({ ok: true });
      });
      c.once('error', (e: NodeJS.ErrnoException) => resolve({ ok: false, code: e.code ?? e.message }));
    });
  } finally {
    server.close();
  }
}

async function openssl(leaves: LeafCertificates, host: string, name: string, caFile: string): Promise<string> {
  const server = await serveLeaf(leaves, host);
  const port = (server.address() as AddressInfo).port;
  try {
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const { spawn } = require('node:child_process') as typeof import('node:child_process');
      const p = spawn(
        'openssl',
        [
          's_client',
          '-connect',
          `127.0.0.1:${port}`,
          '-servername',
          host,
          '-verify_return_error',
          '-verify_hostname',
          name,
          '-CAfile',
          caFile,
        ],
        { stdio: ['pipe', 'pipe', 'pipe'] },
      );
      let out = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.stderr.on('data', (d: Buffer) => (out += d.toString()));
      p.stdin.end('');
      p.on('close', (code) => resolve({ code, out }));
    });
    return `${r.code}\n${r.out}`;
  } finally {
    server.close();
  }
}

t.test('a vault from before the CA gets one at first use: journaled, verified, trusted by openssl', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  await removeProxyCa(h.home);
  t.equal(await proxyCaKey(h.home), null, 'the vault has no CA');
  t.notOk(existsSync(join(h.home, 'ca.pem')), 'nor ca.pem');

  const r = await rig(h);
  t.teardown(() => r.close());
  t.equal(r.vault.proxyCaCert, null, 'the daemon sees no CA');
  // Two leaves asked for at once make one CA.
  const [a, b] = await Promise.all([
    r.leaves.certificateFor('api.example.test'),
    r.leaves.certificateFor('other.example.test'),
  ]);
  const caFile = join(h.home, 'ca.pem');
  const caPem = readFileSync(caFile, 'utf8');
  t.equal(r.vault.proxyCaCert, caPem, 'ca.pem is the vault certificate');
  t.equal(statSync(caFile).mode & 0o777, 0o644, 'ca.pem is 0644');
  const ca = new X509Certificate(caPem);
  t.ok(new X509Certificate(a).verify(ca.publicKey) && new X509Certificate(b).verify(ca.publicKey), 'signed by it');

  // Served by a real TLS server, checked by real clients.
  t.same(await handshake(r.leaves, 'api.example.test', 'api.example.test', caPem), { ok: true }, 'Node: trusted');
  t.same(
    await handshake(r.leaves, 'api.example.test', 'evil.example.test', caPem),
    { ok: false, code: 'ERR_TLS_CERT_ALTNAME_INVALID' },
    'Node: not for another name',
  );
  const good = await openssl(r.leaves, 'api.example.test', 'api.example.test', caFile);
  t.match(good, /^0\n/, 'openssl: exit 0');
  t.match(good, /Verify return code: 0 \(ok\)/, 'openssl: verified');
  t.match(good, /ALPN|Protocol|TLSv1\.3|TLSv1\.2/, 'a TLS session');
  const bad = await openssl(r.leaves, 'api.example.test', 'evil.example.test', caFile);
  t.notMatch(bad, /^0\n/, 'openssl: another name fails');
  t.match(bad, /hostname mismatch/, 'openssl says why');
  const otherCa = join(h.dir, 'other-ca.pem');
  spawnSync('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    join(h.dir, 'k.pem'),
    '-out',
    otherCa,
    '-subj',
    '/CN=other',
    '-days',
    '1',
  ]);
  t.notMatch(
    await openssl(r.leaves, 'api.example.test', 'api.example.test', otherCa),
    /^0\n/,
    'openssl: another CA fails',
  );

  // An IP literal gets an iPAddress name.
  t.same(await handshake(r.leaves, '127.0.0.1', '127.0.0.1', caPem), { ok: true }, 'an IPv4 leaf');
  t.match(new X509Certificate(await r.leaves.certificateFor('::1')).subjectAltName, /IP Address:0:0:0:0:0:0:0:1/);
  t.match(new X509Certificate(a).subjectAltName, /^DNS:api\.example\.test$/);
  await r.close();

  // The journal says what happened and still verifies; the daemon accepts the vault.
  const verify = cli(h, ['audit', 'verify', '--json']);
  t.equal(verify.code, 0, verify.stdout);
  const text = await journalText(h);
  const created = text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((e) => e['kind'] === 'proxy_ca_created');
  t.equal(created.length, 1, 'one CA made');
  t.match(created[0], { fingerprint: ca.fingerprint256.replace(/:/g, '').toLowerCase(), generation: 2 });
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const u = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  t.equal(u.code, 0, `the daemon unlocks the vault written at first use: ${u.stderr}`);
  const approval = cli(h, ['config', 'approve', '--json', '--passphrase-file', h.passFile]);
  t.match(
    JSON.parse(approval.stdout),
    { approved: true, changed: false },
    'a config approved before [proxy] existed is still approved',
  );
  const shown = cli(h, ['ca']);
  t.match(shown.stdout, `SHA-256 fingerprint: ${ca.fingerprint256}`);
  await d.stop();

  const key = await proxyCaKey(h.home);
  t.ok(key, 'the CA key is in the vault');
  const forms = keyForms(key as Buffer);
  t.same(findKey(text, forms), [], 'not in the decrypted journal');
  t.same(findKey(journalBytes(h.home), forms), [], 'not in the journal file');
  t.same(
    findKey(d.logs() + verify.stdout + verify.stderr + shown.stdout + u.stdout + u.stderr, forms),
    [],
    'not in logs or CLI output',
  );
  t.same(findKey(readFileSync(caFile), forms), [], 'not in ca.pem');
});

t.test(
  'the cache: the same leaf until 90 % of its life, a new one after, after purge, and past the bound',
  async (t) => {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    t.equal(init(h).code, 0, 'init');
    const r = await rig(h, 10 * 3600_000);
    t.teardown(() => r.close());
    t.ok(r.vault.proxyCaCert, 'init made the CA');
    const first = await r.leaves.certificateFor('api.example.test');
    t.equal(await r.leaves.certificateFor('API.Example.TEST'), first, 'the same leaf twice (names in any case)');
    const x = new X509Certificate(first);
    const life = Date.parse(x.validTo) - Date.parse(x.validFrom);
    t.ok(Math.abs(life - (10 * 3600_000 + 60_000)) < 2000, `valid for leaf_validity from a minute back (${life} ms)`);
    t.match(x.keyUsage ?? [], ['1.3.6.1.5.5.7.3.1'], 'serverAuth');
    t.equal(x.ca, false, 'not a CA');
    t.equal(x.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'a P-256 key');
    t.equal(x.checkIssued(new X509Certificate(r.vault.proxyCaCert as string)), true, 'issued by the CA');

    r.clock.now += 8.9 * 3600_000;
    t.equal(await r.leaves.certificateFor('api.example.test'), first, 'still the same before 90 %');
    r.clock.now += 0.2 * 3600_000;
    const renewed = await r.leaves.certificateFor('api.example.test');
    t.not(renewed, first, 'a new leaf past 90 % of its life');

    r.leaves.purge();
    t.not(await r.leaves.certificateFor('api.example.test'), renewed, 'a new leaf after purge');

    const kept = await r.leaves.certificateFor('host-0.example.test');
    for (let i = 1; i <= MAX_CACHED_HOSTS; i++) await r.leaves.certificateFor(`host-${i}.example.test`);
    t.not(await r.leaves.certificateFor('host-0.example.test'), kept, 'the oldest host is dropped past the bound');
    const recent = await r.leaves.certificateFor(`host-${MAX_CACHED_HOSTS}.example.test`);
    t.equal(await r.leaves.certificateFor(`host-${MAX_CACHED_HOSTS}.example.test`), recent, 'recent hosts stay');
  },
);

t.test('refusals: not a host, a lock during the signature, a locked vault', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const r = await rig(h);
  t.teardown(() => r.close());
  for (const host of [
    '',
    'a b',
    'exa mple.test',
    'x'.repeat(254),
    '-lead.example',
    'under\u0000score',
    '[::1]',
    'a..b',
  ]) {
    try {
      await r.leaves.secureContextFor(host);
      t.fail(`${JSON.stringify(host)}: refused`);
    } catch (e) {
      t.ok(isRefusal(e) && e.code === 'bad_request', `${JSON.stringify(host.slice(0, 20))}: bad_request`);
    }
  }
  // The lock epoch moves while the leaf is signed: it is not handed out.
  const signing = r.leaves.secureContextFor('api.example.test');
  r.epoch.n += 1;
  await t.rejects(signing, { code: 'vault_locked' }, 'a leaf signed across a lock is refused');
  t.ok(await r.leaves.secureContextFor('api.example.test'), 'the next one is signed afresh');
  r.vault.wipe();
  r.leaves.purge();
  await t.rejects(
    r.leaves.secureContextFor('api.example.test'),
    { code: 'vault_locked' },
    'a wiped vault signs nothing',
  );
});
