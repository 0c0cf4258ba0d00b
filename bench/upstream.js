#!/usr/bin/env node
// The far side of the HTTP benchmark, in its own process: an HTTPS server
// answering every request with a small JSON body (GET /large/text and
// /large/bytes: LARGE_MIB MiB of base64 text or of random bytes, for the
// large-body bench), and a UDP DNS server that
// answers A for any name with 127.0.0.1 and AAAA with nothing, so postern
// resolves each request as it would in use.
// Usage: node bench/upstream.js KEY CERT  (prints "https=PORT dns=PORT")
'use strict';
const https = require('node:https');
const dgram = require('node:dgram');
const { readFileSync } = require('node:fs');
const dnsPacket = require('dns-packet');

const [keyFile, certFile] = process.argv.slice(2);
const BODY = JSON.stringify({ ok: true, items: [1, 2, 3], note: 'a small JSON answer' });
const LARGE_MIB = 32;
// Made at the first request for each: most benches never ask.
const large = {};
function largeBody(kind) {
  if (!large[kind]) {
    const bytes = require('node:crypto').randomBytes(LARGE_MIB * 1024 * 1024);
    large[kind] = kind === 'text' ? Buffer.from(bytes.subarray(0, (LARGE_MIB * 1024 * 1024 * 3) / 4).toString('base64')) : bytes;
  }
  return large[kind];
}

const server = https.createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile), keepAliveTimeout: 30_000 }, (req, res) => {
  req.resume();
  req.on('end', () => {
    const kind = /^\/large\/(text|bytes)$/.exec(req.url ?? '')?.[1];
    if (kind) {
      const body = largeBody(kind);
      res.writeHead(200, { 'content-type': kind === 'text' ? 'text/plain' : 'application/octet-stream', 'content-length': body.length });
      res.end(body);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) });
    res.end(BODY);
  });
});

const dns = dgram.createSocket('udp4');
dns.on('message', (msg, rinfo) => {
  let q;
  try {
    q = dnsPacket.decode(msg);
  } catch {
    return;
  }
  const question = q.questions?.[0];
  if (!question) return;
  const answers = question.type === 'A' ? [{ type: 'A', name: question.name, ttl: 60, class: 'IN', data: '127.0.0.1' }] : [];
  const reply = dnsPacket.encode({ id: q.id, type: 'response', flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE, questions: q.questions, answers });
  dns.send(reply, rinfo.port, rinfo.address);
});

server.listen(0, '127.0.0.1', () => {
  dns.bind(0, '127.0.0.1', () => {
    process.stdout.write(`https=${server.address().port} dns=${dns.address().port}\n`);
  });
});
process.on('SIGTERM', () => process.exit(0));
