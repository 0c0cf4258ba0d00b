#!/usr/bin/env node
// `postern audit verify` throughput: builds a 100,000-entry journal (events,
// key and vault entries, a checkpoint every 64 entries, 4 segments) in a
// temporary directory with the shared encoders, then verifies it and prints
// `verify: N entries/s` (target ≥ 100,000/s) and the peak RSS.
// Run after `npx tsc -p tsconfig.json`: `node bench/verify.js [ENTRIES]`.
'use strict';
const { mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const fmt = require('../dist/shared/audit-format');
const crypto = require('../dist/shared/crypto');
const { verifyJournal } = require('../dist/shared/audit-verify');

const ENTRIES = Number(process.argv[2] ?? 100000);
const SEGMENT = 32768; // entries per segment file
const RUNS = 3;

async function build(dir, n) {
  await crypto.sodiumReady();
  const sign = crypto.ed25519Keypair();
  const box = crypto.x25519Keypair();
  const journalId = crypto.randomBytes(16).toString('hex');
  const eventKey = crypto.randomBytes(32);
  const path = join(dir, 'audit.log');
  let file = [];
  let segment = 0;
  let prev = fmt.GENESIS_PREV;
  let since = 0;
  const flush = () => writeFileSync(fmt.segmentPath(path, segment), Buffer.concat(file));
  for (let seq = 1; seq <= n; seq++) {
    let body;
    if (seq === 1) body = { type: 'genesis', journal_id: journalId, sign_pub: sign.publicKey.toString('base64'), box_pub: box.publicKey.toString('base64') };
    else if ((seq - 1) % SEGMENT === 0) {
      flush();
      file = [];
      segment += 1;
      body = { type: 'segment', segment };
    } else if (since === fmt.CHECKPOINT_EVERY - 1 || seq === n) {
      const sig = crypto.ed25519Sign(fmt.checkpointMessage(journalId, seq - 1, prev), sign.privateKey);
      body = { type: 'checkpoint', head_seq: seq - 1, head: prev, sign_pub: sign.publicKey.toString('base64'), sig: sig.toString('base64') };
    } else if (seq === 2) body = { type: 'key', key_id: 2, sealed: crypto.sealTo(eventKey, box.publicKey).toString('base64') };
    else if (seq % 100 === 0) body = { type: 'vault', generation: seq / 100, vault_hash: fmt.entryHash(Buffer.from(String(seq))) };
    else body = { type: 'event', key_id: 2, ...fmt.encryptEvent(eventKey, seq, prev, { kind: 'http_request', credential: 'github', method: 'GET', host: 'api.github.com', status: 200, bytes: seq }) };
    const line = fmt.encodeEntry(seq, prev, new Date(Date.UTC(2025, 0, 1) + seq).toISOString(), body);
    file.push(line, Buffer.from('\n'));
    prev = fmt.entryHash(line);
    since = body.type === 'checkpoint' ? 0 : since + 1;
  }
  flush();
  return path;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'pt-bench-verify-'));
  try {
    const path = await build(dir, ENTRIES);
    // Wall-clock rate, and the rate per CPU second (what a busy machine
    // leaves of the wall-clock figure is the share of a core it got).
    let best = 0;
    let bestCpu = 0;
    for (let i = 0; i < RUNS; i++) {
      const t0 = process.hrtime.bigint();
      const c0 = process.cpuUsage();
      const r = await verifyJournal(path);
      const c = process.cpuUsage(c0);
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      if (!r.ok) throw new Error(`the benchmark journal does not verify: ${JSON.stringify(r.problem)}`);
      best = Math.max(best, r.entries / s);
      bestCpu = Math.max(bestCpu, r.entries / ((c.user + c.system) / 1e6));
    }
    const rss = Math.round(process.resourceUsage().maxRSS / 1024);
    process.stdout.write(`verify: ${Math.round(best)} entries/s (${ENTRIES} entries, best of ${RUNS}; target >= 100000/s; ${Math.round(bestCpu)} per CPU second); peak RSS ${rss} MiB incl. building\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`bench/verify: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
