#!/usr/bin/env node
// The least a Node process can do to serve postern's JSON front door: an
// HTTP server on a Unix socket that reads the body POST /v1/http takes
// ({credential, method, url, headers, body}), sends it with a pooled undici
// Pool per origin, the `Authorization` header set, and answers
// {status, headers, body}. No validation, policy, DNS, approval, journal,
// vault or redaction: the floor postern's own cost is measured against.
// Usage: node bench/null-proxy.js SOCKET CA_FILE ADDRESS AUTHORIZATION
//   ADDRESS is where every origin's name goes (the bench's upstream);
//   prints "ready" once it listens.
'use strict';
const http = require('node:http');
const fs = require('node:fs');
const { Pool } = require('undici');

const [socket, caFile, address, authorization] = process.argv.slice(2);
const CONNECTIONS = 64;
const ca = fs.readFileSync(caFile, 'utf8');
const lookup = (_host, opts, cb) => (opts && opts.all ? cb(null, [{ address, family: 4 }]) : cb(null, address, 4));
const pools = new Map();

function poolFor(origin) {
  let pool = pools.get(origin);
  if (!pool) {
    pool = new Pool(origin, { connections: CONNECTIONS, connect: { ca, lookup } });
    pools.set(origin, pool);
  }
  return pool;
}

function reply(res, status, value) {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function forward(raw) {
  const req = JSON.parse(raw);
  const url = new URL(req.url);
  const r = await poolFor(url.origin).request({
    path: url.pathname + url.search,
    method: req.method,
    headers: { ...req.headers, authorization },
    body: req.body,
  });
  const body = await r.body.text();
  return { status: r.statusCode, headers: r.headers, body };
}

const server = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    forward(Buffer.concat(chunks).toString('utf8')).then(
      (answer) => reply(res, 200, answer),
      (e) =>
        reply(res, 502, { error: { code: 'upstream_error', message: e instanceof Error ? e.message : String(e) } }),
    );
  });
});

fs.rmSync(socket, { force: true });
server.listen(socket, () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => process.exit(0));
