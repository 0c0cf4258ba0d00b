#!/usr/bin/env node
// postern's HTTP path beside yardsticks, in one run, the same GET through
// each at the same concurrency, from the same undici client:
// - direct: undici straight to the HTTPS upstream (the floor of latency);
// - nginx: one worker, plain HTTP in on a Unix socket, `Authorization`
//   injected, a keep-alive pool to the upstream with its certificate
//   verified (bench/nginx.js; skipped, saying so, when nginx is missing);
// - null proxy: a Node process taking postern's JSON request shape on a
//   Unix socket and forwarding it with undici, nothing else
//   (bench/null-proxy.js);
// - postern: POST /v1/http on agent.sock through the whole path.
// For each: requests per second at 64 concurrency, the server's CPU per
// request from /proc/<pid>/stat (its main thread and the whole process),
// p50 and p99 of sequential requests and what the proxy adds to direct's,
// and resident memory. Rounds alternate the paths so a noisy neighbour
// spreads over all of them; a warm-up precedes every measurement. Targets
// are printed beside the figures, never asserted. Run after `make build`:
//   node bench/yardsticks.js [requests per path and round]
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { Pool } = require('undici');
const { startHttpBench, rssMiB, cpuMicros } = require('./http-setup');
const { startNginx } = require('./nginx');

const REQUESTS = Number(process.argv[2] ?? 6000);
if (!Number.isInteger(REQUESTS) || REQUESTS < 100) {
  console.error(`requests per path and round: expected a whole number of at least 100, got ${process.argv[2]}`);
  process.exit(2);
}
const ROUNDS = 2;
const CONCURRENCY = 64;
const WARM_UP = Math.min(1000, Math.ceil(REQUESTS / 5));
// Before a path's first measurement: a JIT-compiled server reaches its
// steady cost only after a few thousand requests (postern's first 4,000
// cost twice the CPU of later ones, measured at 16 concurrency).
const FIRST_WARM_UP = Math.max(WARM_UP, Math.min(5000, REQUESTS));
const SEQUENTIAL = 300;
const SEQUENTIAL_WARM_UP = 30;
const SETTLE_MS = 3000;
const AUTHORIZATION = 'Bearer yardstick-token-not-a-secret';
const GET = { path: '/v1/items?page=1', headers: { accept: 'application/json' } };

// Issue 18's targets for postern: [bound, at most (true) or at least, unit].
const TARGETS = {
  mainCpu: [120, true, ' µs'],
  processCpu: [150, true, ' µs'],
  vsNull: [0.35, false, '×'],
  vsNginx: [0.25, false, '×'],
  addedP50: [0.7, true, ' ms'],
  addedP99: [2, true, ' ms'],
  rssIdle: [100, true, ' MiB'],
  rssPeak: [160, true, ' MiB'],
};

const sumCpu = (files) => files.reduce((t, f) => t + cpuMicros(f), 0);
// The upstream process http-setup.js started: this process's child running
// upstream.js.
function upstreamPid() {
  const children = fs.readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/);
  const pid = children.find((c) => {
    try {
      return fs.readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('upstream.js');
    } catch {
      return false;
    }
  });
  if (!pid) throw new Error('the upstream process was not found among this process’s children');
  return Number(pid);
}
const mainThread = (pid) => `/proc/${pid}/task/${pid}/stat`;
const wholeProcess = (pid) => `/proc/${pid}/stat`;

// n requests, CONCURRENCY in flight; `send` throws on anything but success.
async function drive(send, n) {
  let started = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (started < n) {
        started += 1;
        await send();
      }
    }),
  );
}

async function sequential(send) {
  for (let i = 0; i < SEQUENTIAL_WARM_UP; i++) await send();
  const times = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t = process.hrtime.bigint();
    await send();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(SEQUENTIAL * 0.5)], p99: times[Math.ceil(SEQUENTIAL * 0.99) - 1] };
}

function startNullProxy(dir, ca) {
  const socket = path.join(dir, 'null-proxy.sock');
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(
    process.execPath,
    [path.join(__dirname, 'null-proxy.js'), socket, ca, '127.0.0.1', AUTHORIZATION],
    { stdio: ['ignore', 'pipe', 'inherit'], env },
  );
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve({ socket, pid: child.pid, stop: () => child.kill('SIGTERM') }));
    child.once('exit', (code) => reject(new Error(`the null proxy exited with ${code} before it was ready`)));
  });
}

const sendGet = (pool, name) => async () => {
  const r = await pool.request({ ...GET, method: 'GET' });
  const body = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${name}: ${r.statusCode} ${body}`);
};
const sendJson = (pool, name, payload) => async () => {
  const r = await pool.request({
    path: '/v1/http',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: payload,
  });
  const body = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${name}: ${r.statusCode} ${body}`);
  return body;
};

