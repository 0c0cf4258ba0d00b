#!/usr/bin/env node
// HTTP through the proxy front door (SPEC §11) against the same GET on the
// JSON front door (POST /v1/http), in one run:
// - keep-alive throughput: a Node client under `postern run` using undici's
//   EnvHttpProxyAgent with keep-alive, CONCURRENCY requests in flight
//   (target: ≥ 0.8× the JSON front door at the same concurrency), the
//   two alternated over nine rounds (JSON, proxy, … JSON) after a
//   discarded round of each;
// - curl per request: one `curl` process (a new CONNECT, TLS handshake and
//   proxy connection) per request under one `postern run`;
// - the first request's cost (a leaf certificate made for the host) against
//   later requests on new connections (the leaf cached) and on a kept-alive
//   connection.
// Beside each round's rate, the daemon's CPU per request over its
// throughput phase alone (from /proc/<pid>/stat: main thread and whole
// process): the daemon's one thread bounds both front doors, and its CPU
// varies less with a neighbour's load than the rate does.
// The set-up is bench/http-setup.js's, plus a credential naming an env
// variable so `postern run` hands CMD a placeholder. Run after `make build`:
//   node bench/proxy.js [requests]
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startHttpBench, cpuMicros, CLI } = require('./http-setup');

const REQUESTS = process.argv[2] === '--client' ? 0 : Number(process.argv[2] ?? 4000);
const CONCURRENCY = 16;
const CURL_REQUESTS = 100;
const FRESH_CONNECTIONS = 30;
const PROXY_ROUNDS = 4;
// Requests at concurrency before each proxy round (the JSON front door is
// warmed by a whole round before its first).
const WARM_UP = 500;

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

// n requests, `concurrency` in flight; returns requests per second.
async function rate(n, concurrency, send) {
  let started = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < n) {
        started += 1;
        await send();
      }
    }),
  );
  return n / (ms(t0) / 1000);
}

// CPU µs while `work` runs: of the daemon (main thread, whole process), of
// the load generator (this process) and, through the proxy, of `postern
// run`'s relay (the client's parent). On two cores the daemon's main thread
// shares the machine with these: what they spend bounds throughput too.
async function daemonCpu(pid, work, relayPid = null) {
  const files = [`/proc/${pid}/task/${pid}/stat`, `/proc/${pid}/stat`, '/proc/self/stat', relayPid ? `/proc/${relayPid}/stat` : null];
  const read = () => files.map((f) => (f ? cpuMicros(f) : 0));
  const before = read();
  const result = await work();
  const after = read();
  const d = after.map((a, i) => a - before[i]);
  return { result, main: d[0], whole: d[1], client: d[2], relay: d[3] };
}

// The client side, run as CMD under `postern run`: prints one JSON line.
async function client(url, n, concurrency, daemonPid) {
  const { EnvHttpProxyAgent, request } = require('undici');
  const headers = { accept: 'application/json', authorization: `Bearer ${process.env.BENCH_TOKEN}` };
  const once = async (dispatcher) => {
    const t0 = process.hrtime.bigint();
    const r = await request(url, { dispatcher, headers });
    const body = await r.body.text();
    if (r.statusCode !== 200) throw new Error(`proxy: ${r.statusCode} ${body}`);
    return ms(t0);
  };
  // Each fresh agent opens its own CONNECT tunnel.
  const fresh = async () => {
    const a = new EnvHttpProxyAgent();
    try {
      return await once(a);
    } finally {
      await a.close();
    }
  };
  const first = await fresh();
  const freshTimes = [];
  for (let i = 0; i < FRESH_CONNECTIONS; i++) freshTimes.push(await fresh());
  const agent = new EnvHttpProxyAgent({ keepAliveTimeout: 30_000, connections: concurrency });
  const kept = [];
  for (let i = 0; i < 200; i++) kept.push(await once(agent));
  // Each round's client is a new process, warmed at concurrency as the JSON
  // front door's client was: its pool's other connections (a CONNECT and a
  // TLS handshake each, ≈20 ms) open here, and neither side's code is
  // measured while it is still being compiled.
  await rate(WARM_UP, concurrency, () => once(agent));
  const t = await daemonCpu(daemonPid, () => rate(n, concurrency, () => once(agent)), process.ppid);
  await agent.close();
  const cpu = { main: t.main / n, whole: t.whole / n, client: t.client / n, relay: t.relay / n };
  process.stdout.write(`${JSON.stringify({ first, fresh: median(freshTimes), kept: median(kept), rate: t.result, cpu })}\n`);
}

function underRun(b, cmd) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, 'run', '--credential', 'bench-proxy', '--', ...cmd], { env: b.penv, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`postern run ${cmd[0]} exited ${code}: ${err.slice(-2000)}`))));
  });
}

async function jsonRound(b, n) {
  const t = await daemonCpu(b.daemon.pid, () => rate(n, CONCURRENCY, b.sendPostern));
  return { rate: t.result, cpu: { main: t.main / n, whole: t.whole / n, client: t.client / n, relay: 0 } };
}

