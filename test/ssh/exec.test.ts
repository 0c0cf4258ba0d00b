// POST /v1/ssh through the real daemon against Debian's OpenSSH sshd (SPEC
// §6.6, §4): key login with every key type and format a credential may carry
// (the encrypted key decrypted at import), password login, the reply's shape,
// exit codes, signals, stderr, stdin, output capped at [ssh] max_output,
// connection reuse and lock, the password and private keys redacted from
// command output, the journal's intent and outcome, `postern request ssh`,
// and a search for every secret (password, private keys, the encrypted
// key's passphrase) in every reply and CLI output, the daemon log, and the
// journal's files and decrypted entries.
import t from 'tap';
import type { Test } from 'tap';
import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSshd, ClientKeyName } from '../helpers/sshd';
import { startStack, Stack, Card, auditList } from '../helpers/stack';
import { agentRequest, cli, cliAsync, eventually } from '../helpers/postern';
import { SshCredSpec, SshReply, addSshCredential, sshDefinition } from '../helpers/ssh-credential';
import { exposures } from '../helpers/exposure';
import { journalBytes, journalText } from '../helpers/canary';

type Entry = Record<string, unknown> & { seq: number; kind?: string };

type CredSpec = SshCredSpec & { host: string; auth: 'key' | 'password' };

function addSsh(
  s: Stack,
  c: CredSpec,
  secretFile: string,
  keyPassphrase?: string,
): { code: number | null; stdout: string; stderr: string } {
  return addSshCredential(s.h, c, secretFile, keyPassphrase);
}

const auditEntries = (s: Stack): Entry[] => auditList<Entry>(s);

// ---------------------------------------------------------------------------
// The private components of a key file, read without postern's code: PEM
// and PKCS#8 through node:crypto, the OpenSSH format by hand. Unsigned
// big-endian, no leading zero.

function readU32(b: Buffer, at: number): number {
  return b.readUInt32BE(at);
}

function sshStrings(b: Buffer, at: number, count: number): { values: Buffer[]; end: number } {
  const values: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const n = readU32(b, at);
    values.push(b.subarray(at + 4, at + 4 + n));
    at += 4 + n;
  }
  return { values, end: at };
}

function magnitude(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  return b.subarray(i);
}

function privateParts(keyText: string): Record<string, Buffer> {
  if (!keyText.startsWith('-----BEGIN OPENSSH PRIVATE KEY-----')) {
    const jwk = createPrivateKey(keyText).export({ format: 'jwk' }) as Record<string, string>;
    const names = jwk['kty'] === 'RSA' ? ['d', 'p', 'q', 'dp', 'dq', 'qi'] : ['d'];
    return Object.fromEntries(names.map((n) => [n, magnitude(Buffer.from(jwk[n]!, 'base64url'))]));
  }
  const body = Buffer.from(
    keyText
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('-----'))
      .join(''),
    'base64',
  );
  const magic = 'openssh-key-v1\0';
  if (body.subarray(0, magic.length).toString('latin1') !== magic) throw new Error('not an openssh-key-v1 blob');
  const head = sshStrings(body, magic.length, 3); // cipher, kdf, kdf options
  if (head.values[0]!.toString() !== 'none') throw new Error('encrypted key');
  const keys = sshStrings(body, head.end + 4, 2); // public key, private section
  const section = keys.values[1]!;
  const type = sshStrings(section, 8, 1);
  const kind = type.values[0]!.toString();
  if (kind === 'ssh-ed25519') {
    const [, both] = sshStrings(section, type.end, 2).values;
    return { seed: both!.subarray(0, 32) };
  }
  if (kind === 'ssh-rsa') {
    const [, , d, qi, p, q] = sshStrings(section, type.end, 6).values.map(magnitude);
    return { d: d!, qi: qi!, p: p!, q: q! };
  }
  const [, , d] = sshStrings(section, type.end, 3).values;
  return { d: magnitude(d!) };
}

