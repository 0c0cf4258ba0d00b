import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { sodiumReady } from '../../shared/crypto';
import { KDF_CAPS, KDF_PRESETS, deriveInWorker, deriveKey, isKdfPresetName, kdfLimitProblem } from '../../shared/kdf';

const MiB = 1024 * 1024;
const salt = Buffer.from([...Array(16).keys()]);

// First, while nothing else has grown this process.
t.test('MODERATE derivation: time, and the 256 MiB is returned afterwards', async (t) => {
  const rss = (): number => Math.round(process.memoryUsage.rss() / MiB);
  const before = rss();
  const start = Date.now();
  const key = await deriveKey(
    Buffer.from('a moderately long passphrase'),
    salt,
    KDF_PRESETS.moderate.opslimit,
    KDF_PRESETS.moderate.memlimit,
  );
  const ms = Date.now() - start;
  const after = rss();
  t.equal(key.length, 32);
  t.comment(`MODERATE (3 passes, 256 MiB) in a worker: ${ms} ms; RSS ${before} MiB before, ${after} MiB after`);
  // Were the wasm heap still resident, RSS would have grown by >= 256 MiB.
  t.ok(after - before < 64, `RSS grew by ${after - before} MiB (< 64 MiB)`);
});

t.test("presets are libsodium's Argon2id constants", async (t) => {
  const s = await sodiumReady();
  t.same(KDF_PRESETS.interactive, {
    opslimit: s.crypto_pwhash_OPSLIMIT_INTERACTIVE,
    memlimit: s.crypto_pwhash_MEMLIMIT_INTERACTIVE,
  });
  t.same(KDF_PRESETS.moderate, {
    opslimit: s.crypto_pwhash_OPSLIMIT_MODERATE,
    memlimit: s.crypto_pwhash_MEMLIMIT_MODERATE,
  });
  t.same(KDF_PRESETS.sensitive, {
    opslimit: s.crypto_pwhash_OPSLIMIT_SENSITIVE,
    memlimit: s.crypto_pwhash_MEMLIMIT_SENSITIVE,
  });
  t.same(KDF_CAPS, { min: KDF_PRESETS.interactive, max: KDF_PRESETS.sensitive });
  t.ok(isKdfPresetName('moderate'));
  t.notOk(isKdfPresetName('toString'));
});

t.test('the worker derives exactly what crypto_pwhash derives in-process', async (t) => {
  const s = await sodiumReady();
  const pass = Buffer.from('correct horse battery staple');
  const { opslimit, memlimit } = KDF_PRESETS.interactive;
  const key = await deriveKey(pass, salt, opslimit, memlimit);
  const direct = s.crypto_pwhash(32, pass, salt, opslimit, memlimit, s.crypto_pwhash_ALG_ARGON2ID13);
  t.equal(key.toString('hex'), Buffer.from(direct).toString('hex'));
  // Cross-checked once with Python's cryptography Argon2id (t=2, m=65536 KiB, p=1).
  t.equal(key.toString('hex'), 'c05ce4c4dd7e0e45ee6011cc59d068ade47df1b01fc0cf9cd4678bdf68a5b7b0');
  t.equal(pass.toString(), 'correct horse battery staple', "the caller's passphrase is left to the caller");
  const other = await deriveKey(Buffer.from('correct horse battery stapl3'), salt, opslimit, memlimit);
  t.not(other.toString('hex'), key.toString('hex'));
});

t.test('limits outside [interactive, sensitive] are refused before any work', async (t) => {
  const cases: Array<[number, number, RegExp]> = [
    [1, 64 * MiB, /opslimit 1 is outside/],
    [5, 64 * MiB, /opslimit 5 is outside/],
    [1_000_000_000, 64 * MiB, /opslimit 1000000000 is outside/],
    [2, 32 * MiB, /memlimit 33554432 is outside/],
    [2, 0xffffffff, /memlimit 4294967295 is outside/],
    [2.5, 64 * MiB, /opslimit 2.5 is outside/],
  ];
  for (const [ops, mem, msg] of cases) {
    const start = process.hrtime.bigint();
    await t.rejects(deriveKey(Buffer.from('x'), salt, ops, mem), msg);
    t.ok(process.hrtime.bigint() - start < 100_000_000n, 'refused within 100 ms');
    t.match(kdfLimitProblem({ opslimit: ops, memlimit: mem }), msg);
  }
  t.equal(kdfLimitProblem(KDF_PRESETS.sensitive), null);
  await t.rejects(deriveKey(Buffer.from('x'), Buffer.alloc(8), 2, 64 * MiB), /salt is 8 bytes/);
});

t.test('a worker that dies surfaces as a clear rejection', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-kdf-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const job = { passphrase: Buffer.from('pw'), salt, ...KDF_PRESETS.interactive };
  await t.rejects(
    deriveInWorker({ ...job, sodiumPath: path.join(dir, 'missing.js') }),
    /key derivation failed: the derivation worker crashed \(Cannot find module/,
  );
  const exits = path.join(dir, 'exits.js');
  fs.writeFileSync(exits, 'process.exit(3);\n');
  await t.rejects(
    deriveInWorker({ ...job, sodiumPath: exits }),
    /key derivation failed: the derivation worker exited \(code 3\) without a key/,
  );
  const throws = path.join(dir, 'throws.js');
  fs.writeFileSync(
    throws,
    'module.exports = { ready: Promise.resolve(), crypto_pwhash() { throw new Error("out of memory"); } };\n',
  );
  await t.rejects(deriveInWorker({ ...job, sodiumPath: throws }), /crashed \(out of memory\)/);
});
