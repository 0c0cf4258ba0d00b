#!/usr/bin/env node
// `make bench`: every benchmark, one after another, each printing its
// figures (ratios against a baseline measured in the same run where there is
// one). Targets live in the issues; nothing here fails on a number.
'use strict';
const { spawnSync } = require('node:child_process');
const { join, dirname } = require('node:path');

const BENCHES = [
  ['audit verify throughput', 'verify.js'],
  ['durable audit appends, 64 writers', 'append.js'],
  ['HTTP through postern versus direct undici', 'http.js'],
  ['yardsticks: direct undici, nginx, a null proxy and postern side by side', 'yardsticks.js'],
  ['HTTP through the proxy front door versus POST /v1/http', 'proxy.js'],
  ['32 MiB downloads through postern run versus direct', 'large-body.js'],
  ['load: 10,000 requests at 64 concurrency, journal on', 'load.js'],
  ['SSH commands with and without connection reuse', 'ssh.ts'],
];
// TypeScript benches (they share the tests' sshd harness) run through the
// TypeScript loader the test runner installs.
const TS_LOADER = join(dirname(require.resolve('@tapjs/typescript/package.json')), 'dist', 'esm', 'import.mjs');

const env = { ...process.env };
delete env.NODE_OPTIONS;
let failed = 0;
for (const [title, file] of BENCHES) {
  process.stdout.write(`\n== ${title}\n`);
  const args = file.endsWith('.ts') ? [`--import=${require('node:url').pathToFileURL(TS_LOADER).href}`, join(__dirname, file)] : [join(__dirname, file)];
  const r = spawnSync(process.execPath, args, { stdio: 'inherit', env });
  if (r.status !== 0) failed += 1;
}
process.exit(failed ? 1 : 0);
