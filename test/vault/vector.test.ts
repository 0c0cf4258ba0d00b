// The test vector in docs/vault-format.md, read from the doc itself: decrypted
// with raw libsodium calls following only the doc, and through the module.
import t from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sodiumReady } from '../../shared/crypto';
import { decryptVault, parseHeader } from '../../shared/vault-format';
import { deriveKey } from '../../shared/kdf';
import { ROOT } from '../helpers/repo-root';

function readVector(): Record<string, string> {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'vault-format.md'), 'utf8');
  const block = /```test-vector\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error('no ```test-vector block in docs/vault-format.md');
  const fields: Record<string, string> = {};
  let current = '';
  for (const line of block.split('\n')) {
    const m = /^(\w+):\s*(.*)$/.exec(line);
    if (m) {
      current = m[1] as string;
      fields[current] = m[2] as string;
    } else if (line.trim()) {
      fields[current] += line.trim();
    }
  }
  return fields;
}

const v = readVector();
const hex = (name: string): Buffer => Buffer.from(v[name] as string, 'hex');

t.test('raw libsodium, following only the doc', async (t) => {
  const s = await sodiumReady();
  const file = hex('file');
  t.equal(file.subarray(0, 8).toString('latin1'), 'POSTERNV');
  const opslimit = file.readUInt32LE(10);
  const memlimit = file.readUInt32LE(14);
  const salt = file.subarray(18, 34);
  const nonce = file.subarray(34, 58);
  const headerLength = 70 + file.readUInt32LE(66);
  const key = Buffer.from(
    s.crypto_pwhash(
      32,
      Buffer.from(v['passphrase'] as string, 'utf8'),
      salt,
      opslimit,
      memlimit,
      s.crypto_pwhash_ALG_ARGON2ID13,
    ),
  );
  t.equal(key.toString('hex'), v['key']);
  const plain = s.crypto_aead_xchacha20poly1305_ietf_decrypt(
    null,
    file.subarray(headerLength),
    file.subarray(0, headerLength),
    nonce,
    key,
  );
  t.equal(Buffer.from(plain).toString('hex'), v['container']);
  // And the reverse: encrypting the container with the same nonce rebuilds the file.
  const body = s.crypto_aead_xchacha20poly1305_ietf_encrypt(
    hex('container'),
    file.subarray(0, headerLength),
    null,
    nonce,
    key,
  );
  t.equal(Buffer.concat([file.subarray(0, headerLength), body]).toString('hex'), v['file']);
});

t.test('through shared/vault-format and shared/kdf', async (t) => {
  await sodiumReady();
  const file = hex('file');
  const { header } = parseHeader(file);
  t.match(header, {
    version: 1,
    kdfAlg: 2,
    opslimit: 2,
    memlimit: 64 * 1024 * 1024,
    generation: 1,
    approvedConfig: '{"daemon":{"log_level":"info"}}',
  });
  const key = await deriveKey(
    Buffer.from(v['passphrase'] as string, 'utf8'),
    header.salt,
    header.opslimit,
    header.memlimit,
  );
  t.equal(key.toString('hex'), v['key']);
  const { contents } = decryptVault(file, key);
  t.same(contents.meta, { demo: { secret: 0 } });
  t.equal(contents.blobs.length, 1);
  t.equal((contents.blobs[0] as Buffer).toString(), 's3cr3t-token');
});
