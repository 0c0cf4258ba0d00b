// LD_AUDIT really runs code inside a process (SPEC §3): a real audit library
// built here with the C compiler writes a marker as ld.so loads it, proving
// the variable injects code; `postern unlock` started with it refuses with
// bad_environment naming LD_AUDIT and exits before it reads the passphrase
// file or reaches the daemon, which stays locked. The same for OPENSSL_CONF
// pointing at a configuration (harmless here) and for OPENSSL_MODULES and
// OPENSSL_ENGINES.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, agentRequest, cli, init, makeHome, startDaemon } from '../helpers/postern';

const AUDIT_C = `
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
unsigned int la_version(unsigned int v) {
  const char *p = getenv("AUDIT_MARKER");
  if (p) { int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0600); if (fd >= 0) { write(fd, "loaded\\n", 7); close(fd); } }
  return v;
}
`;

t.test('code-loading variables: the code runs, postern refuses before the passphrase', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  if (init(h).code !== 0) throw new Error('init failed');
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const src = h.file('audit.c', AUDIT_C);
  const lib = join(h.dir, 'audit.so');
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', lib, src], { encoding: 'utf8' });
  t.equal(cc.status, 0, `the audit library builds: ${cc.stderr}`);
  const marker = join(h.dir, 'marker');

  // The library is real: a plain program started with it runs its code.
  const env = spawnSync('/usr/bin/env', [`LD_AUDIT=${lib}`, `AUDIT_MARKER=${marker}`, '/bin/true']);
  t.equal(env.status, 0);
  t.ok(
    existsSync(marker) && readFileSync(marker, 'utf8').includes('loaded'),
    "LD_AUDIT ran the library's code in /bin/true",
  );

  const opensslConf = h.file('openssl.cnf', 'openssl_conf = postern_test\n[postern_test]\n');
  const rows: [string, Record<string, string>][] = [
    ['LD_AUDIT', { LD_AUDIT: lib, AUDIT_MARKER: marker }],
    ['OPENSSL_CONF', { OPENSSL_CONF: opensslConf }],
    ['OPENSSL_MODULES', { OPENSSL_MODULES: h.dir }],
    ['OPENSSL_ENGINES', { OPENSSL_ENGINES: h.dir }],
  ];
  for (const [name, set] of rows) {
    // A passphrase file that is a FIFO nobody writes: reading it would hang,
    // so a prompt return proves postern never opened it.
    const fifo = join(h.dir, `pass-${name}`);
    spawnSync('mkfifo', [fifo]);
    const r = spawnSync(
      '/usr/bin/env',
      [
        '-u',
        'NODE_OPTIONS',
        ...Object.entries(set).map(([k, v]) => `${k}=${v}`),
        process.execPath,
        CLI,
        'unlock',
        '--passphrase-file',
        fifo,
      ],
      { env: h.env, encoding: 'utf8', timeout: 20_000 },
    );
    t.equal(r.status, 1, `${name}: unlock exits 1 (${r.stderr.trim()})`);
    t.match(
      r.stderr,
      new RegExp(`^postern unlock refuses to run: ${name} is set \\(`),
      `${name}: the refusal names the variable`,
    );
    t.match(r.stderr, /unset it and start again/, `${name}: and says what to do`);
    t.notOk(r.error, `${name}: returned at once, the passphrase file never read`);
  }
  t.match(
    readFileSync(marker, 'utf8'),
    /loaded\n[\s\S]*loaded/,
    'the audit library did run inside postern unlock too: refusing is what keeps the passphrase from it',
  );

  const health = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  t.same(health.json, { locked: true }, 'the daemon was never unlocked');
  const status = cli(h, ['status', '--json']);
  t.equal(status.code, 0);
  t.match(JSON.parse(status.stdout), { locked: true });
});
