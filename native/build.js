'use strict';
// The package's `install` script: builds native/build/Release/postern_native.node
// with node-gyp, offline. When the running node's own headers are installed
// (e.g. /usr/include/node for /usr/bin/node) we pass --nodedir explicitly, so
// the build never depends on the developer's npm config in HOME and never
// downloads headers (see PLATFORM.md, "Peer credentials").
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const nativeDir = __dirname;
const output = path.join(nativeDir, 'build', 'Release', 'postern_native.node');

function fail(message) {
  process.stderr.write(`postern: native addon build failed: ${message}\n`);
  process.exit(1);
}

// npm sets npm_config_node_gyp for scripts; otherwise use the copy bundled
// with the npm that sits next to this node (or the npm running us).
function findNodeGyp() {
  const nodePrefix = path.resolve(path.dirname(process.execPath), '..');
  const candidates = [
    process.env.npm_config_node_gyp,
    process.env.npm_execpath &&
      path.resolve(path.dirname(process.env.npm_execpath), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    path.join(nodePrefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    path.join(path.dirname(process.execPath), 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  for (const c of candidates) if (c && fs.existsSync(c)) return c;
  return null;
}

// The headers of the running node, if installed beside it: <prefix>/include/node.
function localNodeDir() {
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  return fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : null;
}

const nodeGyp = findNodeGyp();
if (!nodeGyp) fail('node-gyp not found (looked at $npm_config_node_gyp and npm\'s bundled copy); install npm with node, or set npm_config_node_gyp');

const args = [nodeGyp, 'rebuild'];
const nodedir = localNodeDir();
if (nodedir) args.push(`--nodedir=${nodedir}`);

const run = spawnSync(process.execPath, args, { cwd: nativeDir, stdio: 'inherit' });
if (run.error) fail(`could not run node-gyp: ${run.error.message}`);
if (run.status !== 0) {
  fail(`node-gyp rebuild exited with ${run.status ?? run.signal}${nodedir ? '' : ' (no local Node headers found, so node-gyp needed to download them)'}; see its output above; a C compiler, make and python3 are required`);
}

// Prove the result loads and exports exactly what postern expects.
try {
  const addon = require(output);
  const names = Object.keys(addon).sort().join(',');
  if (names !== 'peerCred,pidfdOpen,setNonDumpable') throw new Error(`unexpected exports: ${names}`);
} catch (e) {
  fail(`${output} was built but does not load: ${e.message}`);
}