// Each path: how to send one request, which stat files hold its server's
// CPU (main thread; whole process, every process it has) and whose RSS to
// sample. Direct has no server of ours.
function yardstick(name, send, { main = [], whole = [], pids = [] } = {}) {
  return {
    name,
    send,
    main,
    whole,
    pids,
    requests: 0,
    seconds: 0,
    mainCpu: 0,
    processCpu: 0,
    clientCpu: 0,
    upstreamCpu: 0,
    peakRss: 0,
    rss: () => pids.reduce((t, p) => t + rssMiB(p), 0),
  };
}

let upstreamStat;

async function measure(p) {
  await drive(p.send, p.requests === 0 ? FIRST_WARM_UP : WARM_UP);
  const cpu0 = [sumCpu(p.main), sumCpu(p.whole)];
  const client0 = process.cpuUsage();
  const upstream0 = cpuMicros(upstreamStat);
  const t0 = process.hrtime.bigint();
  await drive(p.send, REQUESTS);
  p.seconds += Number(process.hrtime.bigint() - t0) / 1e9;
  p.mainCpu += sumCpu(p.main) - cpu0[0];
  p.processCpu += sumCpu(p.whole) - cpu0[1];
  const client = process.cpuUsage(client0);
  p.clientCpu += client.user + client.system;
  p.upstreamCpu += cpuMicros(upstreamStat) - upstream0;
  p.requests += REQUESTS;
}

function report(paths, postern, memory) {
  const by = Object.fromEntries(paths.map((p) => [p.name, p]));
  const rate = (p) => p.requests / p.seconds;
  const direct = by.direct;
  const cols = [
    ['path', 14, (p) => p.name],
    ['req/s', 7, (p) => rate(p).toFixed(0)],
    ['×nginx', 7, (p) => (by.nginx ? (rate(p) / rate(by.nginx)).toFixed(2) : '—')],
    ['×null', 6, (p) => (rate(p) / rate(by['null proxy'])).toFixed(2)],
    ['main µs/req', 12, (p) => (p.main.length ? (p.mainCpu / p.requests).toFixed(0) : '—')],
    ['proc µs/req', 12, (p) => (p.whole.length ? (p.processCpu / p.requests).toFixed(0) : '—')],
    ['client µs/req', 14, (p) => (p.clientCpu / p.requests).toFixed(0)],
    ['upstream µs/req', 16, (p) => (p.upstreamCpu / p.requests).toFixed(0)],
    ['p50 ms', 7, (p) => p.lat.p50.toFixed(3)],
    ['p99 ms', 7, (p) => p.lat.p99.toFixed(3)],
    ['+p50 ms', 8, (p) => (p === direct ? '—' : (p.lat.p50 - direct.lat.p50).toFixed(3))],
    ['+p99 ms', 8, (p) => (p === direct ? '—' : (p.lat.p99 - direct.lat.p99).toFixed(3))],
    ['peak RSS MiB', 13, (p) => (p.pids.length ? p.peakRss.toFixed(1) : '—')],
  ];
  const row = (cells) =>
    cells.map((c, i) => (i === 0 ? String(c).padEnd(cols[i][1]) : String(c).padStart(cols[i][1]))).join(' ');
  console.log(
    `${CONCURRENCY} concurrent GETs, ${ROUNDS} rounds × ${REQUESTS} requests per path (after ${FIRST_WARM_UP} to warm up before a path's first round, ${WARM_UP} before its second); ${SEQUENTIAL} sequential per path.\nmain/proc: the server's CPU per request, its main thread and the whole process (nginx: the worker; master + worker); client: the load generator's (this process); upstream: the HTTPS server's`,
  );
  console.log(row(cols.map((c) => c[0])));
  for (const p of paths) console.log(row(cols.map((c) => c[2](p))));

  const label = (text) => `  ${text.padEnd(34)} `;
  const line = (text, value, digits, [bound, atMost, unit]) => {
    const met = atMost ? value <= bound : value >= bound;
    const target = `${atMost ? '≤' : '≥'} ${bound}${unit}`;
    console.log(
      `${label(text)}${`${value.toFixed(digits)}${unit}`.padStart(10)}   target ${target.padEnd(10)} ${met ? 'met' : 'missed'}`,
    );
  };
  const mainUs = postern.mainCpu / postern.requests;
  const procUs = postern.processCpu / postern.requests;
  const vsNull = rate(postern) / rate(by['null proxy']);
  const added50 = postern.lat.p50 - direct.lat.p50;
  const added99 = postern.lat.p99 - direct.lat.p99;
  console.log('headline:');
  if (by.nginx)
    console.log(
      `  postern / nginx throughput ${(rate(postern) / rate(by.nginx)).toFixed(2)}×, CPU per request ${(procUs / (by.nginx.processCpu / by.nginx.requests)).toFixed(1)}× nginx's`,
    );
  else console.log('  postern / nginx: not measured (nginx is not installed)');
  console.log(
    `  postern / null proxy throughput ${vsNull.toFixed(2)}×, CPU per request ${(procUs / (by['null proxy'].processCpu / by['null proxy'].requests)).toFixed(1)}× the null proxy's`,
  );
  console.log('postern against its targets (printed, not asserted):');
  line('daemon main-thread CPU per request', mainUs, 0, TARGETS.mainCpu);
  line('whole daemon CPU per request', procUs, 0, TARGETS.processCpu);
  line('throughput / null proxy', vsNull, 2, TARGETS.vsNull);
  if (by.nginx) line('throughput / nginx', rate(postern) / rate(by.nginx), 2, TARGETS.vsNginx);
  else console.log(`${label('throughput / nginx')}${'not measured'.padStart(10)}`);
  line('added p50, sequential', added50, 3, TARGETS.addedP50);
  line('added p99, sequential', added99, 3, TARGETS.addedP99);
  line('daemon RSS idle', memory.idle, 1, TARGETS.rssIdle);
  line('daemon RSS peak under the bench', memory.peak, 1, TARGETS.rssPeak);
  console.log(
    `${label(`daemon RSS after, settled ${SETTLE_MS / 1000} s`)}${`${memory.after.toFixed(1)} MiB`.padStart(10)}`,
  );
}

