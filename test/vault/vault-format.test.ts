import t, { Test } from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Refusal } from '../../shared/errors';
import { aeadEncrypt, randomBytes, sodiumReady } from '../../shared/crypto';
import { KDF_PRESETS } from '../../shared/kdf';
import { driverArgv } from '../helpers/durable-write-driver';
import {
  HEADER_FIXED_BYTES,
  VaultContents,
  createVaultFile,
  decryptVault,
  encodeVault,
  newVaultHeader,
  openVaultFile,
  parseHeader,
  readVaultFile,
  rewriteVaultFile,
  wipeContents,
} from '../../shared/vault-format';

const CONFIG = '{"daemon":{"log_level":"info"},"http":{"timeout":"30s"}}';

function tmpdir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-vault-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function sample(): VaultContents {
  return {
    meta: { credentials: [{ name: 'gh', secret: 0 }], note: 'ünïcode ✓' },
    blobs: [Buffer.from('ghp_secret_token'), randomBytes(64), Buffer.alloc(0)],
  };
}

// Throws and returns the Refusal code, or fails the test.
function refusalCode(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof Refusal) return e.code;
    throw e;
  }
  return 'no refusal';
}

t.before(async () => {
  await sodiumReady();
});

t.test('round trip through the file, with the passphrase', async (t) => {
  const file = path.join(tmpdir(t), 'vault');
  const created = await createVaultFile(file, Buffer.from('a good passphrase'), 'interactive', CONFIG, sample());
  t.equal(created.header.generation, 1);
  t.equal(fs.statSync(file).mode & 0o777, 0o600);
  const opened = await openVaultFile(file, Buffer.from('a good passphrase'));
  t.same(opened.key, created.key);
  t.same(opened.header, created.header);
  t.equal(opened.header.approvedConfig, CONFIG);
  t.same(opened.contents.meta, sample().meta);
  t.equal(opened.contents.blobs.length, 3);
  t.equal((opened.contents.blobs[0] as Buffer).toString(), 'ghp_secret_token');
  t.equal((opened.contents.blobs[2] as Buffer).length, 0);
  const blob0 = opened.contents.blobs[0] as Buffer;
  wipeContents(opened.contents);
  t.ok(
    blob0.every((b) => b === 0),
    'wipeContents zeroes the blobs',
  );

  await t.rejects(openVaultFile(file, Buffer.from('a good passphrasf')), {
    code: 'wrong_passphrase',
    message: 'wrong passphrase (or the vault was modified); try again',
  });
  await t.rejects(createVaultFile(file, Buffer.from('x'), 'interactive', CONFIG, sample()), {
    code: 'conflict',
    message: /already exists/,
  });
});

t.test('rewrite: generation + 1, new nonce, same key; the file decodes to the new state', async (t) => {
  const file = path.join(tmpdir(t), 'vault');
  const { key, header } = await createVaultFile(file, Buffer.from('pw pw pw pw pw'), 'interactive', CONFIG, sample());
  let h = header;
  const nonces = new Set([h.nonce.toString('hex')]);
  for (let i = 2; i <= 5; i++) {
    h = rewriteVaultFile(file, key, h, { meta: { i }, blobs: [Buffer.from(`v${i}`)] });
    t.equal(h.generation, i);
    nonces.add(h.nonce.toString('hex'));
    const back = decryptVault(readVaultFile(file), key);
    t.same(back.header, h);
    t.same(back.contents.meta, { i });
    t.equal((back.contents.blobs[0] as Buffer).toString(), `v${i}`);
  }
  t.equal(nonces.size, 5, 'a fresh nonce for every write');
  t.same(fs.readdirSync(path.dirname(file)), ['vault'], 'no temp file left behind');
  // encodeVault ignores the nonce it was given.
  const a = parseHeader(encodeVault(h, key, sample())).header.nonce;
  t.not(a.toString('hex'), h.nonce.toString('hex'));
});

t.test('truncation at every header length and across the body: refused, never a crash', async (t) => {
  const header = newVaultHeader('interactive', CONFIG);
  const key = randomBytes(32);
  const file = encodeVault(header, key, sample());
  const headerLength = HEADER_FIXED_BYTES + Buffer.byteLength(CONFIG);
  const seen = new Map<string, number>();
  for (let len = 0; len < file.length; len++) {
    const code = refusalCode(() => decryptVault(file.subarray(0, len), key));
    seen.set(code, (seen.get(code) ?? 0) + 1);
    if (len < headerLength + 16) t.equal(code, 'vault_corrupt', `truncated to ${len} bytes`);
    else t.equal(code, 'wrong_passphrase', `truncated to ${len} bytes (fails authentication)`);
  }
  t.comment(`outcomes over ${file.length} lengths: ${JSON.stringify(Object.fromEntries(seen))}`);
  t.same(decryptVault(file, key).contents.meta, sample().meta);
  t.match(
    refusalCode(() => parseHeader(file.subarray(0, 20))),
    'vault_corrupt',
  );
  t.throws(() => parseHeader(file.subarray(0, 20)), { message: /20 bytes, shorter than the 70-byte header/ });
});

