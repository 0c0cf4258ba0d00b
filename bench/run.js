#!/usr/bin/env node
// `make bench`: every benchmark, one after another, each printing its
// figures (ratios against a baseline measured in the same run where there is
// one). Targets live in the issues; nothing here fails on a number.
'use strict';
const { spawnSync } = require('node:child_process');
const { join } = require('node:path');

const BENCHES = [
  ['audit verify throughput', 'verify.js'],
  ['durable audit appends, 64 writers', 'append.js'],
  ['HTTP through postern versus direct undici', 'http.js'],
];

const env = { ...process.env };
delete env.NODE_OPTIONS;
let failed = 0;
for (const [title, file] of BENCHES) {
  process.stdout.write(`\n== ${title}\n`);
  const r = spawnSync(process.execPath, [join(__dirname, file)], { stdio: 'inherit', env });
  if (r.status !== 0) failed += 1;
}
process.exit(failed ? 1 : 0);
