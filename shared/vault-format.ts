// The vault file: a plaintext header (KDF parameters, nonce, generation, the
// approved config) authenticated as associated data, then the
// XChaCha20-Poly1305 ciphertext of a binary container of meta JSON and secret
// blobs. Byte layout: docs/vault-format.md.
import * as fs from 'node:fs';
import { Refusal } from './errors';
import { AEAD_NONCE_BYTES, AEAD_TAG_BYTES, aeadDecrypt, aeadEncrypt, randomBytes, sodiumReady, wipe } from './crypto';
import {
  KDF_ALG_ARGON2ID13,
  KDF_PRESETS,
  KDF_SALT_BYTES,
  KdfLimits,
  KdfPresetName,
  deriveKey,
  kdfLimitProblem,
} from './kdf';
import { writeFileDurable } from './durable-write';

export const VAULT_MAGIC = Buffer.from('POSTERNV', 'latin1');
export const VAULT_VERSION = 1;
export const CONTAINER_MAGIC = Buffer.from('PVB1', 'latin1');

export interface VaultHeader {
  version: number;
  kdfAlg: number;
  opslimit: number;
  memlimit: number;
  salt: Buffer;
  nonce: Buffer;
  generation: number;
  approvedConfig: string;
}

export interface VaultContents {
  meta: unknown;
  blobs: Buffer[];
}

// Fixed part of the header, in file order: [field, offset, size].
const FIELDS = {
  magic: [0, 8],
  version: [8, 1],
  kdfAlg: [9, 1],
  opslimit: [10, 4],
  memlimit: [14, 4],
  salt: [18, KDF_SALT_BYTES],
  nonce: [34, AEAD_NONCE_BYTES],
  generation: [58, 8],
  configLength: [66, 4],
} as const;
export const HEADER_FIXED_BYTES = 70;

const corrupt = (what: string): Refusal =>
  new Refusal('vault_corrupt', `the vault file is damaged or not a postern vault: ${what}; restore it from a backup`);

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

export function parseHeader(file: Buffer): { header: VaultHeader; headerBytes: Buffer; body: Buffer } {
  if (file.length < HEADER_FIXED_BYTES) {
    throw corrupt(`it is ${file.length} bytes, shorter than the ${HEADER_FIXED_BYTES}-byte header`);
  }
  const at = (f: keyof typeof FIELDS): number => FIELDS[f][0];
  if (!file.subarray(0, 8).equals(VAULT_MAGIC)) throw corrupt('it does not start with the POSTERNV magic');
  const version = file.readUInt8(at('version'));
  if (version !== VAULT_VERSION) {
    throw corrupt(
      `format version ${version} is not supported (this postern reads version ${VAULT_VERSION}; a newer postern may read it)`,
    );
  }
  const kdfAlg = file.readUInt8(at('kdfAlg'));
  if (kdfAlg !== KDF_ALG_ARGON2ID13)
    throw corrupt(`kdf algorithm ${kdfAlg} is unknown (expected ${KDF_ALG_ARGON2ID13}, Argon2id v1.3)`);
  const opslimit = file.readUInt32LE(at('opslimit'));
  const memlimit = file.readUInt32LE(at('memlimit'));
  // Checked before anything derives a key, so a tampered header cannot make
  // the daemon spend gigabytes or hours.
  const problem = kdfLimitProblem({ opslimit, memlimit });
  if (problem) throw corrupt(`header ${problem}`);
  const generation = file.readBigUInt64LE(at('generation'));
  if (generation > BigInt(Number.MAX_SAFE_INTEGER)) throw corrupt(`generation ${generation} is out of range`);
  const configLength = file.readUInt32LE(at('configLength'));
  const headerLength = HEADER_FIXED_BYTES + configLength;
  if (headerLength > file.length) {
    throw corrupt(`approved-config length ${configLength} runs past the end of the ${file.length}-byte file`);
  }
  let approvedConfig: string;
  try {
    approvedConfig = strictUtf8.decode(file.subarray(HEADER_FIXED_BYTES, headerLength));
  } catch {
    throw corrupt('the approved config in the header is not valid UTF-8');
  }
  const body = file.subarray(headerLength);
  if (body.length < AEAD_TAG_BYTES)
    throw corrupt(
      `the encrypted body is ${body.length} bytes, shorter than its ${AEAD_TAG_BYTES}-byte tag (truncated)`,
    );
  const slice = (f: 'salt' | 'nonce'): Buffer => Buffer.from(file.subarray(at(f), at(f) + FIELDS[f][1]));
  return {
    header: {
      version,
      kdfAlg,
      opslimit,
      memlimit,
      salt: slice('salt'),
      nonce: slice('nonce'),
      generation: Number(generation),
      approvedConfig,
    },
    headerBytes: file.subarray(0, headerLength),
    body,
  };
}