// Pieces of private components found in `text`: for each component, the
// windows of `win` bytes (at every offset) that appear raw, in hex (any
// case), or in base64/base64url at any alignment, once line breaks (real or
// JSON-escaped) are taken out, so base64 wrapped over lines joins up as a
// reader would join it.
function keyLeaks(text: string, parts: Record<string, Buffer>, win = 16): string[] {
  const flat = text.replace(/\\r|\\n|\r|\n/g, '');
  const lower = flat.toLowerCase();
  const out: string[] = [];
  for (const [name, part] of Object.entries(parts)) {
    let found = 0;
    let total = 0;
    for (let i = 0; i + win <= part.length; i++) {
      total++;
      const w = part.subarray(i, i + win);
      const forms = [w.toString('latin1')];
      for (let o = 0; o < 3; o++) {
        const std = w.subarray(o, o + Math.floor((win - o) / 3) * 3).toString('base64');
        forms.push(std, std.replace(/\+/g, '-').replace(/\//g, '_'));
      }
      if (forms.some((f) => flat.includes(f)) || lower.includes(w.toString('hex'))) found++;
    }
    if (found > 0) out.push(`${name}: ${found} of ${total} ${win}-byte windows`);
  }
  return out;
}

// ---------------------------------------------------------------------------

const KEY_CREDS: { key: ClientKeyName; name: string; host: 'ip' | 'name'; logType: string }[] = [
  { key: 'ed25519', name: 'k-ed25519', host: 'ip', logType: 'ED25519' },
  { key: 'rsa', name: 'k-rsa', host: 'name', logType: 'RSA' },
  { key: 'ecdsa', name: 'k-ecdsa', host: 'ip', logType: 'ECDSA' },
  { key: 'rsaPem', name: 'k-rsa-pem', host: 'name', logType: 'RSA' },
  { key: 'ecdsaPem', name: 'k-ecdsa-pem', host: 'ip', logType: 'ECDSA' },
  { key: 'rsaPkcs8', name: 'k-rsa-pkcs8', host: 'name', logType: 'RSA' },
  { key: 'encrypted', name: 'k-encrypted', host: 'ip', logType: 'ED25519' },
];

const BIG = "head -c 1000000 /dev/zero | tr '\\0' a";
const BIG_EXIT = 'head -c 300000 /dev/zero; echo done >&2; exit 5';
const COMMANDS = [
  'id -un',
  'echo hi',
  'cat secret/*',
  "sh -c 'exit 3'",
  'false',
  'kill -TERM $$',
  'ls /nonexistent',
  'echo out; echo err >&2; exit 7',
  BIG,
  BIG_EXIT,
  'base64 secret/*',
];
const CAP = 64 * 1024;

t.test('POST /v1/ssh against OpenSSH, through the daemon', async (t) => {
  const [sshd, s] = await Promise.all([
    startSshd({ passwordUser: true }),
    startStack({ records: { 'box.example.test': { A: ['127.0.0.1'] } }, sshConfig: 'max_output = "64KiB"' }),
  ]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'session', root_key: card.process.key };
  });
  const password = sshd.password!.password;
  const keyPassphrase = sshd.keys.encrypted.passphrase!;
  const wrongKeyPassphrase = `not-the-passphrase-${randomBytes(9).toString('hex')}`;

  // Files the throwaway user can read: the password, and a copy of every
  // private key file as it was given to `cred add`.
  const home = join(sshd.dir, 'home');
  const gid = statSync(home).gid;
  const secretDir = join(home, 'secret');
  mkdirSync(secretDir, { mode: 0o700 });
  chownSync(secretDir, sshd.uid, gid);
  const place = (name: string, write: (p: string) => void): void => {
    const p = join(secretDir, name);
    write(p);
    chownSync(p, sshd.uid, gid);
    chmodSync(p, 0o600);
  };
  place('pw', (p) => writeFileSync(p, password + '\n'));
  for (const k of KEY_CREDS) place(k.name, (p) => copyFileSync(sshd.keys[k.key].path, p));

  const texts: string[] = []; // every reply and CLI output, for the secret search
  const post = async (body: Record<string, unknown>): Promise<{ status: number; json: unknown; text: string }> => {
    const r = await agentRequest(s.sock, 'POST', '/v1/ssh', body);
    texts.push(r.text);
    return r;
  };
  const ok = async (t: Test, body: Record<string, unknown>): Promise<SshReply> => {
    const r = await post(body);
    t.equal(r.status, 200, `${String(body['command'])}: ${r.text.slice(0, 400)}`);
    return r.json as SshReply;
  };
  const cred = (c: {
    name: string;
    host?: string;
    auth?: 'key' | 'password';
    commands?: string[];
    stdin?: boolean;
  }): CredSpec => ({
    name: c.name,
    host: c.host ?? '127.0.0.1',
    port: sshd.port,
    user: sshd.user,
    auth: c.auth ?? 'key',
    hostKey: sshd.hostKeyFingerprint,
    commands: c.commands ?? COMMANDS,
    stdin: c.stdin ?? false,
  });

  await t.test('key login with every key type and format', async (t) => {
    // An encrypted key needs its passphrase at import; a wrong one is refused.
    const wrong = addSsh(s, cred({ name: 'k-wrong-pass' }), sshd.keys.encrypted.path, wrongKeyPassphrase);
    texts.push(wrong.stdout, wrong.stderr);
    t.equal(wrong.code, 1, wrong.stdout + wrong.stderr);
    t.match(wrong.stderr, /passphrase is wrong/);
    for (const k of KEY_CREDS) {
      const host = k.host === 'ip' ? '127.0.0.1' : 'box.example.test';
      const added = addSsh(s, cred({ name: k.name, host }), sshd.keys[k.key].path, sshd.keys[k.key].passphrase);
      t.equal(added.code, 0, `${k.name}: ${added.stderr}`);
      texts.push(added.stdout, added.stderr);
      const before = sshd.logs().length;
      const r = await ok(t, { credential: k.name, command: 'id -un' });
      t.type(r.audit_seq, 'number');
      t.same(
        r,
        {
          exit_code: 0,
          signal: null,
          stdout: `${sshd.user}\n`,
          stderr: '',
          encoding: 'utf8',
          truncated: false,
          redactions: 0,
          target: { host, address: '127.0.0.1', port: sshd.port },
          audit_seq: r.audit_seq,
        },
        `${k.name} (${k.key})`,
      );
      t.match(
        sshd.logs().slice(before),
        new RegExp(
          `Accepted publickey for ${sshd.user} from 127\\.0\\.0\\.1 port \\d+ ssh2: ${k.logType} ${sshd.keys[k.key].fingerprint.replace(/[+/]/g, '\\$&')}`,
        ),
        `${k.name}: sshd accepted that key`,
      );
    }
    const card = cards.find((c) => c.credential === 'k-rsa');
    t.match(
      card?.action,
      {
        kind: 'ssh',
        host: 'box.example.test',
        address: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        command: 'id -un',
      },
      'the card shows the checked address and the command',
    );
  });

  await t.test('password login', async (t) => {
    const added = addSsh(s, cred({ name: 'pw', auth: 'password' }), s.h.file('pw.secret', password + '\n'));
    texts.push(added.stdout, added.stderr);
    t.equal(added.code, 0, added.stderr);
    const before = sshd.logs().length;
    const r = await ok(t, { credential: 'pw', command: 'id -un' });
    t.same(r, {
      exit_code: 0,
      signal: null,
      stdout: `${sshd.user}\n`,
      stderr: '',
      encoding: 'utf8',
      truncated: false,
      redactions: 0,
      target: { host: '127.0.0.1', address: '127.0.0.1', port: sshd.port },
      audit_seq: r.audit_seq,
    });
    t.match(sshd.logs().slice(before), `Accepted password for ${sshd.user} from 127.0.0.1 port `);
  });

  await t.test('exit codes, signals, stderr', async (t) => {
    const run = (command: string): Promise<SshReply> => ok(t, { credential: 'k-ecdsa', command });
    t.match(await run("sh -c 'exit 3'"), { exit_code: 3, signal: null, stdout: '', stderr: '' });
    t.match(await run('false'), { exit_code: 1, signal: null, stdout: '', stderr: '' });
    const killed = await run('kill -TERM $$');
    t.equal(killed.exit_code, null, 'no exit code when a signal ended the command');
    t.equal(killed.signal, 'SIGTERM');
    t.equal(killed.truncated, false);
    const ls = await run('ls /nonexistent');
    t.equal(ls.exit_code, 2);
    t.equal(ls.stdout, '');
    t.match(ls.stderr, /^ls: cannot access '\/nonexistent': No such file or directory\n$/);
    t.match(await run('echo out; echo err >&2; exit 7'), {
      exit_code: 7,
      signal: null,
      stdout: 'out\n',
      stderr: 'err\n',
      encoding: 'utf8',
    });
  });

  await t.test('concurrent commands each report their own exit status', async (t) => {
    // Channels share the kept connection, so the server's replies for one
    // command often arrive in the same read as its channel's opening.
    const seen: string[] = [];
    for (let round = 0; round < 3; round++) {
      const rs = await Promise.all(
        Array.from({ length: 8 }, () => post({ credential: 'k-ed25519', command: 'echo out; echo err >&2; exit 7' })),
      );
      for (const r of rs) {
        const j = r.json as SshReply;
        seen.push(
          `${r.status} exit_code=${String(j.exit_code)} signal=${String(j.signal)} stdout=${JSON.stringify(j.stdout)} stderr=${JSON.stringify(j.stderr)}`,
        );
      }
    }
    const expected = '200 exit_code=7 signal=null stdout="out\\n" stderr="err\\n"';
    t.same(
      seen.filter((x) => x !== expected),
      [],
      `all ${seen.length} replies: ${expected}`,
    );
  });

  await t.test('stdin', async (t) => {
    const added = addSsh(s, cred({ name: 'cat', commands: ['cat', 'wc -c'], stdin: true }), sshd.keys.ed25519.path);
    t.equal(added.code, 0, added.stderr);
    const text = 'hello\nworld, ünïcode\n'.repeat(1000);
    let r = await ok(t, { credential: 'cat', command: 'cat', stdin: text });
    t.match(r, { exit_code: 0, stdout: text, stderr: '', encoding: 'utf8', truncated: false });
    const bytes = Buffer.concat([Buffer.from([0xff, 0x00, 0xfe, 0x80]), randomBytes(3000)]);
    r = await ok(t, { credential: 'cat', command: 'cat', stdin_base64: bytes.toString('base64') });
    t.equal(r.encoding, 'base64', 'output that is not UTF-8 comes back in base64');
    t.equal(r.stdout, bytes.toString('base64'));
    t.equal(r.stderr, '');
    r = await ok(t, { credential: 'cat', command: 'wc -c', stdin_base64: bytes.toString('base64') });
    t.equal(r.stdout, `${bytes.length}\n`, 'every stdin byte arrived');
    r = await ok(t, { credential: 'cat', command: 'cat', stdin: '' });
    t.match(r, { exit_code: 0, stdout: '', encoding: 'utf8' }, 'an empty stdin: end of input at once');
    r = await ok(t, { credential: 'cat', command: 'wc -c' });
    t.equal(r.stdout, '0\n', 'no stdin: end of input at once');
  });

  await t.test('output over max_output is truncated; the exit status still comes back', async (t) => {
    let r = await ok(t, { credential: 'k-ed25519', command: BIG });
    t.equal(r.truncated, true);
    t.equal(r.exit_code, 0, 'the command ran to its end');
    t.ok(r.stdout.length <= CAP, `${r.stdout.length} bytes of stdout, at most ${CAP}`);
    t.ok(r.stdout.length >= CAP / 2, 'most of the cap is used');
    t.match(r.stdout, /^a+$/);
    const outcome = auditEntries(s).find((e) => e.seq === r.audit_seq);
    t.match(
      outcome,
      { kind: 'ssh_outcome', bytes: 1_000_000, truncated: true, exit_code: 0 },
      'the journal counts every byte that arrived',
    );
    r = await ok(t, { credential: 'k-ed25519', command: BIG_EXIT });
    t.equal(r.truncated, true);
    t.equal(r.exit_code, 5);
    // NUL bytes: base64 (mostly control characters), so counted decoded.
    t.equal(r.encoding, 'base64', 'output of NUL bytes comes back as base64');
    const bytes = (v: string): number => Buffer.from(v, r.encoding as BufferEncoding).length;
    t.ok(bytes(r.stdout) + bytes(r.stderr) <= CAP, 'stdout and stderr together at most the cap');
  });

  await t.test('connection reuse; lock closes connections', async (t) => {
    const added = addSsh(s, cred({ name: 'reuse' }), sshd.keys.ed25519.path);
    t.equal(added.code, 0, added.stderr);
    const before = sshd.connections();
    for (let i = 0; i < 10; i++) {
      const r = await ok(t, { credential: 'reuse', command: 'echo hi' });
      t.equal(r.stdout, 'hi\n');
    }
    t.equal(sshd.connections(), before + 1, 'ten commands, one connection');
    t.ok(
      sshd.processesOf(sshd.user).some((p) => p.endsWith('@notty')),
      'the connection is kept open',
    );
    t.equal(cli(s.h, ['lock']).code, 0);
    t.ok(
      await eventually(() => !sshd.processesOf(sshd.user).some((p) => p.endsWith('@notty')), 5000),
      'lock closed every connection',
    );
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    t.equal(u.code, 0, u.stderr);
    const r = await ok(t, { credential: 'reuse', command: 'echo hi' });
    t.equal(r.stdout, 'hi\n');
    t.equal(sshd.connections(), before + 2, 'after unlock a new connection');
  });

  await t.test('the password is redacted from command output', async (t) => {
    let r = await ok(t, { credential: 'pw', command: 'cat secret/pw' });
    t.equal(r.exit_code, 0);
    t.equal(r.stdout, '[REDACTED:pw]\n');
    t.equal(r.redactions, 1);
    t.same(exposures(JSON.stringify(r), password), []);
    r = await ok(t, { credential: 'pw', command: 'base64 secret/pw' });
    t.equal(r.exit_code, 0);
    t.ok(r.redactions >= 1, `${r.redactions} redactions`);
    t.match(r.stdout, '[REDACTED:pw]');
    t.same(exposures(JSON.stringify(r), password), []);
  });

  // A host may keep a value it was sent and print it later, and a replaced
  // password may still open the host until someone changes it there: the
  // values a `cred update` or `cred rm` replaced are searched for until the
  // lock, in output from the same host, marked with their credential's name.
  await t.test('a replaced or removed password the host still prints is redacted', async (t) => {
    const former = `Former-${randomBytes(12).toString('hex')}`;
    const removed = `Removed-${randomBytes(12).toString('hex')}`;
    place('former', (p) => writeFileSync(p, `kept: ${former}\n`));
    place('removed', (p) => writeFileSync(p, removed + '\n'));
    const added = addSsh(s, cred({ name: 'rotated', auth: 'password' }), s.h.file('rotated.secret', former + '\n'));
    t.equal(added.code, 0, added.stderr);
    const def = s.h.file('rotated.toml', sshDefinition(cred({ name: 'rotated', auth: 'password' })));
    const newSecret = s.h.file('rotated.new', password + '\n');
    const update = cli(s.h, [
      'cred',
      'update',
      'rotated',
      '--file',
      def,
      '--secret-file',
      newSecret,
      '--passphrase-file',
      s.h.passFile,
    ]);
    t.equal(update.code, 0, update.stderr);
    const gone = addSsh(s, cred({ name: 'gone', auth: 'password' }), s.h.file('gone.secret', removed + '\n'));
    t.equal(gone.code, 0, gone.stderr);
    const rm = cli(s.h, ['cred', 'rm', 'gone', '--passphrase-file', s.h.passFile]);
    t.equal(rm.code, 0, rm.stderr);
    texts.push(
      added.stdout,
      added.stderr,
      update.stdout,
      update.stderr,
      gone.stdout,
      gone.stderr,
      rm.stdout,
      rm.stderr,
    );

    let r = await ok(t, { credential: 'rotated', command: 'cat secret/former' });
    t.equal(r.stdout, 'kept: [REDACTED:rotated]\n', 'the value the update replaced');
    t.equal(r.redactions, 1);
    r = await ok(t, { credential: 'rotated', command: 'cat secret/pw' });
    t.equal(r.stdout, '[REDACTED:rotated]\n', 'and the value in force');
    r = await ok(t, { credential: 'pw', command: 'base64 secret/removed' });
    t.match(r.stdout, '[REDACTED:gone]', "a removed credential's value, through another credential for the host");
    t.same(exposures(texts.join('\n'), former), [], 'no form of the replaced password');
    t.same(exposures(texts.join('\n'), removed), [], 'no form of the removed password');
    t.same(exposures(s.d.logs(), former), []);
    t.same(exposures(s.d.logs(), removed), []);
    t.same(exposures(journalBytes(s.h.home), former), [], 'nor the journal');
    t.same(exposures(journalBytes(s.h.home), removed), [], 'nor the journal');
  });

  await t.test('private keys printed by a command are redacted', async (t) => {
    for (const k of KEY_CREDS) {
      if (k.key === 'encrypted') continue; // its file holds the key encrypted
      const original = sshd.keys[k.key].privateKey;
      const r = await ok(t, { credential: k.name, command: `cat secret/${k.name}` });
      t.equal(r.exit_code, 0);
      t.ok(r.redactions >= 1, `${k.name}: ${r.redactions} redactions`);
      t.match(r.stdout, `[REDACTED:${k.name}]`);
      t.same(
        keyLeaks(r.stdout, privateParts(original)),
        [],
        `${k.name} (${k.key}): no piece of a private component comes back`,
      );
    }
  });

  await t.test('the journal: intent and outcome', async (t) => {
    const stdin = 'to be counted\n';
    const r = await ok(t, { credential: 'cat', command: 'wc -c', stdin });
    const entries = auditEntries(s);
    const outcome = entries.find((e) => e.seq === r.audit_seq);
    t.match(outcome, {
      kind: 'ssh_outcome',
      exit_code: 0,
      signal: null,
      bytes: 3,
      truncated: false,
      redactions: 0,
      output_sha256: createHash('sha256').update('14\n').digest('hex'),
    });
    t.type(outcome?.['duration_ms'], 'number');
    const intent = entries.find((e) => e.seq === outcome?.['intent_seq']);
    t.match(intent, {
      kind: 'ssh_intent',
      credential: 'cat',
      host: '127.0.0.1',
      address: '127.0.0.1',
      port: sshd.port,
      user: sshd.user,
      command: 'wc -c',
      host_key: sshd.hostKeyFingerprint,
      stdin_bytes: stdin.length,
      stdin_sha256: createHash('sha256').update(stdin).digest('hex'),
    });
    t.ok((intent?.seq ?? Infinity) < r.audit_seq, 'the intent comes first');
    // A signal and stderr: both in the outcome.
    const k = await ok(t, { credential: 'k-ecdsa', command: 'kill -TERM $$' });
    t.match(
      auditEntries(s).find((e) => e.seq === k.audit_seq),
      { kind: 'ssh_outcome', exit_code: null, signal: 'SIGTERM', bytes: 0 },
    );
  });

  await t.test('postern request ssh', async (t) => {
    let r = await cliAsync(s.h, ['request', 'ssh', '--credential', 'k-ed25519', '--command', 'id -un']);
    texts.push(r.stdout, r.stderr);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, `${sshd.user}\n`, 'the remote stdout alone');
    r = await cliAsync(s.h, ['request', 'ssh', '--credential', 'k-ed25519', '--command', "sh -c 'exit 3'"]);
    texts.push(r.stdout, r.stderr);
    t.equal(r.code, 3, "the remote command's exit code, as ssh ends");
    t.equal(r.stdout, '');
    r = await cliAsync(
      s.h,
      ['request', 'ssh', '--credential', 'cat', '--command', 'cat', '--stdin-file', '-'],
      'piped in\n',
    );
    texts.push(r.stdout, r.stderr);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, 'piped in\n');
    r = await cliAsync(s.h, ['request', 'ssh', '--credential', 'k-ed25519', '--command', 'echo hi; id', '--json']);
    texts.push(r.stdout, r.stderr);
    t.equal(r.code, 255, 'postern refused: 255, as ssh');
    t.match(r.stderr, /^postern: denied_policy: /);
    let doc: unknown = null;
    try {
      doc = JSON.parse(r.stdout);
    } catch {
      doc = null;
    }
    t.match(
      doc,
      { error: { code: 'denied_policy', audit_seq: Number } },
      `--json prints the refusal as one JSON document:\n${r.stdout}`,
    );
  });

  await t.test('no secret in any reply, the daemon log or the journal', async (t) => {
    // The encrypted key's private part, from a copy ssh-keygen decrypts.
    const tmp = mkdtempSync(join(tmpdir(), 'pt-enc-'));
    t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
    const copy = join(tmp, 'key');
    copyFileSync(sshd.keys.encrypted.path, copy);
    execFileSync('ssh-keygen', ['-q', '-p', '-P', keyPassphrase, '-N', '', '-f', copy], { stdio: 'ignore' });
    const keyTexts = KEY_CREDS.map((k) => ({
      name: k.name,
      text: k.key === 'encrypted' ? readFileSync(copy, 'utf8') : sshd.keys[k.key].privateKey,
    }));
    // The files keep events encrypted: the decrypted entries are searched too.
    const places: [string, string][] = [
      ['replies', texts.join('\n')],
      ['daemon log', s.d.logs()],
      ['journal files', journalBytes(s.h.home).toString('latin1')],
      ['decrypted journal', await journalText(s.h)],
    ];
    for (const [where, text] of places) {
      t.same(exposures(text, password), [], `${where}: no form of the password`);
      t.same(exposures(text, keyPassphrase), [], `${where}: no form of the encrypted key's passphrase`);
      t.same(exposures(text, wrongKeyPassphrase), [], `${where}: no form of the refused key passphrase`);
      for (const k of keyTexts) t.same(keyLeaks(text, privateParts(k.text)), [], `${where}: no piece of ${k.name}`);
    }
    t.ok(texts.length > 30, `${texts.length} replies searched`);
  });
});
