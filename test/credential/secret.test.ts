// Secrets at import (SPEC §4): HTTP secrets and SSH passwords are checked,
// SSH private keys of every supported type and format are decrypted and
// stored as an unencrypted OpenSSH key that ssh2 and OpenSSH both read. Keys
// are made fresh for each run with the real ssh-keygen (and node:crypto for
// the PKCS#8 forms ssh-keygen cannot write); none is committed.
import t, { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes, createPublicKey } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { utils } from 'ssh2';
import { isRefusal, Refusal } from '../../shared/errors';
import {
  checkHttpSecret,
  stripOneTrailingNewline,
  prepareSshSecret,
  sshKeyPublic,
  sshKeyFingerprint,
} from '../../shared/credential';

function refusalOf(fn: () => unknown): Refusal {
  try {
    fn();
  } catch (e) {
    if (isRefusal(e)) return e;
    throw e;
  }
  throw new Error('expected a Refusal, got a value');
}

// The refusal must not carry the secret anywhere: message or detail.
function assertSecretFree(t: Test, r: Refusal, secret: string | Buffer, what: string): void {
  const text = `${r.message} ${JSON.stringify(r.detail ?? {})}`;
  const s = Buffer.isBuffer(secret) ? secret.toString('latin1') : secret;
  for (const piece of s.split(/[\x00-\x20\x7f]+/).filter((p) => p.length >= 6)) {
    t.notOk(text.includes(piece), `${what}: the refusal does not contain the secret`);
  }
}

t.test('stripOneTrailingNewline', async (t) => {
  const rows: [string, string][] = [
    ['token\n', 'token'],
    ['token\r\n', 'token'],
    ['token\n\n', 'token\n'],
    ['token\r\n\r\n', 'token\r\n'],
    ['token\r', 'token\r'],
    ['token', 'token'],
    ['\n', ''],
    ['\r\n', ''],
    ['', ''],
  ];
  for (const [input, output] of rows) {
    t.equal(stripOneTrailingNewline(Buffer.from(input)).toString(), output, JSON.stringify(input));
  }
  const original = Buffer.from('secret\n');
  const view = stripOneTrailingNewline(original);
  original.fill(0);
  t.same([...view], [0, 0, 0, 0, 0, 0], 'a view of the same memory: wiping the original wipes it');
});

t.test('checkHttpSecret', async (t) => {
  const good = [
    'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
    'with space and "quotes"',
    't\u00f6k\u00e9n-utf8',
    '~!@#$%^&*()_+{}|:<>?',
  ];
  for (const s of good) t.doesNotThrow(() => checkHttpSecret(Buffer.from(s)), JSON.stringify(s));
  const bad: [Buffer, RegExp, string][] = [
    [Buffer.alloc(0), /the secret is empty/, 'empty'],
    [Buffer.from('SEKRET-token\n'), /control character/, 'a newline not stripped'],
    [Buffer.from('SEKRET-token\r'), /control character/, 'carriage return'],
    [Buffer.from('SEKRET\0token'), /control character/, 'NUL'],
    [Buffer.from('SEKRET-token\x7f'), /control character/, 'DEL'],
    [Buffer.from('SEKRET\ttoken'), /control character/, 'tab'],
    [Buffer.from('SEKRET-token\x1b[2J'), /control character/, 'escape'],
    [Buffer.from('SEKRET-line-one\nSEKRET-line-two'), /control character/, 'two lines'],
  ];
  for (const [secret, message, what] of bad) {
    const r = refusalOf(() => checkHttpSecret(secret));
    t.equal(r.code, 'invalid_definition', what);
    t.match(r.message, message, what);
    t.equal((r.detail?.['problems'] as { path: string }[])[0]?.path, 'secret', `${what}: path`);
    assertSecretFree(t, r, secret, what);
  }
});

t.test('SSH passwords', async (t) => {
  const def = { auth: 'password' as const };
  const pw = Buffer.from('correct horse\tbattery staple');
  t.equal(prepareSshSecret(def, pw), pw, 'a valid password is returned as is');
  const bad: [string, RegExp][] = [
    ['', /empty/],
    ['SEKRET-pass\0word', /NUL, CR or LF/],
    ['SEKRET-pass\nword', /NUL, CR or LF/],
    ['SEKRET-password\r', /NUL, CR or LF/],
  ];
  for (const [secret, message] of bad) {
    const r = refusalOf(() => prepareSshSecret(def, Buffer.from(secret)));
    t.equal(r.code, 'invalid_definition', JSON.stringify(secret));
    t.match(r.message, message);
    assertSecretFree(t, r, secret, JSON.stringify(secret));
  }
});