function encodeHeader(h: VaultHeader): Buffer {
  const problem = kdfLimitProblem(h);
  if (problem) throw new Error(`vault header: ${problem}`);
  if (h.salt.length !== KDF_SALT_BYTES || h.nonce.length !== AEAD_NONCE_BYTES)
    throw new Error('vault header: bad salt or nonce length');
  if (!Number.isSafeInteger(h.generation) || h.generation < 0)
    throw new Error(`vault header: bad generation ${h.generation}`);
  const config = Buffer.from(h.approvedConfig, 'utf8');
  const out = Buffer.alloc(HEADER_FIXED_BYTES + config.length);
  const at = (f: keyof typeof FIELDS): number => FIELDS[f][0];
  VAULT_MAGIC.copy(out, at('magic'));
  out.writeUInt8(VAULT_VERSION, at('version'));
  out.writeUInt8(KDF_ALG_ARGON2ID13, at('kdfAlg'));
  out.writeUInt32LE(h.opslimit, at('opslimit'));
  out.writeUInt32LE(h.memlimit, at('memlimit'));
  h.salt.copy(out, at('salt'));
  h.nonce.copy(out, at('nonce'));
  out.writeBigUInt64LE(BigInt(h.generation), at('generation'));
  out.writeUInt32LE(config.length, at('configLength'));
  config.copy(out, HEADER_FIXED_BYTES);
  return out;
}

// PVB1 | u32 meta length | meta JSON | u32 blob count | (u32 length | bytes)*
function encodeContainer(c: VaultContents): Buffer {
  const meta = Buffer.from(JSON.stringify(c.meta) ?? 'null', 'utf8');
  const size = 4 + 4 + meta.length + 4 + c.blobs.reduce((n, b) => n + 4 + b.length, 0);
  const out = Buffer.alloc(size); // not pooled: it is wiped after encryption
  let o = CONTAINER_MAGIC.copy(out, 0);
  o = out.writeUInt32LE(meta.length, o);
  o += meta.copy(out, o);
  o = out.writeUInt32LE(c.blobs.length, o);
  for (const b of c.blobs) {
    o = out.writeUInt32LE(b.length, o);
    o += b.copy(out, o);
  }
  return out;
}

function decodeContainer(p: Buffer): VaultContents {
  let o = 0;
  const take = (n: number, what: string): Buffer => {
    if (n > p.length - o) throw corrupt(`the decrypted contents end inside ${what}`);
    const part = p.subarray(o, o + n);
    o += n;
    return part;
  };
  const u32 = (what: string): number => take(4, what).readUInt32LE(0);
  if (!take(4, 'the container magic').equals(CONTAINER_MAGIC))
    throw corrupt('the decrypted contents do not start with the PVB1 magic');
  const metaBytes = take(u32('the meta length'), 'the meta JSON');
  let meta: unknown;
  try {
    meta = JSON.parse(strictUtf8.decode(metaBytes));
  } catch {
    throw corrupt('the decrypted meta document is not valid JSON');
  }
  const count = u32('the blob count');
  const blobs: Buffer[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const part = take(u32(`the length of blob ${i}`), `blob ${i}`);
      // A copy of its own, so each blob can be wiped independently.
      const blob = Buffer.alloc(part.length);
      part.copy(blob);
      blobs.push(blob);
    }
    if (o !== p.length) throw corrupt(`${p.length - o} unexpected bytes follow the last blob`);
  } catch (e) {
    blobs.forEach(wipe);
    throw e;
  }
  return { meta, blobs };
}

// Fresh random nonce on every call: the nonce in `header` is replaced.
export function encodeVault(header: VaultHeader, key: Buffer, contents: VaultContents): Buffer {
  return sealVault(header, key, contents).file;
}

function sealVault(header: VaultHeader, key: Buffer, contents: VaultContents): { file: Buffer; header: VaultHeader } {
  const next: VaultHeader = { ...header, nonce: randomBytes(AEAD_NONCE_BYTES) };
  const headerBytes = encodeHeader(next);
  const plain = encodeContainer(contents);
  try {
    const body = aeadEncrypt(key, next.nonce, plain, headerBytes);
    return { file: Buffer.concat([headerBytes, body]), header: next };
  } finally {
    wipe(plain);
  }
}

