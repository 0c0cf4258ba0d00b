// Passphrase → 32-byte key with Argon2id (libsodium crypto_pwhash). Each
// derivation runs in a short-lived worker thread: the wasm heap grows to the
// memlimit and never shrinks, so it must belong to a thread that then exits.
import { Worker } from 'node:worker_threads';
import { sodiumReady } from './crypto';

export interface KdfLimits {
  opslimit: number;
  memlimit: number;
}

export type KdfPresetName = 'interactive' | 'moderate' | 'sensitive';

const MiB = 1024 * 1024;

// libsodium's crypto_pwhash_{OPS,MEM}LIMIT_{INTERACTIVE,MODERATE,SENSITIVE}
// for Argon2id, written out so they are known without initialising libsodium
// (test/vault/kdf.test.ts checks them against the library).
export const KDF_PRESETS: Readonly<Record<KdfPresetName, Readonly<KdfLimits>>> = Object.freeze({
  interactive: Object.freeze({ opslimit: 2, memlimit: 64 * MiB }),
  moderate: Object.freeze({ opslimit: 3, memlimit: 256 * MiB }),
  sensitive: Object.freeze({ opslimit: 4, memlimit: 1024 * MiB }),
});

// Limits accepted from a vault header. The maximum is the sensitive preset
// (so a tampered header cannot demand an enormous cost), the minimum the
// interactive one (so it cannot downgrade the vault's protection either).
export const KDF_CAPS: Readonly<{ min: Readonly<KdfLimits>; max: Readonly<KdfLimits> }> = Object.freeze({
  min: KDF_PRESETS.interactive,
  max: KDF_PRESETS.sensitive,
});

export const KDF_ALG_ARGON2ID13 = 2; // crypto_pwhash_ALG_ARGON2ID13
export const KDF_SALT_BYTES = 16; // crypto_pwhash_SALTBYTES
export const KDF_KEY_BYTES = 32;

export function isKdfPresetName(name: unknown): name is KdfPresetName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(KDF_PRESETS, name);
}

// The first limit outside the caps, described for a message; null when fine.
export function kdfLimitProblem(limits: KdfLimits): string | null {
  const checks: Array<[keyof KdfLimits, string]> = [
    ['opslimit', 'passes'],
    ['memlimit', 'bytes'],
  ];
  for (const [field, unit] of checks) {
    const v = limits[field];
    if (!Number.isSafeInteger(v) || v < KDF_CAPS.min[field] || v > KDF_CAPS.max[field]) {
      return `${field} ${v} is outside the accepted range ${KDF_CAPS.min[field]}..${KDF_CAPS.max[field]} ${unit}`;
    }
  }
  return null;
}

// Plain JavaScript so the same source runs under tap (TypeScript) and from
// dist/. It loads libsodium from an absolute path, then waits for one job:
// it wipes its passphrase copy and hands the key back by transferring a
// fresh ArrayBuffer, then exits.
const WORKER_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const sodium = require(workerData.sodiumPath);
parentPort.once('message', (job) => {
  const passphrase = new Uint8Array(job.passphrase);
  sodium.ready.then(() => {
    let derived;
    try {
      derived = sodium.crypto_pwhash(job.keyBytes, passphrase, new Uint8Array(job.salt),
        job.opslimit, job.memlimit, job.alg);
    } finally {
      passphrase.fill(0);
    }
    const out = new ArrayBuffer(derived.length);
    new Uint8Array(out).set(derived);
    derived.fill(0);
    parentPort.postMessage(out, [out]);
    parentPort.close();
  });
});
`;

interface WorkerJob extends KdfLimits {
  passphrase: Buffer;
  salt: Buffer;
  sodiumPath: string;
}

// One worker may be started ahead of need (prewarmKdf), so that loading
// libsodium (~0.2 s) is not part of the next unlock. It holds no secret and
// only a small heap until it receives a job.
let warm: { worker: Worker; sodiumPath: string } | null = null;

function startWorker(sodiumPath: string): Worker {
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { sodiumPath } });
  worker.unref();
  return worker;
}

export function prewarmKdf(): void {
  if (warm) return;
  const sodiumPath = require.resolve('libsodium-wrappers-sumo');
  const worker = startWorker(sodiumPath);
  const entry = { worker, sodiumPath };
  // A warm worker that dies (it should not) is simply forgotten.
  worker.once('error', () => undefined);
  worker.once('exit', () => {
    if (warm === entry) warm = null;
  });
  warm = entry;
}

function takeWorker(sodiumPath: string): Worker {
  if (warm && warm.sodiumPath === sodiumPath) {
    const w = warm.worker;
    warm = null;
    w.removeAllListeners('exit');
    w.removeAllListeners('error');
    return w;
  }
  return startWorker(sodiumPath);
}

// Exported for tests, which point `sodiumPath` at something broken to check
// that a dying worker surfaces as a clear rejection.
export function deriveInWorker(job: WorkerJob): Promise<Buffer> {
  // The worker gets its own copy of the passphrase, transferred (not cloned)
  // so no second copy stays behind in this thread; it wipes it after use.
  const pass = new ArrayBuffer(job.passphrase.length);
  new Uint8Array(pass).set(job.passphrase);
  const salt = new Uint8Array(job.salt).buffer;
  return new Promise<Buffer>((resolve, reject) => {
    let settled = false;
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      reject(new Error(`key derivation failed: ${why}`));
    };
    let worker: Worker;
    try {
      worker = takeWorker(job.sodiumPath);
      worker.ref();
      worker.postMessage(
        {
          passphrase: pass,
          salt,
          opslimit: job.opslimit,
          memlimit: job.memlimit,
          alg: KDF_ALG_ARGON2ID13,
          keyBytes: KDF_KEY_BYTES,
        },
        [pass],
      );
    } catch (e) {
      new Uint8Array(pass).fill(0);
      fail((e as Error).message);
      return;
    }
    // Settle only once the worker has exited, so its heap is gone by then.
    let key: Buffer | null = null;
    worker.once('message', (out: ArrayBuffer) => {
      key = Buffer.from(out);
    });
    worker.once('error', (e: Error) => fail(`the derivation worker crashed (${e.message})`));
    worker.once('exit', (code) => {
      if (key && !settled) {
        settled = true;
        resolve(key);
        return;
      }
      if (key) key.fill(0);
      fail(`the derivation worker exited (code ${code}) without a key`);
    });
  });
}

export async function deriveKey(passphrase: Buffer, salt: Buffer, opslimit: number, memlimit: number): Promise<Buffer> {
  const problem = kdfLimitProblem({ opslimit, memlimit });
  if (problem) throw new Error(`refusing key derivation: ${problem}`);
  if (salt.length !== KDF_SALT_BYTES)
    throw new Error(`refusing key derivation: salt is ${salt.length} bytes, expected ${KDF_SALT_BYTES}`);
  // This thread needs libsodium right after a derivation (to decrypt), so
  // make sure it is initialised by then; it costs nothing once done.
  const [key] = await Promise.all([
    deriveInWorker({ passphrase, salt, opslimit, memlimit, sodiumPath: require.resolve('libsodium-wrappers-sumo') }),
    sodiumReady(),
  ]);
  return key;
}