t.test('every header byte is authenticated: flipping any one is refused', async (t) => {
  const key = randomBytes(32);
  const file = encodeVault(newVaultHeader('interactive', CONFIG), key, sample());
  const headerLength = HEADER_FIXED_BYTES + Buffer.byteLength(CONFIG);
  // Magic, version and algorithm are checked by parseHeader; the limits, the
  // top bytes of the generation (beyond 2^53), the config length and the
  // config's UTF-8 may or may not be; salt, nonce and the rest of the
  // generation parse fine, so only the AD catches them.
  const structural = (i: number): 'corrupt' | 'either' | 'auth' =>
    i < 10 ? 'corrupt' : i < 18 || i >= 64 ? 'either' : 'auth';
  for (let i = 0; i < headerLength; i++) {
    for (const mask of [0x01, 0x80]) {
      const bad = Buffer.from(file);
      bad[i] = (bad[i] as number) ^ mask;
      const code = refusalCode(() => decryptVault(bad, key));
      const kind = structural(i);
      if (kind === 'corrupt') t.equal(code, 'vault_corrupt', `byte ${i} ^ ${mask}`);
      else if (kind === 'auth')
        t.equal(code, 'wrong_passphrase', `byte ${i} ^ ${mask} (salt, nonce, generation: caught by the AD)`);
      else t.ok(['vault_corrupt', 'wrong_passphrase'].includes(code), `byte ${i} ^ ${mask}: ${code}`);
    }
  }
  // Bytes of the approved config keep the header parseable: only the AD catches them.
  const bad = Buffer.from(file);
  bad[HEADER_FIXED_BYTES + 2] = 'X'.charCodeAt(0);
  t.equal(parseHeader(bad).header.approvedConfig.slice(0, 3), '{"X');
  t.equal(
    refusalCode(() => decryptVault(bad, key)),
    'wrong_passphrase',
  );
});

t.test('header fields refused before any derivation, naming field and value', async (t) => {
  const dir = tmpdir(t);
  const key = randomBytes(32);
  const good = encodeVault(newVaultHeader('interactive', CONFIG), key, sample());
  const cases: Array<[string, (b: Buffer) => void, RegExp]> = [
    ['magic', (b) => b.write('POSTERNX', 0, 'latin1'), /does not start with the POSTERNV magic/],
    ['version', (b) => b.writeUInt8(2, 8), /format version 2 is not supported/],
    ['kdf algorithm', (b) => b.writeUInt8(1, 9), /kdf algorithm 1 is unknown/],
    [
      'opslimit huge',
      (b) => b.writeUInt32LE(1_000_000_000, 10),
      /opslimit 1000000000 is outside the accepted range 2\.\.4/,
    ],
    ['opslimit weak', (b) => b.writeUInt32LE(1, 10), /opslimit 1 is outside/],
    [
      'memlimit 4 GiB - 1',
      (b) => b.writeUInt32LE(0xffffffff, 14),
      /memlimit 4294967295 is outside the accepted range 67108864\.\.1073741824/,
    ],
    ['memlimit weak', (b) => b.writeUInt32LE(8192, 14), /memlimit 8192 is outside/],
    ['generation', (b) => b.writeBigUInt64LE(2n ** 60n, 58), /generation 1152921504606846976 is out of range/],
    ['config length', (b) => b.writeUInt32LE(1_000_000, 66), /approved-config length 1000000 runs past the end/],
    ['config utf-8', (b) => b.writeUInt8(0xff, 70), /not valid UTF-8/],
  ];
  for (const [name, damage, message] of cases) {
    const bad = Buffer.from(good);
    damage(bad);
    t.throws(() => parseHeader(bad), { code: 'vault_corrupt', message }, name);
    const file = path.join(dir, name.replace(/\W+/g, '-'));
    fs.writeFileSync(file, bad);
    const start = process.hrtime.bigint();
    await t.rejects(
      openVaultFile(file, Buffer.from('any')),
      { code: 'vault_corrupt', message },
      `${name}: openVaultFile`,
    );
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    t.ok(ms < 100, `${name}: refused in ${ms.toFixed(1)} ms, without deriving`);
  }
});

