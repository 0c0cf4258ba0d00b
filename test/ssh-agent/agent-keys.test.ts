// The keys of the ssh-agent front door, against OpenSSH's own tools. Keys
// of every supported type are made fresh with the real ssh-keygen (none is
// committed). publicBlobOf must give the .pub file's blob and fingerprintOf
// what `ssh-keygen -lf` prints. Every signature signAsAgent makes is wrapped
// in an SSH signature file (PROTOCOL.sshsig) and checked by
// `ssh-keygen -Y check-novalidate`, which verifies it with OpenSSH's code and
// refuses an RSA signature not named rsa-sha2-256/512. verifyHostSignature
// must accept the signatures `ssh-keygen -Y sign` makes (the inner signature,
// over the preimage rebuilt from PROTOCOL.sshsig) and answer false, never
// throw, for another key's signature, other data, SHA-1 ssh-rsa, a
// mislabelled algorithm and every malformed or truncated blob.
import t from 'tap';
import { execFile } from 'node:child_process';
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  generatePrimeSync,
  randomBytes,
  sign,
  verify,
  KeyObject,
} from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { utils } from 'ssh2';
import {
  AgentKeyError,
  fingerprintOf,
  keyTypeOf,
  publicBlobOf,
  signAsAgent,
  verifyHostSignature,
} from '../../daemon/ssh-agent/agent-keys';
import { WireReader, str, u32 } from '../../daemon/ssh-agent/wire';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'postern-agent-keys-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

interface Made {
  name: string;
  type: string; // the key type in the .pub file
  path: string;
  text: Buffer; // the private key file
  blob: Buffer; // the .pub file's base64, decoded
}

const SPECS: { name: string; args: string[]; type: string }[] = [
  { name: 'ed25519', args: ['-t', 'ed25519'], type: 'ssh-ed25519' },
  { name: 'ecdsa256', args: ['-t', 'ecdsa', '-b', '256'], type: 'ecdsa-sha2-nistp256' },
  { name: 'ecdsa384', args: ['-t', 'ecdsa', '-b', '384'], type: 'ecdsa-sha2-nistp384' },
  { name: 'ecdsa521', args: ['-t', 'ecdsa', '-b', '521'], type: 'ecdsa-sha2-nistp521' },
  { name: 'rsa', args: ['-t', 'rsa', '-b', '2048'], type: 'ssh-rsa' },
];

async function makeKey(name: string, args: string[], type: string): Promise<Made> {
  const path = join(dir, name);
  await run('ssh-keygen', ['-q', ...args, '-N', '', '-C', `agent-keys-${name}`, '-f', path]);
  const pub = readFileSync(`${path}.pub`, 'latin1').trim().split(' ');
  if (pub[0] !== type) throw new Error(`ssh-keygen made ${pub[0]} for ${name}`);
  return { name, type, path, text: readFileSync(path), blob: Buffer.from(pub[1]!, 'base64') };
}

// A second key of each type, for "a signature by another key".
const keysP = Promise.all(SPECS.map((s) => makeKey(s.name, s.args, s.type)));
const othersP = Promise.all(SPECS.map((s) => makeKey(`${s.name}-other`, s.args, s.type)));

// ---- PROTOCOL.sshsig ----

const NAMESPACE = 'postern-test';

function sshsigPreimage(hashAlg: 'sha256' | 'sha512', message: Buffer): Buffer {
  const h = createHash(hashAlg).update(message).digest();
  return Buffer.concat([Buffer.from('SSHSIG'), str(NAMESPACE), str(''), str(hashAlg), str(h)]);
}

function sshsigArmour(publicBlob: Buffer, hashAlg: string, signatureBlob: Buffer): string {
  const blob = Buffer.concat([
    Buffer.from('SSHSIG'),
    u32(1),
    str(publicBlob),
    str(NAMESPACE),
    str(''),
    str(hashAlg),
    str(signatureBlob),
  ]);
  const lines = blob.toString('base64').match(/.{1,76}/g) ?? [];
  return `-----BEGIN SSH SIGNATURE-----\n${lines.join('\n')}\n-----END SSH SIGNATURE-----\n`;
}

