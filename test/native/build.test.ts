import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ROOT } from '../helpers/repo-root';

// native/build.js builds in the directory it lives in. The tests build a copy
// in a temporary directory, so the addon other test files load is never
// removed under them.
const nativeDir = path.resolve(ROOT, 'native');

function copyNative(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-build-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const f of ['build.js', 'binding.gyp', 'peercred.c'])
    fs.copyFileSync(path.join(nativeDir, f), path.join(dir, f));
  return dir;
}

// A clean environment: an empty HOME (no ~/.npmrc nodedir, no header cache)
// and none of the npm_config_* variables npm/npx pass to scripts, so
// build.js has to find node-gyp and the headers by itself. (Commands also run
// through `env -u NODE_OPTIONS`: tap's processinfo adds it to every child.)
function cleanEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^npm_/i.test(k)) env[k] = v;
  }
  env.HOME = home;
  return env;
}

t.test('builds offline with an empty HOME and no npm environment', async (t) => {
  const dir = copyNative(t);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-home-'));
  t.teardown(() => fs.rmSync(home, { recursive: true, force: true }));
  // unshare -n: a network namespace with no interfaces up, so any attempt to
  // download headers fails the build.
  const run = spawnSync('env', ['-u', 'NODE_OPTIONS', 'unshare', '-n', process.execPath, path.join(dir, 'build.js')], {
    encoding: 'utf8',
    env: cleanEnv(home),
  });
  t.equal(run.status, 0, run.stderr.slice(-2000));
  const built = path.join(dir, 'build', 'Release', 'postern_native.node');
  t.ok(fs.existsSync(built), 'postern_native.node built');
  // The fresh copy must load and expose the same API.
  const addon = require(built) as Record<string, unknown>;
  t.same(Object.keys(addon).sort(), ['peerCred', 'pidfdOpen', 'setNonDumpable']);
  t.same(fs.readdirSync(home), [], 'nothing written to HOME');
});

t.test('a failing build exits non-zero with one line saying so', async (t) => {
  const dir = copyNative(t);
  fs.appendFileSync(path.join(dir, 'peercred.c'), '\nthis is not C;\n');
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-home-'));
  t.teardown(() => fs.rmSync(home, { recursive: true, force: true }));
  const run = spawnSync('env', ['-u', 'NODE_OPTIONS', process.execPath, path.join(dir, 'build.js')], {
    encoding: 'utf8',
    env: cleanEnv(home),
  });
  t.equal(run.status, 1);
  const last = run.stderr.trim().split('\n').pop() ?? '';
  t.match(last, /^postern: native addon build failed: node-gyp rebuild exited with \d+; see its output above/);
});
