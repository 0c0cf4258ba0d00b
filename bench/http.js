#!/usr/bin/env node
// HTTP through postern against the same request sent directly, in one run:
// - throughput: 64 concurrent small GETs for a few seconds, direct pooled
//   undici versus an agent on agent.sock (target: postern ≥ 0.5× direct);
// - sequential latency: one request at a time, medians (target: postern
//   adds ≤ 1 ms);
// - the daemon's resident memory while under the concurrent load (target:
//   ≤ 150 MiB);
// - POST throughput beside GET's: a connection that carried a body is
//   closed after its response (SPEC §6.2), so each POST through postern
//   costs a new TLS connection; shown against direct undici pooled and
//   direct undici with a new connection per POST.
// Every postern request takes the whole path: validation, policy, a DNS
// query to a local UDP server, session check, a durable audit intent, the
// pinned pooled connection with injection, redaction, the audit outcome.
// The upstream runs in its own process. Run after `make build`:
//   node bench/http.js [seconds]
'use strict';
const { startHttpBench, rssMiB } = require('./http-setup');

const SECONDS = Number(process.argv[2] ?? 4);
const CONCURRENCY = 64;
const SEQUENTIAL = 800;
const ROUNDS = 2;

// `send` performs one request and throws on anything but success.
async function throughput(send, seconds) {
  let done = 0;
  const deadline = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < deadline) {
      await send();
      done += 1;
    }
  }));
  return done / (Number(process.hrtime.bigint() - started) / 1e9);
}

async function latencies(send, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await send();
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  out.sort((a, b) => a - b);
  return { median: out[Math.floor(n / 2)], p90: out[Math.floor(n * 0.9)] };
}

async function main() {
  const b = await startHttpBench({ concurrency: CONCURRENCY, name: 'http' });
  try {
    await throughput(b.sendDirect, 1);
    await throughput(b.sendPostern, 1);

    const rates = { direct: [], postern: [] };
    let peakRss = 0;
    for (let round = 0; round < ROUNDS; round++) {
      rates.direct.push(await throughput(b.sendDirect, SECONDS));
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(b.daemon.pid))), 100);
      rates.postern.push(await throughput(b.sendPostern, SECONDS));
      clearInterval(sampler);
    }
    const posts = { pooled: [], fresh: [], postern: [] };
    await throughput(b.sendPosternPost, 1);
    for (let round = 0; round < ROUNDS; round++) {
      posts.pooled.push(await throughput(b.sendDirectPost, SECONDS));
      posts.fresh.push(await throughput(b.sendDirectPostFresh, SECONDS));
      posts.postern.push(await throughput(b.sendPosternPost, SECONDS));
    }
    const lat = { direct: await latencies(b.sendDirect, SEQUENTIAL), postern: await latencies(b.sendPostern, SEQUENTIAL) };

    const mean = (a) => a.reduce((s, x) => s + x, 0) / a.length;
    const d = mean(rates.direct);
    const p = mean(rates.postern);
    const f = (x) => x.toFixed(0).padStart(6);
    console.log(`throughput, ${CONCURRENCY} concurrent GETs, ${ROUNDS}×${SECONDS} s each:`);
    console.log(`  direct undici (pooled)  ${f(d)} req/s   (rounds: ${rates.direct.map((x) => x.toFixed(0)).join(', ')})`);
    console.log(`  through postern         ${f(p)} req/s   (rounds: ${rates.postern.map((x) => x.toFixed(0)).join(', ')})`);
    console.log(`  ratio postern/direct    ${(p / d).toFixed(2)}×   (target ≥ 0.50)`);
    console.log(`sequential latency, ${SEQUENTIAL} requests one at a time:`);
    console.log(`  direct   median ${lat.direct.median.toFixed(3)} ms, p90 ${lat.direct.p90.toFixed(3)} ms`);
    console.log(`  postern  median ${lat.postern.median.toFixed(3)} ms, p90 ${lat.postern.p90.toFixed(3)} ms`);
    console.log(`  added median ${(lat.postern.median - lat.direct.median).toFixed(3)} ms   (target ≤ 1 ms)`);
    const pp = mean(posts.postern);
    const rounds = (a) => a.map((x) => x.toFixed(0)).join(', ');
    console.log(`throughput, ${CONCURRENCY} concurrent small JSON POSTs, ${ROUNDS}×${SECONDS} s each:`);
    console.log(`  direct undici (pooled)            ${f(mean(posts.pooled))} req/s   (rounds: ${rounds(posts.pooled)})`);
    console.log(`  direct undici (new connection)    ${f(mean(posts.fresh))} req/s   (rounds: ${rounds(posts.fresh)})`);
    console.log(`  through postern (new connection)  ${f(pp)} req/s   (rounds: ${rounds(posts.postern)})`);
    console.log(`  ratio postern/direct pooled       ${(pp / mean(posts.pooled)).toFixed(2)}×`);
    console.log(`  ratio postern/direct new conn.    ${(pp / mean(posts.fresh)).toFixed(2)}×`);
    console.log(`  POST/GET through postern          ${(pp / p).toFixed(2)}×`);
    console.log(`daemon RSS under the concurrent load: peak ${peakRss.toFixed(1)} MiB   (target ≤ 150 MiB)`);
  } finally {
    await b.cleanup();
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