// The public key and the inner signature blob of an armoured SSH signature.
function sshsigParts(armoured: string): { publicBlob: Buffer; hashAlg: string; signature: Buffer } {
  const b64 = armoured.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  const r = new WireReader(Buffer.from(b64, 'base64'));
  for (const c of 'SSHSIG') if (r.byte() !== c.charCodeAt(0)) throw new Error('not an SSH signature');
  if (r.uint32() !== 1) throw new Error('SSHSIG version');
  const publicBlob = r.string();
  if (r.text() !== NAMESPACE) throw new Error('namespace');
  r.string();
  const hashAlg = r.text();
  const signature = r.string();
  r.end();
  return { publicBlob, hashAlg, signature };
}

// `ssh-keygen -Y check-novalidate`: exit 0 when OpenSSH verifies the signature.
async function opensshAccepts(k: Made, message: Buffer, signatureBlob: Buffer): Promise<{ ok: boolean; out: string }> {
  const sigPath = join(dir, `${k.name}-${randomBytes(4).toString('hex')}.sig`);
  writeFileSync(sigPath, sshsigArmour(k.blob, 'sha512', signatureBlob));
  return new Promise((resolve) => {
    const child = execFile(
      'ssh-keygen',
      ['-Y', 'check-novalidate', '-n', NAMESPACE, '-s', sigPath],
      (err, stdout, stderr) => resolve({ ok: err === null, out: `${stdout}${stderr}`.trim() }),
    );
    child.stdin?.end(message);
  });
}

async function opensshSigns(k: Made, message: Buffer, hashAlg: 'sha256' | 'sha512'): Promise<Buffer> {
  const msgPath = join(dir, `${k.name}-${hashAlg}-${randomBytes(4).toString('hex')}.msg`);
  writeFileSync(msgPath, message);
  await run('ssh-keygen', ['-Y', 'sign', '-O', `hashalg=${hashAlg}`, '-f', k.path, '-n', NAMESPACE, msgPath]);
  const parts = sshsigParts(readFileSync(`${msgPath}.sig`, 'latin1'));
  if (!parts.publicBlob.equals(k.blob) || parts.hashAlg !== hashAlg) throw new Error('unexpected SSHSIG contents');
  return parts.signature;
}

// node:crypto cannot read OpenSSH private keys; ssh2 converts them.
function nodeKey(text: Buffer): KeyObject {
  const parsed = utils.parseKey(text);
  if (parsed instanceof Error || Array.isArray(parsed)) throw new Error('ssh2 cannot read the key');
  return createPrivateKey(parsed.getPrivatePEM());
}

function algorithmOf(signatureBlob: Buffer): string {
  return new WireReader(signatureBlob).text();
}

// ---- public blobs and fingerprints ----

t.test('publicBlobOf is the .pub blob, fingerprintOf is what ssh-keygen -lf prints', async (t) => {
  for (const k of await keysP) {
    t.ok(publicBlobOf(k.text).equals(k.blob), `${k.name}: publicBlobOf equals the .pub blob`);
    const { stdout } = await run('ssh-keygen', ['-lf', `${k.path}.pub`]);
    t.equal(fingerprintOf(k.blob), stdout.split(' ')[1], `${k.name}: fingerprint`);
    t.equal(keyTypeOf(k.blob), k.type, `${k.name}: keyTypeOf`);
  }
});

t.test('a key text that is no unencrypted OpenSSH private key: AgentKeyError, no key material', async (t) => {
  const ed = (await keysP)[0]!;
  const encPath = join(dir, 'encrypted');
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'a passphrase', '-f', encPath]);
  const rows: [string, Buffer][] = [
    ['empty', Buffer.alloc(0)],
    ['garbage', randomBytes(300)],
    ['the public key line', readFileSync(`${ed.path}.pub`)],
    ['an encrypted key', readFileSync(encPath)],
    ['a truncated key', ed.text.subarray(0, 120)],
  ];
  for (const [what, text] of rows) {
    t.throws(() => publicBlobOf(text), AgentKeyError, `${what}: publicBlobOf`);
    t.throws(() => signAsAgent(text, Buffer.from('data'), 0), AgentKeyError, `${what}: signAsAgent`);
    try {
      publicBlobOf(text);
    } catch (e) {
      t.equal(
        (e as Error).message,
        'the stored SSH key could not be read as an unencrypted OpenSSH private key',
        `${what}: the message`,
      );
    }
  }
});

