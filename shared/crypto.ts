// The few libsodium calls postern makes, named for what they do. Everything
// secret stays in Buffers/Uint8Arrays (never strings) so it can be wiped.
import { hash, randomFillSync } from 'node:crypto';
import type LibsodiumModule = require('libsodium-wrappers-sumo');

export type Sodium = typeof LibsodiumModule;

export const AEAD_KEY_BYTES = 32;
export const AEAD_NONCE_BYTES = 24;
export const AEAD_TAG_BYTES = 16;

let ready: Promise<Sodium> | null = null;
let sodium: Sodium | null = null;

// The wasm build copies every input and output through its own heap and frees
// those copies without clearing them, so keys and plaintexts would linger in a
// heap that JavaScript never wipes. Zero each block the wrapper allocated
// before it goes back to the allocator.
interface WasmModule {
  HEAPU8: Uint8Array;
  _malloc(size: number): number;
  _free(address: number): void;
}

function scrubOnFree(lib: WasmModule): void {
  const sizes = new Map<number, number>();
  const malloc = lib._malloc.bind(lib);
  const free = lib._free.bind(lib);
  lib._malloc = (size: number): number => {
    const address = malloc(size);
    if (address !== 0) sizes.set(address, size);
    return address;
  };
  lib._free = (address: number): void => {
    const size = sizes.get(address);
    if (size !== undefined) {
      // Read HEAPU8 afresh: the view is replaced whenever wasm memory grows.
      lib.HEAPU8.fill(0, address, address + size);
      sizes.delete(address);
    }
    free(address);
  };
}

// Loaded at the first call, not with this module: most CLI commands never
// need it, and loading it costs ≈55 ms of every start. `require` keeps the
// live module object: the wrapper adds its functions to it only once
// `ready` resolves, so a namespace copy would miss them.
export function sodiumReady(): Promise<Sodium> {
  ready ??= (async (): Promise<Sodium> => {
    const libsodium = require('libsodium-wrappers-sumo') as Sodium;
    await libsodium.ready;
    scrubOnFree((libsodium as unknown as { libsodium: WasmModule }).libsodium);
    sodium = libsodium;
    return libsodium;
  })();
  return ready;
}

function lib(): Sodium {
  if (!sodium) throw new Error('libsodium used before `await sodiumReady()`');
  return sodium;
}

// A view on the same memory, so the result can be wiped as a Buffer.
function asBuffer(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

// node:crypto is far faster than the wasm randombytes. Buffer.alloc (not the
// shared pool) so wiping one result never touches another. Small requests
// (nonces, one or two per journal entry) are served from a block filled at
// once, each part handed out once and zeroed in the block as it goes.
const POOL_BYTES = 4096;
const SMALL = 64;
let pool: Buffer | null = null;
let poolAt = POOL_BYTES;

export function randomBytes(n: number): Buffer {
  const b = Buffer.alloc(n);
  if (n > SMALL) {
    randomFillSync(b);
    return b;
  }
  if (!pool) pool = Buffer.alloc(POOL_BYTES);
  if (poolAt + n > POOL_BYTES) {
    randomFillSync(pool);
    poolAt = 0;
  }
  pool.copy(b, 0, poolAt, poolAt + n);
  pool.fill(0, poolAt, poolAt + n);
  poolAt += n;
  return b;
}

export function aeadEncrypt(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, ad: Uint8Array | null): Buffer {
  return asBuffer(lib().crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, ad, null, nonce, key));
}

// null when the ciphertext, the nonce or the associated data was altered, or
// the key is wrong: the caller decides what that means.
export function aeadDecrypt(
  key: Uint8Array,
  nonce: Uint8Array,
  ciphertext: Uint8Array,
  ad: Uint8Array | null,
): Buffer | null {
  const s = lib();
  if (ciphertext.length < AEAD_TAG_BYTES) return null;
  try {
    return asBuffer(s.crypto_aead_xchacha20poly1305_ietf_decrypt(null, ciphertext, ad, nonce, key));
  } catch {
    return null;
  }
}

// A native memset on the bytes; needs no libsodium initialisation.
export function wipe(buf: Uint8Array | null | undefined): void {
  if (buf) buf.fill(0);
}

export interface KeyPair {
  publicKey: Buffer;
  privateKey: Buffer;
}

export function ed25519Keypair(): KeyPair {
  const kp = lib().crypto_sign_keypair();
  return { publicKey: asBuffer(kp.publicKey), privateKey: asBuffer(kp.privateKey) };
}

export function x25519Keypair(): KeyPair {
  const kp = lib().crypto_box_keypair();
  return { publicKey: asBuffer(kp.publicKey), privateKey: asBuffer(kp.privateKey) };
}

export function blake2b(data: Uint8Array, len = 32): Buffer {
  return asBuffer(lib().crypto_generichash(len, data, null));
}

// One-shot: no Hash object per call (about a third of the time of
// createHash().update().digest() for short input).
export function sha256hex(data: Uint8Array | string): string {
  return hash('sha256', data, 'hex');
}

// Ed25519 detached signatures (audit checkpoints). The private key is
// libsodium's 64-byte form (seed || public key).
export function ed25519Sign(message: Uint8Array, privateKey: Uint8Array): Buffer {
  return asBuffer(lib().crypto_sign_detached(message, privateKey));
}

export function ed25519Verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== 64 || publicKey.length !== 32) return false;
  try {
    return lib().crypto_sign_verify_detached(signature, message, publicKey);
  } catch {
    return false;
  }
}

// Anonymous sealing to an X25519 public key (crypto_box_seal): anyone can
// seal, only the private key's holder can open.
export function sealTo(message: Uint8Array, publicKey: Uint8Array): Buffer {
  return asBuffer(lib().crypto_box_seal(message, publicKey));
}

export function openSealed(sealed: Uint8Array, publicKey: Uint8Array, privateKey: Uint8Array): Buffer | null {
  try {
    return asBuffer(lib().crypto_box_seal_open(sealed, publicKey, privateKey));
  } catch {
    return null;
  }
}
