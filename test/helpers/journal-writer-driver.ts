// A child process that writes the audit journal through the daemon's writer,
// for tests that watch it from outside (strace) or kill it mid-write (kill -9).
// Tap's TypeScript loader reaches a test process as `--import` flags
// (process.execArgv), not through NODE_OPTIONS, and costs seconds per start
// on a loaded machine; so `driverArgv` runs a plain-JS copy that
// `compiledDriver()` transpiles once per test process, through
// `env -u NODE_OPTIONS` (tap re-adds its process-info hook there).
//
//   create <path> <signPubB64> <boxPubB64>     createJournal; prints the head as JSON
//   burst <path> <segmentSize> <count> [signSecretHex]
//        open, <count> concurrent appends, close; prints stats as JSON
//   run <path> <segmentSize> <workers> <signSecretHex|->
//        open, set the key, then <workers> appenders forever (a vault entry
//        now and then). Prints "ready" once open, then one line per
//        acknowledged entry: "ack <seq> <hash>" (or "vault <seq> <hash>
//        <generation> <vault_hash>"), each written only after the append resolved.
//
// Test side: helpers that read a journal back independently of the writer
// (`readJournal`), and the command line that runs this file (`driverArgv`).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import { Journal, createJournal } from '../../daemon/audit/journal';
import {
  Entry,
  EventEntry,
  GENESIS_PREV,
  checkpointMessage,
  decodeEntry,
  decryptEvent,
  entryHash,
  segmentPath,
  sodiumReady,
} from '../../shared/audit-format';
import { VerifyOptions, verifyJournal } from '../../shared/audit-verify';
import { KeyPair, ed25519Keypair, ed25519Verify, openSealed, x25519Keypair } from '../../shared/crypto';

// The repository, looked up on the test side only: the child runs from a
// temp dir, where no package.json lies above it.
const repo = (): string => (require('./repo-root') as typeof import('./repo-root')).ROOT;
let compiled: string | null = null;

// This file and every repo module it reaches, transpiled to CommonJS under a
// temp dir (same relative layout); returns the driver's .js path.
export function compiledDriver(): string {
  if (compiled) return compiled;
  const ts = require('typescript') as typeof import('typescript');
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-journal-driver-'));
  process.once('exit', () => fs.rmSync(out, { recursive: true, force: true }));
  const source = path.join(repo(), 'test', 'helpers', 'journal-writer-driver.ts');
  const todo = [source];
  const done = new Set<string>();
  for (let src = todo.pop(); src !== undefined; src = todo.pop()) {
    if (done.has(src)) continue;
    done.add(src);
    const text = fs.readFileSync(src, 'utf8');
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (fileName.startsWith('.')) todo.push(`${path.resolve(path.dirname(src), fileName)}.ts`);
    }
    const { outputText } = ts.transpileModule(text, {
      fileName: src,
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
    });
    const dest = path.join(out, path.relative(repo(), src)).replace(/\.ts$/, '.js');
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, outputText);
  }
  compiled = path.join(out, path.relative(repo(), source)).replace(/\.ts$/, '.js');
  return compiled;
}

// The command line that runs the driver; NODE_PATH finds node_modules from the temp dir.
export function driverArgv(...args: string[]): string[] {
  return [
    '/usr/bin/env',
    '-u',
    'NODE_OPTIONS',
    `NODE_PATH=${path.join(repo(), 'node_modules')}`,
    process.execPath,
    compiledDriver(),
    ...args,
  ];
}

export interface AuditKeys {
  sign: KeyPair;
  box: KeyPair;
}

// Requires sodiumReady().
export function auditKeys(): AuditKeys {
  return { sign: ed25519Keypair(), box: x25519Keypair() };
}

// A new journal at `<dir>/journal` for these keys; returns its path.
export async function newJournal(dir: string, keys: AuditKeys): Promise<string> {
  const file = path.join(dir, 'journal');
  await createJournal(file, {
    signPublic: keys.sign.publicKey.toString('base64'),
    boxPublic: keys.box.publicKey.toString('base64'),
  });
  return file;
}

// The offline verifier's verdict, short: `problem` is "kind: message".
export async function verify(file: string, opts: VerifyOptions): Promise<{ ok: boolean; problem: string | null }> {
  const r = await verifyJournal(file, opts);
  return { ok: r.ok, problem: r.problem && `${r.problem.kind}: ${r.problem.message}` };
}

export interface ReadEntry {
  entry: Entry;
  hash: string;
  segment: number;
  offset: number;
  end: number; // offset after its "\n"
}

export interface ReadJournal {
  entries: ReadEntry[];
  segments: number;
  // Everything that breaks the format's rules, in order; empty when it all holds.
  problems: string[];
  // The bytes after the last "\n" of the last segment.
  tail: number;
}