// ---- signing ----

t.test('signAsAgent signatures are valid for OpenSSH, with the algorithm the flags ask for', async (t) => {
  const keys = await keysP;
  const message = Buffer.from(`a message to sign ${randomBytes(8).toString('hex')}`);
  const data = sshsigPreimage('sha512', message);
  for (const k of keys) {
    const flagRows: [number, string][] =
      k.type === 'ssh-rsa'
        ? [
            [2, 'rsa-sha2-256'],
            [4, 'rsa-sha2-512'],
            [6, 'rsa-sha2-256'], // both: SHA-256 first, as OpenSSH's agent does
            [2 | 1, 'rsa-sha2-256'],
          ]
        : [
            [0, k.type],
            [6, k.type], // the RSA flags mean nothing to other keys
          ];
    for (const [flags, algorithm] of flagRows) {
      const blob = signAsAgent(k.text, data, flags);
      t.equal(algorithmOf(blob), algorithm, `${k.name} flags ${flags}: algorithm`);
      const checked = await opensshAccepts(k, message, blob);
      t.ok(checked.ok, `${k.name} flags ${flags}: ssh-keygen -Y check-novalidate accepts it (${checked.out})`);
      t.ok(verifyHostSignature(k.blob, data, blob), `${k.name} flags ${flags}: verifyHostSignature agrees`);
    }
    // The check can fail: the same signature over another message is refused.
    const blob = signAsAgent(k.text, data, 4);
    const other = await opensshAccepts(k, Buffer.concat([message, Buffer.from('!')]), blob);
    t.notOk(other.ok, `${k.name}: ssh-keygen refuses the signature for another message`);
  }
});

t.test('RSA without a SHA-2 flag is refused (no SHA-1 ssh-rsa signature)', async (t) => {
  const rsa = (await keysP).find((k) => k.type === 'ssh-rsa')!;
  for (const flags of [0, 1, 8, 0xfffffff9]) {
    t.throws(
      () => signAsAgent(rsa.text, Buffer.from('data'), flags),
      {
        name: 'AgentKeyError',
        message:
          'an RSA signature was asked for without the SHA-2 flags (rsa-sha2-256 or rsa-sha2-512); ssh-rsa (SHA-1) signatures are refused',
      },
      `flags ${flags}`,
    );
  }
});

// ---- verifying signatures OpenSSH made ----

t.test('verifyHostSignature accepts what ssh-keygen -Y sign made, and nothing near it', async (t) => {
  const keys = await keysP;
  const others = await othersP;
  const message = Buffer.from(`host data ${randomBytes(8).toString('hex')}`);
  for (const [i, k] of keys.entries()) {
    const hashes: ('sha256' | 'sha512')[] = k.type === 'ssh-rsa' ? ['sha256', 'sha512'] : ['sha512'];
    for (const hashAlg of hashes) {
      const data = sshsigPreimage(hashAlg, message);
      const sig = await opensshSigns(k, message, hashAlg);
      const label = `${k.name} (${algorithmOf(sig)})`;
      t.equal(verifyHostSignature(k.blob, data, sig), true, `${label}: OpenSSH's signature verifies`);

      const otherKeySig = await opensshSigns(others[i]!, message, hashAlg);
      t.equal(verifyHostSignature(k.blob, data, otherKeySig), false, `${label}: a signature by another key`);
      const otherData = Buffer.from(data);
      otherData[otherData.length - 1]! ^= 1;
      t.equal(verifyHostSignature(k.blob, otherData, sig), false, `${label}: a signature of other data`);
      t.equal(verifyHostSignature(k.blob, data.subarray(0, -1), sig), false, `${label}: data one byte short`);
      t.equal(verifyHostSignature(others[i]!.blob, data, sig), false, `${label}: checked against another key`);

      // Every truncation of the signature blob and of the key blob, and one
      // byte too many: false, never a throw.
      for (let n = 0; n < sig.length; n += 1) {
        if (verifyHostSignature(k.blob, data, sig.subarray(0, n)) !== false) t.fail(`${label}: signature cut at ${n}`);
      }
      for (let n = 0; n < k.blob.length; n += 1) {
        if (verifyHostSignature(k.blob.subarray(0, n), data, sig) !== false) t.fail(`${label}: key cut at ${n}`);
      }
      t.equal(verifyHostSignature(k.blob, data, Buffer.concat([sig, Buffer.from([0])])), false, `${label}: sig + 1`);
      t.equal(verifyHostSignature(Buffer.concat([k.blob, Buffer.from([0])]), data, sig), false, `${label}: key + 1`);
    }
  }
});

