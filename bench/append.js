#!/usr/bin/env node
// Durable audit appends: 64 concurrent writers for about 3 s on a journal in
// a temp dir (signing key set, so checkpoints are included; default segment
// size). Each append resolves only after its batch's fdatasync.
// Run after `npx tsc -p tsconfig.json`: node bench/append.js [seconds]
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Journal, createJournal } = require('../dist/daemon/audit/journal');
const { ed25519Keypair, sodiumReady, x25519Keypair } = require('../dist/shared/crypto');

const WRITERS = 64;
const SECONDS = Number(process.argv[2] ?? 3);
const SEGMENT = 64 * 1024 * 1024;

async function main() {
  await sodiumReady();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-bench-append-'));
  try {
    const sign = ed25519Keypair();
    const box = x25519Keypair();
    const file = path.join(dir, 'audit.log');
    await createJournal(file, { signPublic: sign.publicKey.toString('base64'), boxPublic: box.publicKey.toString('base64') });
    const journal = await Journal.open({ path: file, segmentSize: SEGMENT });
    await journal.setSigningKey(sign.privateKey);

    const before = journal.stats();
    const deadline = Date.now() + SECONDS * 1000;
    const started = process.hrtime.bigint();
    let appended = 0;
    // A payload shaped like a request event: names, codes, sizes, a hash.
    const writer = async (w) => {
      for (let i = 0; Date.now() < deadline; i++) {
        await journal.append({ kind: 'http.outcome', credential: `cred-${w}`, method: 'GET', host: 'api.example.com', status: 200, bytes: 1234 + i, request_id: `${w}-${i}`, body_sha256: 'ab'.repeat(32) });
        appended += 1;
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const after = journal.stats();
    await journal.close();

    const batches = after.batches - before.batches;
    const lines = after.entries - before.entries;
    console.log(`append: ${Math.round(appended / seconds)} entries/s (${WRITERS} writers)`);
    console.log(`batches: ${batches} fdatasyncs, mean batch ${(lines / batches).toFixed(1)} lines (${appended} events, ${lines - appended} checkpoints) in ${seconds.toFixed(2)} s; journal ${(fs.statSync(file).size / 1048576).toFixed(1)} MiB`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