// An independent reading of a whole journal: every segment, every line
// decoded, the chain, segment headers and checkpoint signatures checked.
export function readJournal(journal: string): ReadJournal {
  const out: ReadJournal = { entries: [], segments: 0, problems: [], tail: 0 };
  let prev: ReadEntry | null = null;
  let signPub: Buffer | null = null;
  let journalId = '';
  for (let n = 0; fs.existsSync(segmentPath(journal, n)); n++) {
    out.segments = n + 1;
    const data = fs.readFileSync(segmentPath(journal, n));
    let at = 0;
    let first = true;
    for (let nl = data.indexOf(10, at); nl !== -1; nl = data.indexOf(10, at)) {
      const line = data.subarray(at, nl);
      const d = decodeEntry(line);
      if (!d.ok) {
        out.problems.push(`segment ${n} offset ${at}: ${d.why}`);
        return out;
      }
      const e = d.entry;
      const r: ReadEntry = { entry: e, hash: entryHash(line), segment: n, offset: at, end: nl + 1 };
      const expectSeq = prev ? prev.entry.seq + 1 : 1;
      const expectPrev = prev ? prev.hash : GENESIS_PREV;
      if (e.seq !== expectSeq || e.prev !== expectPrev)
        out.problems.push(`seq ${e.seq}: does not chain (expected seq ${expectSeq})`);
      if (first && n === 0 && e.type !== 'genesis') out.problems.push('segment 0 does not start with genesis');
      if (first && n > 0 && (e.type !== 'segment' || e.segment !== n))
        out.problems.push(`segment ${n} does not start with its segment entry`);
      if (!first && (e.type === 'genesis' || e.type === 'segment'))
        out.problems.push(`seq ${e.seq}: ${e.type} inside a segment`);
      if (e.type === 'genesis') {
        signPub = Buffer.from(e.sign_pub, 'base64');
        journalId = e.journal_id;
      }
      if (e.type === 'checkpoint') {
        if (!prev || e.head_seq !== prev.entry.seq || e.head !== prev.hash)
          out.problems.push(`seq ${e.seq}: checkpoint of the wrong head`);
        const ok =
          signPub !== null &&
          e.sign_pub === signPub.toString('base64') &&
          ed25519Verify(Buffer.from(e.sig, 'base64'), checkpointMessage(journalId, e.head_seq, e.head), signPub);
        if (!ok) out.problems.push(`seq ${e.seq}: bad checkpoint signature`);
      }
      out.entries.push(r);
      prev = r;
      first = false;
      at = nl + 1;
    }
    out.tail = data.length - at;
  }
  if (out.tail !== 0) out.problems.push(`torn tail of ${out.tail} bytes`);
  return out;
}

// Decrypts every event with the audit box key pair: key entries are opened
// with it, events with the key they name. Throws on anything that fails.
export function decryptAll(
  entries: ReadEntry[],
  boxPublic: Buffer,
  boxSecret: Buffer,
): Map<number, Record<string, unknown>> {
  const keys = new Map<number, Buffer>();
  const out = new Map<number, Record<string, unknown>>();
  for (const { entry: e } of entries) {
    if (e.type === 'key') {
      const k = openSealed(Buffer.from(e.sealed, 'base64'), boxPublic, boxSecret);
      if (!k) throw new Error(`key entry ${e.seq} does not open`);
      keys.set(e.seq, k);
    } else if (e.type === 'event') {
      const k = keys.get(e.key_id);
      if (!k) throw new Error(`event ${e.seq} names unknown key ${e.key_id}`);
      const p = decryptEvent(k, e as EventEntry);
      if (!p) throw new Error(`event ${e.seq} does not decrypt`);
      out.set(e.seq, p);
    }
  }
  return out;
}

// ---- child side ----

async function burst(file: string, segmentSize: number, count: number, signHex?: string): Promise<void> {
  const j = await Journal.open({ path: file, segmentSize });
  if (signHex) await j.setSigningKey(Buffer.from(signHex, 'hex'));
  const before = j.stats();
  await Promise.all(Array.from({ length: count }, (_, i) => j.append({ kind: 'burst', i })));
  const after = j.stats();
  await j.close();
  process.stdout.write(`${JSON.stringify({ before, after })}\n`);
}

async function run(file: string, segmentSize: number, workers: number, signHex: string): Promise<void> {
  const j = await Journal.open({ path: file, segmentSize });
  if (signHex !== '-') await j.setSigningKey(Buffer.from(signHex, 'hex'));
  const say = (line: string): void => {
    // Synchronous on a pipe: an ack is out before the next append is made.
    fs.writeSync(1, `${line}\n`);
  };
  say('ready');
  let generation = j.latestVault()?.generation ?? 0;
  const worker = async (w: number): Promise<never> => {
    for (let i = 0; ; i++) {
      if (w === 0 && i % 40 === 39) {
        generation += 1;
        const vaultHash = randomBytes(32).toString('hex');
        const h = await j.appendVault(generation, vaultHash);
        say(`vault ${h.seq} ${h.hash} ${generation} ${vaultHash}`);
        continue;
      }
      // Sizes from tiny to several KiB, so writes often span pages.
      const pad = 'x'.repeat(Math.floor(Math.random() ** 3 * 4000));
      const h = await j.append({ kind: 'driver', w, i, pad });
      say(`ack ${h.seq} ${h.hash}`);
    }
  };
  await Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
}

async function main(argv: string[]): Promise<void> {
  await sodiumReady();
  const [mode, file, a, b, c] = argv;
  if (mode === 'create' && file && a && b) {
    process.stdout.write(`${JSON.stringify(await createJournal(file, { signPublic: a, boxPublic: b }))}\n`);
  } else if (mode === 'burst' && file && a && b) {
    await burst(file, Number(a), Number(b), c);
  } else if (mode === 'run' && file && a && b && c) {
    await run(file, Number(a), Number(b), c);
  } else {
    process.stderr.write('usage: journal-writer-driver create|burst|run ... (see the file header)\n');
    process.exit(2);
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(`driver: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}\n`);
    process.exit(1);
  });
}

// A temporary directory for one test, removed when it ends.
export function scratchDir(t: Test, prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}