// Re-encode a signature blob with another algorithm name or inner bytes.
function relabel(sig: Buffer, algorithm: string, inner?: Buffer): Buffer {
  const r = new WireReader(sig);
  r.text();
  return Buffer.concat([str(algorithm), str(inner ?? r.string())]);
}

function innerOf(sig: Buffer): Buffer {
  const r = new WireReader(sig);
  r.text();
  return r.string();
}

// An RSA host key of the given size made by node, its blob and its
// rsa-sha2-256 signature of data: OpenSSH's minimum is 1024 bits.
function rsaOfBits(bits: number, data: Buffer): { blob: Buffer; sig: Buffer } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  const jwk = publicKey.export({ format: 'jwk' });
  const mpint = (b64: string | undefined): Buffer => {
    const b = Buffer.from(b64 ?? '', 'base64url');
    return str(b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
  };
  const blob = Buffer.concat([str('ssh-rsa'), mpint(jwk.e), mpint(jwk.n)]);
  return { blob, sig: Buffer.concat([str('rsa-sha2-256'), str(sign('sha256', data, privateKey))]) };
}

t.test('verifyHostSignature: an RSA host key needs 1024 bits', async (t) => {
  const data = randomBytes(32);
  const k1024 = rsaOfBits(1024, data);
  t.equal(verifyHostSignature(k1024.blob, data, k1024.sig), true, '1024 bits');
  const k1023 = rsaOfBits(1023, data);
  t.equal(verifyHostSignature(k1023.blob, data, k1023.sig), false, '1023 bits');
  t.equal(keyTypeOf(k1023.blob), null, 'keyTypeOf: no usable key');
});