export function decryptVault(file: Buffer, key: Buffer): { header: VaultHeader; contents: VaultContents } {
  const { header, headerBytes, body } = parseHeader(file);
  const plain = aeadDecrypt(key, header.nonce, body, headerBytes);
  if (!plain) throw new Refusal('wrong_passphrase', 'wrong passphrase (or the vault was modified); try again');
  try {
    return { header, contents: decodeContainer(plain) };
  } finally {
    wipe(plain);
  }
}

export function newVaultHeader(preset: KdfPresetName | KdfLimits, approvedConfig: string): VaultHeader {
  const limits = typeof preset === 'string' ? KDF_PRESETS[preset] : preset;
  const problem = kdfLimitProblem(limits);
  if (problem)
    throw new Refusal(
      'bad_request',
      `the key-derivation limits are not accepted: ${problem}; choose --kdf interactive, moderate or sensitive`,
    );
  return {
    version: VAULT_VERSION,
    kdfAlg: KDF_ALG_ARGON2ID13,
    opslimit: limits.opslimit,
    memlimit: limits.memlimit,
    salt: randomBytes(KDF_SALT_BYTES),
    nonce: randomBytes(AEAD_NONCE_BYTES),
    generation: 1, // the first write; every rewrite adds one
    approvedConfig,
  };
}

export function wipeContents(contents: VaultContents): void {
  contents.blobs.forEach(wipe);
}

const readErrors: Record<string, (p: string) => Refusal> = {
  ENOENT: (p) => new Refusal('not_found', `there is no vault at ${p}; run \`postern init\` to create one`),
  ELOOP: (p) =>
    new Refusal(
      'vault_corrupt',
      `the vault path ${p} is a symbolic link, which postern does not follow; replace it with the vault file itself`,
    ),
  EACCES: (p) =>
    new Refusal(
      'bad_environment',
      `cannot read the vault ${p} (permission denied); run postern as the user who owns it`,
    ),
  EPERM: (p) =>
    new Refusal(
      'bad_environment',
      `cannot read the vault ${p} (operation not permitted); run postern as the user who owns it`,
    ),
  ENOTDIR: (p) =>
    new Refusal('not_found', `a parent of the vault path ${p} is not a directory; check the home and vault settings`),
};

export function readVaultFile(path: string): Buffer {
  let fd: number;
  try {
    // O_NONBLOCK so a FIFO planted at the path cannot hang the open.
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    const known = readErrors[code];
    throw known
      ? known(path)
      : new Refusal('vault_corrupt', `cannot open the vault ${path} (${code || (e as Error).message}); check the file`);
  }
  try {
    if (!fs.fstatSync(fd).isFile()) {
      throw new Refusal(
        'vault_corrupt',
        `the vault path ${path} is not a regular file; move it aside and restore the vault from a backup`,
      );
    }
    return fs.readFileSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export async function createVaultFile(
  path: string,
  passphrase: Buffer,
  preset: KdfPresetName | KdfLimits,
  approvedConfig: string,
  contents: VaultContents,
): Promise<{ key: Buffer; header: VaultHeader }> {
  const exists = (): boolean => {
    try {
      fs.lstatSync(path);
      return true;
    } catch {
      return false;
    }
  };
  if (exists())
    throw new Refusal(
      'conflict',
      `a vault already exists at ${path}; postern will not overwrite it (move it aside first to start over)`,
    );
  await sodiumReady();
  const header = newVaultHeader(preset, approvedConfig);
  const key = await deriveKey(passphrase, header.salt, header.opslimit, header.memlimit);
  try {
    // Checked again: the derivation took seconds, another init may have won.
    if (exists())
      throw new Refusal(
        'conflict',
        `a vault already exists at ${path}; postern will not overwrite it (move it aside first to start over)`,
      );
    const sealed = sealVault(header, key, contents);
    writeFileDurable(path, sealed.file);
    return { key, header: sealed.header };
  } catch (e) {
    wipe(key);
    throw e;
  }
}

export async function openVaultFile(
  path: string,
  passphrase: Buffer,
): Promise<{ key: Buffer; header: VaultHeader; contents: VaultContents }> {
  const file = readVaultFile(path);
  const { header } = parseHeader(file);
  await sodiumReady();
  const key = await deriveKey(passphrase, header.salt, header.opslimit, header.memlimit);
  try {
    return { key, ...decryptVault(file, key) };
  } catch (e) {
    wipe(key);
    throw e;
  }
}

// generation + 1, a new nonce, a durable write. Returns the header now on disk.
export function rewriteVaultFile(path: string, key: Buffer, header: VaultHeader, contents: VaultContents): VaultHeader {
  const sealed = sealVault({ ...header, generation: header.generation + 1 }, key, contents);
  writeFileDurable(path, sealed.file);
  return sealed.header;
}