async function main() {
  const b = await startHttpBench({ concurrency: CONCURRENCY, name: 'proxy' });
  try {
    const def = path.join(b.dir, 'bench-proxy.toml');
    fs.writeFileSync(def, `name = "bench-proxy"\nkind = "http"\nenv = ["BENCH_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${b.host}"\nports = [${b.httpsPort}]\nmethods = ["GET"]\npaths = ["/*"]\n`);
    const secretFile = path.join(b.dir, 'proxy-secret');
    fs.writeFileSync(secretFile, 'bench-proxy-secret-0123456789abcdef01234', { mode: 0o600 });
    b.cli(['cred', 'add', '--file', def, '--secret-file', secretFile, '--passphrase-file', b.passFile]);
    const url = `https://${b.host}:${b.httpsPort}/v1/items?page=1`;

    // JSON, proxy, JSON, proxy, JSON: a neighbour's load or the daemon's
    // own warming spreads over both. The first proxy round's one-at-a-time
    // figures are the ones shown (its first request makes the leaf).
    const proxyRound = async () =>
      JSON.parse(await underRun(b, [process.execPath, __filename, '--client', url, String(REQUESTS), String(CONCURRENCY), String(b.daemon.pid)]));
    // A whole round of each first, discarded: the daemon's first few
    // thousand requests on a path cost about twice the CPU of later ones.
    // The proxy's one-at-a-time figures are the first round's (its first
    // request makes the leaf certificate).
    await jsonRound(b, REQUESTS);
    const first = await proxyRound();
    const jsons = [];
    const proxies = [];
    for (let round = 0; round < PROXY_ROUNDS; round++) {
      jsons.push(await jsonRound(b, REQUESTS));
      proxies.push(await proxyRound());
    }
    jsons.push(await jsonRound(b, REQUESTS));
    const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
    const jsonRates = jsons.map((j) => j.rate);
    const jsonMean = mean(jsonRates);
    const proxy = { ...first, rate: mean(proxies.map((p) => p.rate)) };
    const cpuOf = (rounds) => Object.fromEntries(['main', 'whole', 'client', 'relay'].map((k) => [k, mean(rounds.map((r) => r.cpu[k]))]));
    const jsonCpu = cpuOf(jsons);
    const proxyCpu = cpuOf(proxies);

    const t0 = process.hrtime.bigint();
    await underRun(b, ['sh', '-c', `for i in $(seq ${CURL_REQUESTS}); do curl -sS --fail -o /dev/null -H "Authorization: Bearer $BENCH_TOKEN" '${url}' || exit 1; done`]);
    const curlMs = ms(t0) / CURL_REQUESTS;

    const f = (x) => x.toFixed(0).padStart(6);
    console.log(`throughput, ${REQUESTS} GETs at ${CONCURRENCY} concurrency:`);
    const rounds = (a) => a.map((x) => x.toFixed(0)).join(', ');
    console.log(`  JSON front door (POST /v1/http)          ${f(jsonMean)} req/s   (rounds: ${rounds(jsonRates)})`);
    console.log(`  proxy, undici keep-alive under run        ${f(proxy.rate)} req/s   (rounds: ${rounds(proxies.map((p) => p.rate))})`);
    console.log(`  ratio proxy keep-alive / JSON front door ${(proxy.rate / jsonMean).toFixed(2)}×   (target ≥ 0.80)`);
    const us = (c) => `${c.main.toFixed(0)} µs main thread, ${c.whole.toFixed(0)} µs whole`;
    console.log(`  daemon CPU per request: JSON ${us(jsonCpu)}; proxy ${us(proxyCpu)}`);
    console.log(`  CPU ratio JSON / proxy (whole daemon) ${(jsonCpu.whole / proxyCpu.whole).toFixed(2)}×   (rounds, µs whole: JSON ${jsons.map((j) => j.cpu.whole.toFixed(0)).join(', ')}; proxy ${proxies.map((p) => p.cpu.whole.toFixed(0)).join(', ')})`);
    console.log(`  beside the daemon, CPU per request: JSON client ${jsonCpu.client.toFixed(0)} µs; proxy client ${proxyCpu.client.toFixed(0)} µs, postern run's relay ${proxyCpu.relay.toFixed(0)} µs`);
    console.log(`curl per request under one postern run, ${CURL_REQUESTS} in a row: ${curlMs.toFixed(1)} ms each (${(1000 / curlMs).toFixed(0)} req/s; a process, CONNECT and TLS handshake each)`);
    console.log('one request at a time through the proxy:');
    console.log(`  first (a leaf certificate made)       ${proxy.first.toFixed(2)} ms`);
    console.log(`  later, new connection (leaf cached)   ${proxy.fresh.toFixed(2)} ms median of ${FRESH_CONNECTIONS}`);
    console.log(`  later, kept-alive connection          ${proxy.kept.toFixed(2)} ms median of 200`);
    console.log(`  first-request cost over a new connection ${(proxy.first - proxy.fresh).toFixed(2)} ms`);
  } finally {
    await b.cleanup();
  }
}

const fail = (e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
};
if (process.argv[2] === '--client') client(process.argv[3], Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6])).catch(fail);
else main().catch(fail);
