#!/usr/bin/env node
// Large downloads through the proxy front door (SPEC §11) against the same
// download straight from the upstream, in one run: a 32 MiB body of base64
// text (the redactor's worst case: many positions where an encoded form of
// the secret could begin) and one of random bytes (what a git pack or a
// tarball looks like), each fetched by curl under `postern run` with
// redaction on, with redaction off (a second credential for the same host,
// redact_response = false: what the streaming path costs without the
// search), and by curl directly. Each figure is the median of ROUNDS
// downloads, the three ways alternated; the ratio to direct is the
// headline. Run after `make build`:
//   node bench/large-body.js [rounds]
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startHttpBench, CLI } = require('./http-setup');

const ROUNDS = Number(process.argv[2] ?? 3);
const KINDS = ['text', 'bytes'];

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

function sh(env, argv) {
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${argv.join(' ').slice(0, 200)} exited ${code}: ${err.slice(-1000)}`))));
  });
}

// MB/s of one download, from curl's own size and time.
function speed(out) {
  const [status, size, seconds] = out.trim().split(' ');
  if (status !== '200') throw new Error(`the download answered ${status}`);
  return Number(size) / 1e6 / Number(seconds);
}

const CURL_W = "-w '%{http_code} %{size_download} %{time_total}'";

async function main() {
  const b = await startHttpBench({ concurrency: 1, name: 'large', httpConfig: 'max_response_body = "64MiB"' });
  try {
    const credential = (name, env, extra) => {
      const def = path.join(b.dir, `${name}.toml`);
      fs.writeFileSync(def, `name = "${name}"\nkind = "http"\nenv = ["${env}"]\n${extra}allow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${b.host}"\nports = [${b.httpsPort}]\nmethods = ["GET"]\npaths = ["/*"]\n`);
      const secretFile = path.join(b.dir, `${name}-secret`);
      fs.writeFileSync(secretFile, `${name}-secret-0123456789abcdef0123456789`, { mode: 0o600 });
      b.cli(['cred', 'add', '--file', def, '--secret-file', secretFile, '--passphrase-file', b.passFile]);
    };
    credential('large-redacted', 'REDACTED_TOKEN', '');
    credential('large-plain', 'PLAIN_TOKEN', 'redact_response = false\n');
    const url = (kind) => `https://${b.host}:${b.httpsPort}/large/${kind}`;
    const viaProxy = (kind, token) =>
      sh(b.penv, [process.execPath, CLI, 'run', '--credential', 'large-redacted', '--credential', 'large-plain', '--', 'sh', '-c', `curl -sS -o /dev/null ${CURL_W} -H "Authorization: Bearer $${token}" '${url(kind)}'`]);
    const direct = (kind) => sh(b.penv, ['sh', '-c', `curl -sS -o /dev/null ${CURL_W} --noproxy '*' --cacert '${b.ca}' --resolve '${b.host}:${b.httpsPort}:127.0.0.1' -H 'Authorization: Bearer x' '${url(kind)}'`]);
    // The first request of each way makes the body, the leaf and the session.
    for (const kind of KINDS) {
      await direct(kind);
      await viaProxy(kind, 'REDACTED_TOKEN');
      await viaProxy(kind, 'PLAIN_TOKEN');
    }
    console.log(`32 MiB downloads by curl, median of ${ROUNDS} each, alternated:`);
    for (const kind of KINDS) {
      const f = { direct: [], redacted: [], plain: [] };
      for (let i = 0; i < ROUNDS; i++) {
        f.direct.push(speed(await direct(kind)));
        f.redacted.push(speed(await viaProxy(kind, 'REDACTED_TOKEN')));
        f.plain.push(speed(await viaProxy(kind, 'PLAIN_TOKEN')));
      }
      const d = median(f.direct);
      const r = median(f.redacted);
      const p = median(f.plain);
      const label = kind === 'text' ? 'base64 text ' : 'random bytes';
      console.log(`  ${label}  direct ${d.toFixed(0).padStart(5)} MB/s   postern run, redacted ${r.toFixed(0).padStart(4)} MB/s (${(r / d).toFixed(3)}× direct)   redaction off ${p.toFixed(0).padStart(4)} MB/s (${(p / d).toFixed(3)}×)`);
    }
  } finally {
    await b.cleanup();
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
