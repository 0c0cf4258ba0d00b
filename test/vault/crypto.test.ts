import t from 'tap';
import {
  aeadDecrypt,
  aeadEncrypt,
  blake2b,
  ed25519Keypair,
  randomBytes,
  sha256hex,
  sodiumReady,
  wipe,
  x25519Keypair,
} from '../../shared/crypto';

t.test('AEAD round trip; any altered input fails authentication (null, no throw)', async (t) => {
  await sodiumReady();
  const key = randomBytes(32);
  const nonce = randomBytes(24);
  const ad = Buffer.from('header');
  const plain = Buffer.from('the secret');
  const ct = aeadEncrypt(key, nonce, plain, ad);
  t.equal(ct.length, plain.length + 16);
  t.same(aeadDecrypt(key, nonce, ct, ad), plain);

  const flipped = Buffer.from(ct);
  flipped[0] = (flipped[0] as number) ^ 1;
  t.equal(aeadDecrypt(key, nonce, flipped, ad), null, 'altered ciphertext');
  t.equal(aeadDecrypt(key, nonce, ct, Buffer.from('headeR')), null, 'altered associated data');
  t.equal(aeadDecrypt(key, randomBytes(24), ct, ad), null, 'other nonce');
  t.equal(aeadDecrypt(randomBytes(32), nonce, ct, ad), null, 'other key');
  t.equal(aeadDecrypt(key, nonce, ct.subarray(0, 10), ad), null, 'shorter than the tag');
});

t.test('no copy of a key or plaintext stays in the libsodium wasm heap', async (t) => {
  const sodium = await sodiumReady();
  const heap = (): Buffer => {
    const u = (sodium as unknown as { libsodium: { HEAPU8: Uint8Array } }).libsodium.HEAPU8;
    return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  };
  const key = randomBytes(32);
  const marker = randomBytes(64);
  const nonce = randomBytes(24);
  const ct2 = aeadEncrypt(key, nonce, marker, null);
  const opened = aeadDecrypt(key, nonce, ct2, null);
  t.same(opened, marker);
  t.equal(heap().indexOf(marker), -1, 'plaintext not left in the heap');
  t.equal(heap().indexOf(key), -1, 'key not left in the heap');
  const kp = ed25519Keypair();
  t.equal(heap().indexOf(kp.privateKey), -1, 'generated private key not left in the heap');
});

t.test('wipe zeroes Buffers and Uint8Arrays and ignores null', async (t) => {
  const b = Buffer.from('abcdef');
  const u = new Uint8Array([1, 2, 3]);
  wipe(b);
  wipe(u);
  wipe(null);
  t.same([...b], [0, 0, 0, 0, 0, 0]);
  t.same([...u], [0, 0, 0]);
});

t.test('key pairs, hashes and random bytes', async (t) => {
  await sodiumReady();
  const ed = ed25519Keypair();
  t.equal(ed.publicKey.length, 32);
  t.equal(ed.privateKey.length, 64);
  t.ok(ed.privateKey.subarray(32).equals(ed.publicKey), 'Ed25519 secret key embeds the public key');
  const x = x25519Keypair();
  t.equal(x.publicKey.length, 32);
  t.equal(x.privateKey.length, 32);
  t.notSame(x25519Keypair().publicKey, x.publicKey);
  // RFC 7693 / libsodium known answers
  t.equal(blake2b(Buffer.alloc(0)).toString('hex'), '0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8');
  t.equal(blake2b(Buffer.from('abc'), 64).toString('hex').slice(0, 16), 'ba80a53f981c4d0d');
  t.equal(sha256hex(Buffer.from('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  const r = randomBytes(32);
  t.equal(r.length, 32);
  t.notSame(randomBytes(32), r);
  t.equal(r.buffer.byteLength, 32, 'not a slice of the shared Buffer pool');
});