async function main() {
  const b = await startHttpBench({ concurrency: CONCURRENCY, name: 'yardsticks' });
  const stops = [];
  const pools = [];
  const pool = (origin, opts) => {
    const p = new Pool(origin, { connections: CONCURRENCY, ...opts });
    pools.push(p);
    return p;
  };
  try {
    // http-setup.js writes the bench CA beside the home.
    const ca = path.join(b.dir, 'ca.pem');
    upstreamStat = wholeProcess(upstreamPid());
    const url = `https://${b.host}:${b.httpsPort}${GET.path}`;
    const payload = JSON.stringify({ credential: 'bench', method: 'GET', url, headers: GET.headers });
    const direct = pool(`https://${b.host}:${b.httpsPort}`, {
      connect: {
        ca: fs.readFileSync(ca, 'utf8'),
        lookup: (_h, o, cb) =>
          o && o.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4),
      },
    });
    const paths = [yardstick('direct', sendGet(direct, 'direct'))];

    const nginx = await startNginx({
      dir: path.join(b.dir, 'nginx'),
      host: b.host,
      port: b.httpsPort,
      ca,
      authorization: AUTHORIZATION,
    });
    if (nginx) {
      stops.push(nginx.stop);
      paths.push(
        yardstick('nginx', sendGet(pool('http://nginx', { socketPath: nginx.socket }), 'nginx'), {
          main: [mainThread(nginx.worker)],
          whole: [wholeProcess(nginx.master), wholeProcess(nginx.worker)],
          pids: [nginx.master, nginx.worker],
        }),
      );
    }
    const nul = await startNullProxy(b.dir, ca);
    stops.push(nul.stop);
    const sendNull = sendJson(pool('http://null-proxy', { socketPath: nul.socket }), 'null proxy', payload);
    paths.push(
      yardstick('null proxy', sendNull, {
        main: [mainThread(nul.pid)],
        whole: [wholeProcess(nul.pid)],
        pids: [nul.pid],
      }),
    );
    const d = b.daemon.pid;
    const postern = yardstick('postern', b.sendPostern, { main: [mainThread(d)], whole: [wholeProcess(d)], pids: [d] });
    paths.push(postern);

    // Both JSON paths must reach the upstream, not merely answer.
    const answer = JSON.parse(await sendNull());
    if (answer.status !== 200) throw new Error(`null proxy: the upstream answered ${answer.status}`);

    const sampler = setInterval(() => {
      for (const p of paths) if (p.pids.length) p.peakRss = Math.max(p.peakRss, p.rss());
    }, 50);
    try {
      let idle = null;
      for (let round = 0; round < ROUNDS; round++) {
        for (const p of paths) {
          // The daemon has been idle since set-up while the others ran.
          if (p === postern && idle === null) idle = rssMiB(d);
          await measure(p);
        }
      }
      for (const p of paths) p.lat = await sequential(p.send);
      clearInterval(sampler);
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      report(paths, postern, { idle, peak: postern.peakRss, after: rssMiB(d) });
    } finally {
      clearInterval(sampler);
    }
  } finally {
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
    for (const stop of stops) await stop();
    await b.cleanup();
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
