// The daemon and the CLI commands load ssh2, @peculiar/x509 and the MCP
// SDK only when they are used (each holds megabytes resident that a daemon
// serving only HTTP, or a CLI command that never speaks MCP, would carry),
// and libsodium and undici too (their loading was a fifth of a CLI
// command's start and of the daemon's, before either needs them):
// the compiled module graphs are loaded in a child node and the packages
// it then holds are read from its require cache; then the first use loads
// each, and works.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../helpers/postern';

const LAZY = ['ssh2', '@peculiar/x509', '@modelcontextprotocol/sdk', 'libsodium-wrappers-sumo', 'undici'];

function loadedAfter(script: string): { packages: string[]; out: string } {
  const program = `
    const dist = ${JSON.stringify(join(ROOT, 'dist'))};
    const at = (p) => require(require('node:path').join(dist, p));
    (async () => {
      ${script}
      const names = new Set();
      for (const k of Object.keys(require.cache)) {
        const m = /node_modules\\/((@[^/]+\\/)?[^/]+)\\//.exec(k);
        if (m) names.add(m[1]);
      }
      process.stdout.write(JSON.stringify([...names]) + '\\n');
    })().catch((e) => { console.error(e); process.exit(1); });`;
  const r = spawnSync(process.execPath, ['-e', program], { encoding: 'utf8', env: { PATH: process.env['PATH'] } });
  if (r.status !== 0) throw new Error(`the child failed: ${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  return { packages: JSON.parse(lines[lines.length - 1]!) as string[], out: lines.slice(0, -1).join('\n') };
}

t.test('the daemon and every CLI command load without them', async (t) => {
  const { packages } = loadedAfter(`
    at('daemon/main.js');
    for (const f of require('node:fs').readdirSync(require('node:path').join(dist, 'cli/commands')))
      if (f.endsWith('.js')) at('cli/commands/' + f);`);
  t.ok(packages.includes('zod') && packages.includes('pino'), 'the graph was loaded (zod and pino are in it)');
  for (const p of LAZY) t.notOk(packages.includes(p), `${p} is not loaded`);
});

t.test('the first use loads each, and it works', async (t) => {
  const ssh = loadedAfter(`
    const { ssh2 } = at('shared/ssh2-module.js');
    const key = require('node:crypto').generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' });
    const parsed = ssh2().utils.parseKey(key);
    console.log(parsed instanceof Error ? 'error: ' + parsed.message : parsed.type);`);
  t.ok(ssh.packages.includes('ssh2'), 'ssh2 loaded on first use');
  t.equal(ssh.out, 'ssh-rsa', 'and parses a key');
  const ca = loadedAfter(`
    const { createLocalCa, signLeaf } = at('daemon/proxy/local-ca.js');
    const made = await createLocalCa();
    const leaf = await signLeaf({ certPem: made.certPem, key: made.key }, 'api.example.test', 3600_000);
    console.log(new (require('node:crypto').X509Certificate)(leaf.certPem).subjectAltName);`);
  t.ok(ca.packages.includes('@peculiar/x509'), '@peculiar/x509 loaded on first use');
  t.equal(ca.out, 'DNS:api.example.test', 'and signs a leaf');
  const sodium = loadedAfter(`
    const crypto = at('shared/crypto.js');
    await crypto.sodiumReady();
    console.log(crypto.blake2b(Buffer.from('abc')).toString('hex'));`);
  t.ok(sodium.packages.includes('libsodium-wrappers-sumo'), 'libsodium loaded on first use');
  t.equal(
    sodium.out,
    'bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319',
    'and hashes (BLAKE2b-256 of "abc")',
  );
  const pools = loadedAfter(`
    const { PinnedPools } = at('daemon/stores/pinned-pools.js');
    const p = new PinnedPools(() => null);
    const pool = p.get({ credential: 'c', requester: 'r', origin: 'https://api.example.test:443', address: '127.0.0.1', family: 4 });
    console.log(pool.constructor.name);
    await pool.close();`);
  t.ok(pools.packages.includes('undici'), 'undici loaded with the first pool');
  t.equal(pools.out, 'Pool', 'and makes it');
});
