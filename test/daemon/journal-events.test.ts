// What the journal records of the daemon's life (SPEC §9, docs/audit-format.md
// "Events"): start and stop, unlock refused and done, lock and auto-lock,
// config approval, credential add/update/remove with definition hashes
// (never a secret), passphrase change, and each vault write with its
// generation and hash, in the order they happened. And: once the journal
// file is replaced behind the daemon, nothing more is recorded into the
// orphaned file — every action that needs a record is refused.
import t from 'tap';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRequest, cli, eventually, init, makeHome, startDaemon } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';

type Entry = Record<string, unknown> & { seq: number; type: string; kind?: string };

function show(h: { env: NodeJS.ProcessEnv }, passFile: string): Entry[] {
  const r = cli(h, ['audit', 'show', '--json', '--passphrase-file', passFile]);
  if (r.code !== 0) throw new Error(`audit show: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Entry);
}

const HEX64 = /^[0-9a-f]{64}$/;
const HASH = /^sha256:[0-9a-f]{64}$/;

function definition(name: string, path: string): string {
  return `name = "${name}"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\npaths = ["${path}"]\n`;
}

t.test('the life of a daemon, entry by entry', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const secret = makeCanary('EVENTS');
  const newSecret = makeCanary('EVENTS2');
  const newPass = h.file('new-pass', 'another passphrase, long enough\n');
  const outputs: string[] = [];
  const run = (args: string[]): number | null => {
    const r = cli(h, args);
    outputs.push(r.stdout, r.stderr);
    return r.code;
  };

  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(
    run(['unlock', '--passphrase-file', h.file('wrong', 'not the passphrase at all\n')]),
    1,
    'a wrong passphrase',
  );
  t.equal(run(['unlock', '--passphrase-file', h.passFile]), 0, 'unlocked');
  t.equal(
    run([
      'cred',
      'add',
      '--file',
      h.file('a.toml', definition('api', '/v1/*')),
      '--secret-file',
      h.file('a.secret', secret),
      '--passphrase-file',
      h.passFile,
    ]),
    0,
    'cred add',
  );
  t.equal(
    run([
      'cred',
      'update',
      'api',
      '--file',
      h.file('b.toml', definition('api', '/v2/*')),
      '--secret-file',
      h.file('b.secret', newSecret),
      '--passphrase-file',
      h.passFile,
    ]),
    0,
    'cred update',
  );
  t.equal(run(['cred', 'rm', 'api', '--passphrase-file', h.passFile]), 0, 'cred rm');
  t.equal(run(['passwd', '--passphrase-file', h.passFile, '--new-passphrase-file', newPass]), 0, 'passwd');
  t.equal(run(['lock']), 0, 'lock');
  // A config change (auto_lock = 2s), approved, taken at the next unlock.
  const cfg = join(h.home, 'config.toml');
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace(/^\[daemon\]$/m, '[daemon]\nauto_lock = "2s"'));
  t.equal(run(['config', 'approve', '--passphrase-file', newPass]), 0, 'the changed config approved');
  t.equal(run(['unlock', '--passphrase-file', newPass]), 0, 'unlocked with the new passphrase');
  // auto_lock = 2s: no agent request, so the daemon locks itself.
  t.ok(await eventually(() => JSON.parse(cli(h, ['status', '--json']).stdout).locked === true, 10_000), 'auto-locked');
  t.equal(await d.stop(), 0, 'stopped');

  const all = show(h, newPass);
  // Events by kind, vault writes as "vault"; genesis, keys and checkpoints aside.
  const events = all.filter((e) => e.type === 'event' || e.type === 'vault');
  const kinds = events.map((e) => (e.type === 'vault' ? 'vault' : e.kind));
  t.same(
    kinds,
    [
      'daemon_start',
      'passphrase_refused',
      'unlock',
      'cred_add',
      'vault',
      'cred_update',
      'vault',
      'cred_rm',
      'vault',
      'passwd',
      'vault',
      'lock',
      'config_approve',
      'vault',
      'unlock',
      'lock',
      'daemon_stop',
    ],
    `every event, in order: ${JSON.stringify(kinds)}`,
  );
  const byKind = (k: string): Entry[] => events.filter((e) => (e.type === 'vault' ? 'vault' : e.kind) === k);

  const [start] = byKind('daemon_start');
  t.match(start, { pid: d.proc.pid, config_hash: HASH });
  t.match(byKind('passphrase_refused')[0], { during: 'unlock', consecutive: 1 }, 'the wrong passphrase');
  const unlocks = byKind('unlock');
  t.match(unlocks[0], { outcome: 'ok', generation: 1 });
  t.match(unlocks[1], { outcome: 'ok', generation: 6 }, 'the second unlock opens the vault the approval wrote');

  const [add] = byKind('cred_add');
  const [update] = byKind('cred_update');
  const [rm] = byKind('cred_rm');
  t.match(add, { credential: 'api', credential_kind: 'http', definition_hash: HASH, generation: 2 });
  t.match(update, {
    credential: 'api',
    definition_hash: HASH,
    previous_definition_hash: add!['definition_hash'],
    secret_replaced: true,
    generation: 3,
  });
  t.not(update!['definition_hash'], add!['definition_hash'], 'the new definition has another hash');
  t.match(
    rm,
    { credential: 'api', credential_kind: 'http', definition_hash: update!['definition_hash'], generation: 4 },
    'the removal names the definition it destroyed',
  );
  t.match(byKind('passwd')[0], { generation: 5 });
  t.match(byKind('config_approve')[0], { config_hash: HASH, generation: 6 });
  t.not(byKind('config_approve')[0]!['config_hash'], start!['config_hash'], 'the approved config is the changed one');

  // Each vault write is announced by its event, then recorded with the
  // generation the event named and the file's hash.
  for (const v of byKind('vault')) {
    const before = events[events.indexOf(v) - 1]!;
    t.equal(
      v['generation'],
      before['generation'],
      `vault entry ${v.seq} records the generation its event (${String(before.kind)}) announced`,
    );
    t.match(v, { vault_hash: HEX64 });
  }
  t.same(
    byKind('vault').map((v) => v['generation']),
    [2, 3, 4, 5, 6],
    'one write per change, generations in order',
  );

  const locks = byKind('lock');
  t.equal(locks[0]!['reason'], 'locked by `postern lock`');
  t.match(locks[1]!['reason'], /^auto_lock: no agent request for 2000 ms$/, 'the second lock is the auto-lock');
  t.equal(byKind('daemon_stop')[0]!['reason'], 'SIGTERM');
  // A checkpoint right after each lock and at shutdown.
  for (const l of [...locks, ...byKind('daemon_stop')]) {
    t.match(
      all.find((e) => e.seq === l.seq + 1),
      { type: 'checkpoint', head_seq: l.seq },
      `a checkpoint right after entry ${l.seq} (${String(l.kind)})`,
    );
  }
  t.equal(all[all.length - 1]!.type, 'checkpoint', 'the journal ends with a checkpoint');

  const text = JSON.stringify(all);
  t.same(findCanary(text, secret), [], 'the first secret is in no decrypted entry');
  t.same(findCanary(text, newSecret), [], 'nor the second');
  t.same(findCanary(outputs.join('\n'), secret), [], 'nor in any CLI output');
  t.notMatch(text, /another passphrase|correct horse/, 'no passphrase in the journal');
  t.equal(cli(h, ['audit', 'verify']).code, 0, 'the journal verifies');
});

t.test('a journal replaced behind the daemon takes no more entries', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0, 'unlocked');
  const log = join(h.home, 'audit.log');

  // A copy renamed over it: same bytes, another file. The head to keep is
  // the copy's: an entry the daemon wrote just before (a checkpoint after
  // the unlock, on a loaded machine) is in it.
  copyFileSync(log, join(h.home, 'audit.copy'));
  renameSync(join(h.home, 'audit.copy'), log);
  const copied = readFileSync(log);
  const headBefore = cli(h, ['audit', 'head', '--log', log]).stdout.trim();
  t.match(headBefore, /^\d+:[0-9a-f]{64}$/, 'the copy has a head');

  const r = cli(h, [
    'cred',
    'add',
    '--file',
    h.file('a.toml', definition('api', '/v1/*')),
    '--secret-file',
    h.file('a.secret', 'a-secret-value-0123456789'),
    '--passphrase-file',
    h.passFile,
    '--json',
  ]);
  t.equal(r.code, 1, 'cred add is refused');
  t.equal(JSON.parse(r.stdout).error.code, 'audit_unavailable');
  t.match(r.stderr, /replaced by another file/, `says why: ${r.stderr}`);
  const list = JSON.parse(cli(h, ['cred', 'list', '--json']).stdout) as unknown[] | { credentials: unknown[] };
  t.same(Array.isArray(list) ? list : list.credentials, [], 'no credential was stored');

  const p = cli(h, [
    'passwd',
    '--passphrase-file',
    h.passFile,
    '--new-passphrase-file',
    h.file('np', 'another passphrase, long enough\n'),
  ]);
  t.equal(p.code, 1, 'passwd is refused too');
  t.match(p.stderr, /replaced by another file/);
  t.equal(cli(h, ['lock']).code, 0, 'a lock still happens (its record is best effort)');
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 1, 'an unlock does not');

  const health = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
  t.same(health.json, { locked: true });
  t.equal(JSON.parse(cli(h, ['status', '--json']).stdout).audit_head, headBefore, 'the head did not move');
  t.ok(readFileSync(log).equals(copied), 'nothing was written to the file now at the path');
});
