// `postern audit rotate-key` against the real daemon: the new key is
// printed, the journal verifies pinned to the old key and to the new one,
// the daemon signs with the new key after a restart, the secret half never
// appears anywhere. A rotation cut short after each of its durable steps
// (made here with the daemon's own vault and journal code while the daemon
// is stopped) is completed or abandoned at the next unlock; a journal whose
// key in force is not in the vault keeps the daemon locked.
import t, { Test } from 'tap';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Home, PASSPHRASE, Result, cli, init, makeHome, startDaemon, Daemon } from '../helpers/postern';
import { Journal } from '../../daemon/audit/journal';
import { unlockVaultFile, UnlockedVault } from '../../daemon/vault/unlocked-vault';
import { parseHeader, readVaultFile } from '../../shared/vault-format';
import { formatHead } from '../../shared/audit-format';
import { ed25519Keypair, sha256hex, sodiumReady } from '../../shared/crypto';

const SEGMENT = 64 * 1024 * 1024;

interface Installed {
  h: Home;
  key0: string;
  daemon: Daemon | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

async function installed(t: Test): Promise<Installed> {
  const h = makeHome();
  const r = init(h, ['--json']);
  if (r.code !== 0) throw new Error(`init failed: ${r.stderr}`);
  const inst: Installed = {
    h,
    key0: (JSON.parse(r.stdout) as { audit_public_key: string }).audit_public_key,
    daemon: null,
    async start() {
      inst.daemon = await startDaemon(h);
    },
    async stop() {
      await inst.daemon?.stop();
      inst.daemon = null;
    },
  };
  t.teardown(async () => {
    await inst.stop();
    h.cleanup();
  });
  return inst;
}

const run = (i: Installed, args: string[]): Result => cli(i.h, args);
const pass = (i: Installed): string[] => ['--passphrase-file', i.h.passFile];
const verify = (
  i: Installed,
  ...args: string[]
): {
  code: number | null;
  report: {
    ok: boolean;
    signingKeys: { key: string; since: number }[];
    problem: { kind: string; seq: number | null } | null;
  };
} => {
  const r = run(i, ['audit', 'verify', '--json', ...args]);
  return { code: r.code, report: JSON.parse(r.stdout) };
};
const vaultPath = (i: Installed): string => join(i.h.home, 'vault');
const journalPath = (i: Installed): string => join(i.h.home, 'audit.log');

async function openVault(i: Installed): Promise<UnlockedVault> {
  const file = readVaultFile(vaultPath(i));
  return unlockVaultFile(vaultPath(i), file, parseHeader(file).header, Buffer.from(PASSPHRASE));
}

// Every byte postern wrote under the home, as text (the journal, the logs' copies are checked apart).
function homeBytes(i: Installed): string {
  return readdirSync(i.h.home)
    .filter((n) => n.startsWith('audit.log'))
    .map((n) => readFileSync(join(i.h.home, n), 'latin1'))
    .join('\n');
}

function events(i: Installed): Record<string, unknown>[] {
  const r = run(i, ['audit', 'show', '--json', ...pass(i)]);
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

t.test(
  'rotate-key: a new key, vouched for by the old one; both pins verify; the new key survives a restart',
  async (t) => {
    const i = await installed(t);
    await i.start();
    t.equal(run(i, ['unlock', ...pass(i)]).code, 0);
    const outputs: string[] = [];

    const human = run(i, ['audit', 'rotate-key', ...pass(i)]);
    outputs.push(human.stdout, human.stderr);
    t.equal(human.code, 0, human.stderr);
    const key1 = /^new audit public key: (\S+)$/m.exec(human.stdout)?.[1] ?? '';
    t.match(key1, /^[A-Za-z0-9+/]{43}=$/, 'the new public key is printed');
    t.not(key1, i.key0);
    t.match(human.stdout, new RegExp(`vouched for by the previous key \\(${i.key0.replace(/[+/]/g, '\\$&')}\\)`));

    const json = run(i, ['audit', 'rotate-key', '--json', ...pass(i)]);
    outputs.push(json.stdout, json.stderr);
    t.equal(json.code, 0, json.stderr);
    const r2 = JSON.parse(json.stdout) as {
      audit_public_key: string;
      previous_audit_public_key: string;
      signer_seq: number;
      checkpoint: string;
    };
    t.equal(r2.previous_audit_public_key, key1, 'the second rotation replaces the first new key');
    const key2 = r2.audit_public_key;
    t.match(
      r2.checkpoint,
      new RegExp(`^${r2.signer_seq + 1}:[0-9a-f]{64}$`),
      'the vouching checkpoint follows the signer entry',
    );

    t.equal(run(i, ['lock']).code, 0);
    for (const pin of [i.key0, key1, key2]) {
      const v = verify(i, '--pubkey', pin);
      t.equal(v.code, 0, `pinned to ${pin}: ${JSON.stringify(v.report.problem)}`);
    }
    const v = verify(i);
    t.same(
      v.report.signingKeys.map((k) => k.key),
      [i.key0, key1, key2],
      'the keys in the order they took over',
    );
    t.equal(v.report.signingKeys[2]?.since, r2.signer_seq);
    const other = Buffer.alloc(32, 5).toString('base64');
    t.match(
      verify(i, '--pubkey', other),
      { code: 1, report: { problem: { kind: 'wrong_key', seq: 1 } } },
      'an unrelated pin still fails',
    );

    // A restart: the vault's current key is the newest; checkpoints go on under it.
    await i.stop();
    await i.start();
    t.equal(run(i, ['unlock', ...pass(i)]).code, 0, 'unlock after the restart');
    t.equal(run(i, ['lock']).code, 0);
    const after = verify(i, '--pubkey', key2);
    t.equal(after.code, 0, JSON.stringify(after.report.problem));
    const rotations = events(i).filter((e) => e['kind'] === 'audit_key_rotation');
    t.same(
      rotations.map((e) => e['step']),
      ['prepared', 'completed', 'prepared', 'completed'],
      'each step journaled',
    );

    // The secret halves: in the vault only.
    const vault = await openVault(i);
    const secret = await vault.withAuditSigningKey(async (k) => Buffer.from(k.subarray(0, 32)));
    vault.wipe();
    t.equal(Buffer.from(secret).length, 32);
    const all = [...outputs, homeBytes(i), i.daemon?.logs() ?? ''].join('\n');
    for (const form of [
      secret.toString('hex'),
      secret.toString('base64'),
      secret.toString('base64').slice(0, 40),
      secret.toString('latin1'),
    ]) {
      t.notOk(all.includes(form), 'the new secret key is in no output, log or journal');
    }
  },
);

t.test('rotate-key refusals: locked, wrong passphrase, no daemon', async (t) => {
  const i = await installed(t);
  const none = run(i, ['audit', 'rotate-key', ...pass(i)]);
  t.equal(none.code, 3, 'no daemon: exit 3');
  t.match(
    none.stderr,
    /^postern: the postern daemon is not reachable at .*admin\.sock.*start it with `postern daemon`\n$/,
  );
  await i.start();
  const locked = run(i, ['audit', 'rotate-key', ...pass(i)]);
  t.equal(locked.code, 1);
  t.match(locked.stderr, /^postern: the vault is locked .*`postern unlock`\n$/);
  t.equal(run(i, ['unlock', ...pass(i)]).code, 0);
  const wrong = cli(i.h, [
    'audit',
    'rotate-key',
    '--passphrase-file',
    i.h.file('wrong', 'not the passphrase at all\n'),
  ]);
  t.equal(wrong.code, 1);
  t.match(wrong.stderr, /^postern: wrong passphrase /);
  for (const r of [none, locked, wrong]) t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  t.equal(run(i, ['lock']).code, 0);
  const v = verify(i, '--pubkey', i.key0);
  t.equal(v.code, 0, 'nothing changed: the original key still signs');
  t.equal(v.report.signingKeys.length, 1);
});

// The first durable step of a rotation (vault holds the new key beside the
// old one, the journal says so), done as the daemon does it; then, when
// `journaled`, the second (the journal's signer entry and vouching checkpoint).
async function cutShort(i: Installed, journaled: boolean): Promise<string> {
  await sodiumReady();
  const fresh = ed25519Keypair();
  const key = fresh.publicKey.toString('base64');
  const j = await Journal.open({ path: journalPath(i), segmentSize: SEGMENT });
  const vault = await openVault(i);
  try {
    await vault.withAuditSigningKey((k) => j.setSigningKey(k));
    const head = await j.append({
      kind: 'audit_key_rotation',
      step: 'prepared',
      sign_pub: key,
      generation: vault.generation + 1,
    });
    vault.commit(formatHead(head.seq, head.hash), () => undefined, {
      signing: { kind: 'prepare', secret: fresh.privateKey, public: key },
    });
    await j.appendVault(vault.generation, sha256hex(readFileSync(vaultPath(i))));
    if (journaled) await j.changeSigner(fresh.privateKey);
  } finally {
    vault.wipe();
    await j.close();
  }
  return key;
}

// A daemon that was unlocked once, stopped, its rotation cut short, started
// again, unlocked (which completes or abandons the rotation), locked.
async function restartedAfterCut(t: Test, i: Installed, journaled: boolean): Promise<string> {
  await i.start();
  t.equal(run(i, ['unlock', ...pass(i)]).code, 0);
  await i.stop();
  const key = await cutShort(i, journaled);
  await i.start();
  const u = run(i, ['unlock', ...pass(i)]);
  t.equal(u.code, 0, u.stderr);
  t.equal(run(i, ['lock']).code, 0);
  return key;
}

t.test('a rotation cut short before the journal took the new key: abandoned at unlock', async (t) => {
  const i = await installed(t);
  const key1 = await restartedAfterCut(t, i, false);
  const v = verify(i, '--pubkey', i.key0);
  t.equal(v.code, 0, JSON.stringify(v.report.problem));
  t.same(
    v.report.signingKeys.map((k) => k.key),
    [i.key0],
    'the journal never changed its key',
  );
  t.match(
    verify(i, '--pubkey', key1),
    { code: 1, report: { problem: { kind: 'wrong_key', seq: 1 } } },
    'the abandoned key vouches for nothing',
  );
  const vault = await openVault(i);
  t.equal(vault.auditNextPublicKey, null, 'the vault forgot the abandoned key');
  t.equal(vault.auditPublicKey, i.key0);
  vault.wipe();
  t.same(
    events(i)
      .filter((e) => e['kind'] === 'audit_key_rotation')
      .map((e) => e['step']),
    ['prepared', 'abandoned at unlock'],
  );
  // A later rotation works as usual.
  t.equal(run(i, ['unlock', ...pass(i)]).code, 0);
  t.equal(run(i, ['audit', 'rotate-key', ...pass(i)]).code, 0);
});

t.test('a rotation cut short after the journal took the new key: completed at unlock', async (t) => {
  const i = await installed(t);
  const key1 = await restartedAfterCut(t, i, true);
  for (const pin of [i.key0, key1]) {
    const v = verify(i, '--pubkey', pin);
    t.equal(v.code, 0, `pinned to ${pin}: ${JSON.stringify(v.report.problem)}`);
  }
  const vault = await openVault(i);
  t.equal(vault.auditPublicKey, key1, 'the new key is the current one');
  t.equal(vault.auditNextPublicKey, null);
  vault.wipe();
  t.same(
    events(i)
      .filter((e) => e['kind'] === 'audit_key_rotation')
      .map((e) => e['step']),
    ['prepared', 'completed at unlock'],
  );
  // And after another restart, the vault's current key is the journal's.
  await i.stop();
  await i.start();
  t.equal(run(i, ['unlock', ...pass(i)]).code, 0);
});

t.test('a journal whose key in force is not in the vault: unlock refused, the daemon stays locked', async (t) => {
  const i = await installed(t);
  await i.start();
  t.equal(run(i, ['unlock', ...pass(i)]).code, 0);
  await i.stop();
  // Someone changed the journal's key without the vault knowing it.
  await sodiumReady();
  const stranger = ed25519Keypair();
  const j = await Journal.open({ path: journalPath(i), segmentSize: SEGMENT });
  const vault = await openVault(i);
  await vault.withAuditSigningKey((k) => j.setSigningKey(k));
  vault.wipe();
  await j.changeSigner(stranger.privateKey);
  await j.close();
  await i.start();
  const u = run(i, ['unlock', ...pass(i)]);
  t.equal(u.code, 1);
  t.match(
    u.stderr,
    /^postern: the vault's audit signing key is not the key in force in .*audit\.log \(/,
    'the refusal says what does not match',
  );
  t.match(u.stderr, stranger.publicKey.toString('base64'), 'the key the journal expects is named');
  const status = JSON.parse(run(i, ['status', '--json']).stdout) as { locked: boolean };
  t.equal(status.locked, true, 'still locked');
});