// ---- private keys ----

const PASS = 'key-passphrase-123';
const DEF = { auth: 'key' as const };

interface KeyCase {
  title: string;
  make: (dir: string) => { file: string; publicLine: string; fingerprint: string | null };
  pass: string | null;
}

function sshKeygen(dir: string, name: string, args: string[], pass: string | null) {
  const file = join(dir, name);
  execFileSync('ssh-keygen', ['-q', ...args, '-N', pass ?? '', '-C', 'test key', '-f', file]);
  const pub = readFileSync(`${file}.pub`, 'utf8').trim().split(' ');
  const fingerprint = execFileSync('ssh-keygen', ['-lf', `${file}.pub`])
    .toString()
    .split(' ')[1] as string;
  return { file, publicLine: `${pub[0]} ${pub[1]}`, fingerprint };
}

// ssh-keygen cannot write ed25519 keys as PKCS#8: node:crypto does, and the
// expected public line is built from the raw public key.
function nodeEd25519(dir: string, name: string, pass: string | null) {
  const file = join(dir, name);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
    privateKeyEncoding:
      pass === null
        ? { type: 'pkcs8', format: 'pem' }
        : { type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: pass },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  writeFileSync(file, privateKey, { mode: 0o600 });
  const raw = Buffer.from(createPublicKey(publicKey).export({ format: 'jwk' }).x as string, 'base64url');
  const str = (b: Buffer): Buffer => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  const blob = Buffer.concat([str(Buffer.from('ssh-ed25519')), str(raw)]);
  return { file, publicLine: `ssh-ed25519 ${blob.toString('base64')}`, fingerprint: null };
}

const keyCases: KeyCase[] = [];
for (const pass of [null, PASS]) {
  const enc = pass === null ? 'plain' : 'encrypted';
  keyCases.push(
    { title: `ed25519 OpenSSH ${enc}`, pass, make: (d) => sshKeygen(d, `ed-${enc}`, ['-t', 'ed25519'], pass) },
    {
      title: `rsa-2048 OpenSSH ${enc}`,
      pass,
      make: (d) => sshKeygen(d, `rsa-${enc}`, ['-t', 'rsa', '-b', '2048'], pass),
    },
    {
      title: `rsa-3072 PEM ${enc}`,
      pass,
      make: (d) => sshKeygen(d, `rsa-pem-${enc}`, ['-t', 'rsa', '-b', '3072', '-m', 'PEM'], pass),
    },
    {
      title: `rsa-2048 PKCS8 ${enc}`,
      pass,
      make: (d) => sshKeygen(d, `rsa-p8-${enc}`, ['-t', 'rsa', '-b', '2048', '-m', 'PKCS8'], pass),
    },
    {
      title: `ecdsa-256 OpenSSH ${enc}`,
      pass,
      make: (d) => sshKeygen(d, `ec256-${enc}`, ['-t', 'ecdsa', '-b', '256'], pass),
    },
    {
      title: `ecdsa-384 PEM ${enc}`,
      pass,
      make: (d) => sshKeygen(d, `ec384-pem-${enc}`, ['-t', 'ecdsa', '-b', '384', '-m', 'PEM'], pass),
    },
    {
      title: `ecdsa-521 PKCS8 ${enc}`,
      pass,
      make: (d) => sshKeygen(d, `ec521-p8-${enc}`, ['-t', 'ecdsa', '-b', '521', '-m', 'PKCS8'], pass),
    },
    { title: `ed25519 PKCS8 ${enc}`, pass, make: (d) => nodeEd25519(d, `ed-p8-${enc}`, pass) },
  );
}