t.test('a container that authenticates but does not parse is vault_corrupt', async (t) => {
  const key = randomBytes(32);
  const sealWith = (plain: Buffer): Buffer => {
    // A genuine header for the body, as a writer with the key would produce.
    const { headerBytes, header } = parseHeader(encodeVault(newVaultHeader('interactive', CONFIG), key, sample()));
    return Buffer.concat([headerBytes, aeadEncrypt(key, header.nonce, plain, headerBytes)]);
  };
  const u32 = (n: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    return b;
  };
  const meta = Buffer.from('{}');
  const cases: Array<[string, Buffer, RegExp]> = [
    ['empty', Buffer.alloc(0), /end inside the container magic/],
    ['magic', Buffer.from('PVB2'), /do not start with the PVB1 magic/],
    ['meta length', Buffer.concat([Buffer.from('PVB1'), u32(99), meta]), /end inside the meta JSON/],
    [
      'meta json',
      Buffer.concat([Buffer.from('PVB1'), u32(2), Buffer.from('{x'), u32(0)]),
      /meta document is not valid JSON/,
    ],
    [
      'blob count',
      Buffer.concat([Buffer.from('PVB1'), u32(2), meta, u32(3), u32(1), Buffer.from('a')]),
      /end inside the length of blob 1/,
    ],
    [
      'blob length',
      Buffer.concat([Buffer.from('PVB1'), u32(2), meta, u32(1), u32(10), Buffer.from('abc')]),
      /end inside blob 0/,
    ],
    [
      'trailing',
      Buffer.concat([Buffer.from('PVB1'), u32(2), meta, u32(0), Buffer.from('zz')]),
      /2 unexpected bytes follow the last blob/,
    ],
  ];
  for (const [name, plain, message] of cases) {
    t.throws(() => decryptVault(sealWith(plain), key), { code: 'vault_corrupt', message }, name);
  }
  const ok = decryptVault(sealWith(Buffer.concat([Buffer.from('PVB1'), u32(2), meta, u32(0)])), key);
  t.same(ok.contents, { meta: {}, blobs: [] });
});

t.test('newVaultHeader: presets, explicit limits, random salt', async (t) => {
  const a = newVaultHeader('moderate', CONFIG);
  const b = newVaultHeader(KDF_PRESETS.moderate, CONFIG);
  t.match(a, {
    version: 1,
    kdfAlg: 2,
    opslimit: 3,
    memlimit: 256 * 1024 * 1024,
    generation: 1,
    approvedConfig: CONFIG,
  });
  t.equal(a.salt.length, 16);
  t.not(a.salt.toString('hex'), b.salt.toString('hex'));
  t.throws(() => newVaultHeader({ opslimit: 1, memlimit: 1 << 20 }, CONFIG), {
    code: 'bad_request',
    message: /opslimit 1 is outside/,
  });
});

t.test('readVaultFile: missing, symlink, directory, fifo, unreadable', async (t) => {
  const dir = tmpdir(t);
  const real = path.join(dir, 'real');
  fs.writeFileSync(real, 'x');
  t.same(readVaultFile(real), Buffer.from('x'));
  t.throws(() => readVaultFile(path.join(dir, 'none')), { code: 'not_found', message: /run `postern init`/ });
  t.throws(() => readVaultFile(path.join(real, 'sub')), { code: 'not_found', message: /not a directory/ });
  fs.symlinkSync(real, path.join(dir, 'link'));
  t.throws(() => readVaultFile(path.join(dir, 'link')), { code: 'vault_corrupt', message: /symbolic link/ });
  fs.mkdirSync(path.join(dir, 'adir'));
  t.throws(() => readVaultFile(path.join(dir, 'adir')), { code: 'vault_corrupt', message: /not a regular file/ });
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  t.throws(
    () => readVaultFile(path.join(dir, 'fifo')),
    { code: 'vault_corrupt', message: /not a regular file/ },
    'a FIFO neither hangs nor is read',
  );
  // Permission checks mean nothing as root: read as nobody, through the driver.
  fs.chmodSync(dir, 0o755);
  const secret = path.join(dir, 'secret');
  fs.writeFileSync(secret, 'x', { mode: 0o600 });
  const asNobody = (target: string): unknown =>
    JSON.parse(
      execFileSync('setpriv', [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        ...driverArgv('read', target),
      ]).toString(),
    );
  t.match(asNobody(secret), {
    code: 'bad_environment',
    message: /cannot read the vault .*secret \(permission denied\); run postern as the user who owns it/,
  });
  fs.chmodSync(secret, 0o644);
  t.same(asNobody(secret), { bytes: 1 }, 'the same file, once readable, is read');
});