// An RSA host key with a public exponent of `eBits` bits (node makes only
// small ones: built here from two primes), its blob and its rsa-sha2-256
// signature of data.
function rsaWithExponent(eBits: number, data: Buffer): { blob: Buffer; sig: Buffer } {
  const prime = (): bigint => generatePrimeSync(1024, { bigint: true });
  const [p, q] = [prime(), prime()];
  const phi = (p - 1n) * (q - 1n);
  const inverse = (a: bigint, m: bigint): bigint => {
    let [r0, r1, s0, s1] = [a % m, m, 1n, 0n];
    while (r1 !== 0n) {
      const k = r0 / r1;
      [r0, r1, s0, s1] = [r1, r0 - k * r1, s1, s0 - k * s1];
    }
    return r0 === 1n ? ((s0 % m) + m) % m : 0n;
  };
  let e = 0n;
  while (e === 0n || inverse(e, phi) === 0n)
    e = BigInt('0x' + randomBytes(Math.ceil(eBits / 8)).toString('hex')) | (1n << BigInt(eBits - 1)) | 1n;
  e &= (1n << BigInt(eBits)) - 1n;
  const d = inverse(e, phi);
  const bytes = (v: bigint): Buffer => {
    const hex = v.toString(16);
    return Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
  };
  const b64 = (v: bigint): string => bytes(v).toString('base64url');
  const privateKey = createPrivateKey({
    key: {
      kty: 'RSA',
      n: b64(p * q),
      e: b64(e),
      d: b64(d),
      p: b64(p),
      q: b64(q),
      dp: b64(d % (p - 1n)),
      dq: b64(d % (q - 1n)),
      qi: b64(inverse(q, p)),
    },
    format: 'jwk',
  });
  const mp = (v: bigint): Buffer => {
    const b = bytes(v);
    return str(b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
  };
  const blob = Buffer.concat([str('ssh-rsa'), mp(e), mp(p * q)]);
  return { blob, sig: Buffer.concat([str('rsa-sha2-256'), str(sign('sha256', data, privateKey))]) };
}

// A public exponent as large as the modulus makes each verification cost a
// private-key operation (≈6 ms at 3072 bits) for anyone who can send a
// session-bind; OpenSSL itself refuses exponents over 64 bits beside moduli
// over 3072 bits, and host keys use 65537.
t.test("verifyHostSignature: an RSA host key's exponent has at most 64 bits", async (t) => {
  const data = randomBytes(32);
  const e64 = rsaWithExponent(64, data);
  t.equal(verifyHostSignature(e64.blob, data, e64.sig), true, 'a 64-bit exponent');
  const e65 = rsaWithExponent(65, data);
  t.equal(verifyHostSignature(e65.blob, data, e65.sig), false, 'a 65-bit exponent');
  const huge = rsaWithExponent(2040, data);
  t.equal(verifyHostSignature(huge.blob, data, huge.sig), false, 'an exponent nearly as long as the modulus');
  t.equal(keyTypeOf(huge.blob), null, 'keyTypeOf: no usable key');
});

t.test('verifyHostSignature: SHA-1, mislabelled algorithms, malformed keys and signatures are false', async (t) => {
  const keys = await keysP;
  const by = (name: string): Made => keys.find((k) => k.name === name)!;
  const ed = by('ed25519');
  const p256 = by('ecdsa256');
  const p384 = by('ecdsa384');
  const rsa = by('rsa');
  const data = randomBytes(48);
  const edSig = signAsAgent(ed.text, data, 0);
  const p256Sig = signAsAgent(p256.text, data, 0);
  const rsa256 = signAsAgent(rsa.text, data, 2);
  const rsa512 = signAsAgent(rsa.text, data, 4);
  // Each baseline verifies, so that each row below fails for its own reason.
  for (const [k, s] of [
    [ed, edSig],
    [p256, p256Sig],
    [rsa, rsa256],
    [rsa, rsa512],
  ] as const) {
    t.ok(verifyHostSignature(k.blob, data, s), `baseline ${k.name} ${algorithmOf(s)}`);
  }

  // A genuine SHA-1 RSA signature (node verifies it), labelled ssh-rsa.
  const sha1 = sign('sha1', data, nodeKey(rsa.text));
  const p256Inner = new WireReader(innerOf(p256Sig));
  const rMag = p256Inner.mpint();
  const sMag = p256Inner.mpint();
  const mp = (b: Buffer): Buffer => str(b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);

  const ecdsaBlob = (type: string, curve: string, q: Buffer): Buffer => Buffer.concat([str(type), str(curve), str(q)]);
  const p256Q = new WireReader(p256.blob);
  p256Q.text();
  p256Q.text();
  const q = p256Q.string();
  const offCurve = Buffer.from(q);
  offCurve[offCurve.length - 1]! ^= 1;
  const smallRsa = Buffer.concat([str('ssh-rsa'), mp(Buffer.from([1, 0, 1])), mp(randomBytes(64))]);

  const rows: [string, Buffer, Buffer][] = [
    ['ssh-rsa (SHA-1) signature', rsa.blob, relabel(rsa256, 'ssh-rsa', sha1)],
    ['rsa-sha2-512 signature labelled rsa-sha2-256', rsa.blob, relabel(rsa512, 'rsa-sha2-256')],
    ['rsa-sha2-256 signature labelled rsa-sha2-512', rsa.blob, relabel(rsa256, 'rsa-sha2-512')],
    ['rsa signature labelled ssh-ed25519', rsa.blob, relabel(rsa256, 'ssh-ed25519')],
    [
      'rsa signature one byte longer than the modulus',
      rsa.blob,
      relabel(rsa256, 'rsa-sha2-256', Buffer.concat([Buffer.from([0]), innerOf(rsa256)])),
    ],
    ['ed25519 signature labelled ecdsa-sha2-nistp256', ed.blob, relabel(edSig, 'ecdsa-sha2-nistp256')],
    ['ed25519 signature labelled rsa-sha2-256', ed.blob, relabel(edSig, 'rsa-sha2-256')],
    ['ed25519 signature of 63 bytes', ed.blob, relabel(edSig, 'ssh-ed25519', innerOf(edSig).subarray(0, 63))],
    [
      'ed25519 signature of 65 bytes',
      ed.blob,
      relabel(edSig, 'ssh-ed25519', Buffer.concat([innerOf(edSig), Buffer.from([0])])),
    ],
    ['ed25519 signature of other data', ed.blob, signAsAgent(ed.text, Buffer.from('x'), 0)],
    ['p256 signature labelled ecdsa-sha2-nistp384', p256.blob, relabel(p256Sig, 'ecdsa-sha2-nistp384')],
    ['p256 signature checked with the p384 key', p384.blob, relabel(p256Sig, 'ecdsa-sha2-nistp384')],
    ['p256 signature labelled ssh-ed25519', p256.blob, relabel(p256Sig, 'ssh-ed25519')],
    ['ecdsa r and s swapped', p256.blob, relabel(p256Sig, p256.type, Buffer.concat([mp(sMag), mp(rMag)]))],
    [
      'ecdsa negative r',
      p256.blob,
      relabel(p256Sig, p256.type, Buffer.concat([str(Buffer.from([0x80, ...rMag])), mp(sMag)])),
    ],
    [
      'ecdsa r of 33 significant bytes',
      p256.blob,
      relabel(p256Sig, p256.type, Buffer.concat([mp(Buffer.from([1, ...rMag])), mp(sMag)])),
    ],
    ['ecdsa s missing', p256.blob, relabel(p256Sig, p256.type, mp(rMag))],
    [
      'ecdsa bytes after s',
      p256.blob,
      relabel(p256Sig, p256.type, Buffer.concat([mp(rMag), mp(sMag), Buffer.from([0])])),
    ],
    ['ecdsa raw r||s instead of mpints', p256.blob, relabel(p256Sig, p256.type, Buffer.concat([rMag, sMag]))],
    ['ecdsa key whose curve name disagrees', ecdsaBlob(p256.type, 'nistp384', q), p256Sig],
    [
      'ecdsa key with a compressed point',
      ecdsaBlob(p256.type, 'nistp256', Buffer.concat([Buffer.from([2]), q.subarray(1, 33)])),
      p256Sig,
    ],
    ['ecdsa key with a point off the curve', ecdsaBlob(p256.type, 'nistp256', offCurve), p256Sig],
    ['ecdsa key of an unsupported curve', ecdsaBlob('ecdsa-sha2-nistp192', 'nistp192', q), p256Sig],
    ['a 512-bit rsa key', smallRsa, rsa256],
    ['an ssh-dss key', Buffer.concat([str('ssh-dss'), mp(randomBytes(128))]), rsa256],
    ['a certificate key type', Buffer.concat([str('ssh-ed25519-cert-v01@openssh.com'), str(randomBytes(32))]), edSig],
    ['empty key blob', Buffer.alloc(0), edSig],
    ['empty signature blob', ed.blob, Buffer.alloc(0)],
    ['random key blob', randomBytes(51), edSig],
    ['random signature blob', ed.blob, randomBytes(83)],
    ['key type length 2^32-1', Buffer.concat([u32(0xffffffff), Buffer.from('ssh-ed25519')]), edSig],
    ['signature algorithm length 2^32-1', ed.blob, Buffer.concat([u32(0xffffffff), edSig.subarray(4)])],
    ['signature length 2^32-1', ed.blob, Buffer.concat([str('ssh-ed25519'), u32(0xffffffff), innerOf(edSig)])],
    ['ed25519 key of 31 bytes', Buffer.concat([str('ssh-ed25519'), str(randomBytes(31))]), edSig],
    ['ed25519 key type with a NUL', Buffer.concat([str('ssh-ed25519\0'), str(innerOf(ed.blob))]), edSig],
  ];
  for (const [what, keyBlob, sigBlob] of rows) {
    let got: unknown;
    try {
      got = verifyHostSignature(keyBlob, data, sigBlob);
    } catch (e) {
      got = `threw ${(e as Error).message}`;
    }
    t.equal(got, false, what);
  }
  t.ok(
    // the SHA-1 row above is refused for its algorithm, not because the signature is bad
    verify('sha1', data, nodeKey(rsa.text), sha1),
    'the SHA-1 signature itself is valid',
  );
});