t.test('SSH private keys: every type and format, encrypted or not', async (t) => {
  const dir = t.testdir({});
  for (const c of keyCases) {
    await t.test(c.title, async (t) => {
      const made = c.make(dir);
      const key = readFileSync(made.file);
      const untouched = Buffer.from(key);
      const pass = c.pass === null ? undefined : Buffer.from(c.pass);

      if (c.pass !== null) {
        for (const [what, p] of [
          ['no passphrase', undefined],
          ['empty passphrase', Buffer.alloc(0)],
        ] as const) {
          const r = refusalOf(() => prepareSshSecret(DEF, key, p));
          t.equal(r.code, 'invalid_definition', what);
          t.equal(r.detail?.['needs_key_passphrase'], true, `${what}: asks for the passphrase`);
        }
        const wrong = refusalOf(() => prepareSshSecret(DEF, key, Buffer.from('not-the-passphrase')));
        t.equal(wrong.code, 'invalid_definition', 'wrong passphrase');
        t.match(wrong.message, /passphrase is wrong/);
        t.equal(wrong.detail?.['needs_key_passphrase'], undefined, 'a wrong passphrase is not "needs a passphrase"');
        t.notOk(wrong.message.includes('not-the-passphrase'), 'the passphrase is not in the message');
      }

      const prepared = prepareSshSecret(DEF, key, pass);
      t.ok(key.equals(untouched), 'the input is left as it was');
      t.match(
        prepared.toString('latin1'),
        /^-----BEGIN OPENSSH PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END OPENSSH PRIVATE KEY-----\n$/,
      );
      const parsed = utils.parseKey(prepared);
      if (parsed instanceof Error) throw parsed;
      t.ok(parsed.isPrivateKey(), 'ssh2 reads it without a passphrase');
      t.equal(sshKeyPublic(prepared), made.publicLine, 'same public key as the original');
      if (made.fingerprint !== null)
        t.equal(sshKeyFingerprint(prepared), made.fingerprint, 'same fingerprint as ssh-keygen -lf');

      // OpenSSH reads the prepared key too, and derives the same public key.
      const out = join(dir, `${c.title.replace(/\W+/g, '-')}.prepared`);
      writeFileSync(out, prepared, { mode: 0o600 });
      const derived = execFileSync('ssh-keygen', ['-y', '-P', '', '-f', out]).toString().trim().split(' ');
      t.equal(`${derived[0]} ${derived[1]}`, made.publicLine, 'ssh-keygen -y agrees');

      // A signature made with the prepared key verifies under the original
      // public key (read from its own text, not from the prepared key).
      const publicKey = utils.parseKey(made.publicLine);
      if (publicKey instanceof Error) throw publicKey;
      const data = randomBytes(64);
      const algo = parsed.type === 'ssh-ed25519' ? undefined : 'sha256';
      t.ok(publicKey.verify(data, parsed.sign(data, algo), algo), 'the prepared key signs for the original public key');

      t.ok(prepareSshSecret(DEF, prepared).equals(prepared), 'preparing again gives the same bytes');
      t.ok(
        prepareSshSecret(DEF, Buffer.concat([prepared, Buffer.from('\n')])).equals(prepared),
        'a trailing newline does not matter',
      );
    });
  }
});

t.test('SSH private keys that are refused', async (t) => {
  const dir = t.testdir({});
  const ed = sshKeygen(dir, 'ed', ['-t', 'ed25519'], null);
  const edKey = readFileSync(ed.file);
  const rsa1024 = readFileSync(sshKeygen(dir, 'rsa1024', ['-t', 'rsa', '-b', '1024'], null).file);
  const dsa = readFileSync(sshKeygen(dir, 'dsa', ['-t', 'dsa'], null).file);
  const k256 = generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  });
  const ed448 = generateKeyPairSync('ed448').privateKey.export({ type: 'pkcs8', format: 'pem' });
  const text = edKey.toString('latin1');
  const lines = text.trim().split('\n');
  const truncated = `${lines.slice(0, Math.floor(lines.length / 2)).join('\n')}\n${lines[lines.length - 1]}\n`;

  const rows: [string, Buffer, RegExp][] = [
    ['empty', Buffer.alloc(0), /private key is empty/],
    ['a public key line', readFileSync(`${ed.file}.pub`), /this is a public key/],
    [
      'a PEM public key',
      Buffer.from(createPublicKey(ed448).export({ type: 'spki', format: 'pem' }) as string),
      /this is a public key/,
    ],
    ['text that is no key', Buffer.from('hunter2-not-a-key'), /not a private key in OpenSSH or PEM format/],
    ['a PuTTY key', Buffer.from('PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: x\n'), /PuTTY/],
    ['a truncated key', Buffer.from(truncated), /could not be read/],
    ['RSA 1024', rsa1024, /1024 bits; use at least 2048/],
    ['DSA', dsa, /DSA \(ssh-dss\) keys are obsolete/],
    ['secp256k1', Buffer.from(k256 as string), /not supported/],
    ['ed448', Buffer.from(ed448 as string), /ed448 keys are not supported/],
  ];
  for (const [what, secret, message] of rows) {
    const r = refusalOf(() => prepareSshSecret(DEF, secret));
    t.equal(r.code, 'invalid_definition', what);
    t.match(r.message, message, what);
    t.equal((r.detail?.['problems'] as { path: string }[])[0]?.path, 'secret', `${what}: path`);
    assertSecretFree(t, r, secret, what);
  }
  t.equal(
    refusalOf(() => sshKeyPublic(Buffer.from('nope'))).code,
    'invalid_definition',
    'sshKeyPublic needs a prepared key',
  );
});
