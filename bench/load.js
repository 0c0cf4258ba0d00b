#!/usr/bin/env node
// Load: 10,000 requests at 64 concurrency through the agent socket, every
// one taking the whole path with the journal on. Prints errors (expected
// none), the daemon's open descriptors before and after (a leak shows as a
// difference), its RSS before, at peak and after, and whether
// `postern audit verify` passes on the journal afterwards.
// Run after `make build`: node bench/load.js [requests]
'use strict';
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const { startHttpBench, rssMiB, CLI } = require('./http-setup');

const REQUESTS = Number(process.argv[2] ?? 10_000);
const CONCURRENCY = 64;
// Locking starts the key-derivation worker for the next unlock, which has
// descriptors of its own (its event loop).
const MARGIN = 4;

function fds(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

async function main() {
  const b = await startHttpBench({ concurrency: CONCURRENCY, name: 'load' });
  try {
    const pid = b.daemon.pid;
    // Warm the pools and the session first, then let idle connections go.
    for (let i = 0; i < CONCURRENCY; i++) await b.sendPostern();
    const before = { fds: fds(pid), rss: rssMiB(pid) };
    let next = 0;
    let errors = 0;
    let firstError = null;
    let peak = before.rss;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
    const started = process.hrtime.bigint();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        next += 1;
        try {
          await b.sendPostern();
        } catch (e) {
          errors += 1;
          firstError ??= e instanceof Error ? e.message : String(e);
        }
      }
    }));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    clearInterval(sampler);
    const after = { fds: fds(pid), rss: rssMiB(pid) };
    // Kept-alive connections: the agents' are closed here, the upstream
    // ones by a lock (pools close at lock); what remains beyond the start
    // is a leak.
    await b.closeClients();
    b.cli(['lock']);
    const deadline = Date.now() + 10_000;
    while (fds(pid) > before.fds + MARGIN && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    const settled = { fds: fds(pid), rss: rssMiB(pid) };
    // Stop the daemon (final checkpoint), then verify the journal offline.
    b.daemon.kill('SIGTERM');
    await new Promise((r) => b.daemon.once('exit', r));
    const v = spawnSync(process.execPath, [CLI, 'audit', 'verify', '--json'], { env: b.penv, encoding: 'utf8' });
    let verdict = `exit ${v.status}`;
    try {
      const j = JSON.parse(v.stdout);
      verdict += `, ${j.entries ?? '?'} entries, ${j.checkpoints ?? '?'} checkpoints${j.problem ? `, problem: ${JSON.stringify(j.problem)}` : ''}`;
    } catch {
      verdict += `: ${v.stderr.trim()}`;
    }
    console.log(`${REQUESTS} requests at ${CONCURRENCY} concurrency in ${seconds.toFixed(1)} s (${(REQUESTS / seconds).toFixed(0)} req/s)`);
    console.log(`  errors: ${errors}${firstError ? ` (first: ${firstError.slice(0, 200)})` : ''}`);
    console.log(`  daemon descriptors: ${before.fds} before, ${after.fds} right after (kept-alive connections), ${settled.fds} once the clients closed and the daemon locked`);
    console.log(`  daemon RSS: ${before.rss.toFixed(0)} MiB before, ${peak.toFixed(0)} MiB at peak, ${settled.rss.toFixed(0)} MiB then`);
    console.log(`  audit verify: ${verdict}`);
    if (errors > 0 || v.status !== 0 || settled.fds > before.fds + MARGIN) process.exitCode = 1;
  } finally {
    await b.cleanup();
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
