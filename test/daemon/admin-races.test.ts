// Admin operations racing each other on admin.sock, as two terminals (or a
// human and a script) would send them. What each reply says must be true
// afterwards: a `lock` that answered must leave the daemon locked; a
// `passwd` that answered "changed" must leave the vault opening with the
// passphrase it set; a `cred add` that answered must be in the vault, one
// that was refused must not be. Nothing stored may be lost.
import t from 'tap';
import type { Test } from 'tap';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon, PASSPHRASE, Home } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';

const DEF = (name: string): Record<string, unknown> => ({
  name,
  kind: 'http',
  inject: { header: 'Authorization', template: 'Bearer {secret}' },
  allow: [{ host: 'api.example.test' }],
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function setup(t: Test): Promise<{ h: Home; admin: () => Promise<TestAdmin> }> {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  if (init(h).code !== 0) throw new Error('init failed');
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const admins: TestAdmin[] = [];
  t.teardown(() => admins.forEach((a) => a.close()));
  return {
    h,
    admin: async () => {
      const a = await TestAdmin.connect(join(h.home, 'admin.sock'));
      admins.push(a);
      return a;
    },
  };
}

async function isLocked(a: TestAdmin): Promise<boolean> {
  const r = await a.request('status');
  return (r['result'] as { locked: boolean }).locked;
}

t.test('lock sent while an unlock derives its key: the daemon ends locked', async (t) => {
  const { admin } = await setup(t);
  const a = await admin();
  const b = await admin();
  for (const delay of [30, 80, 120]) {
    t.equal(await isLocked(a), true, `(delay ${delay}) starts locked`);
    const unlocking = a.request('unlock', {}, [Buffer.from(PASSPHRASE)]);
    await sleep(delay);
    const lockReply = await b.request('lock');
    t.equal(lockReply['ok'], true, 'lock answered ok');
    const unlockReply = await unlocking;
    const locked = await isLocked(b);
    t.equal(
      locked,
      true,
      `(delay ${delay}) after \`lock\` answered ${JSON.stringify(lockReply['result'])}, the daemon is locked ` +
        `(unlock answered ${JSON.stringify(unlockReply['ok'])})`,
    );
    await b.request('lock');
    await sleep(300);
  }
});

t.test('two passwd at once: each one that answered ok leaves a working passphrase', async (t) => {
  const { h, admin } = await setup(t);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const a = await admin();
  const b = await admin();
  const X = 'first new passphrase XXXX';
  const Y = 'second new passphrase YYYY';
  const [ra, rb] = await Promise.all([
    a.request('passwd', {}, [Buffer.from(PASSPHRASE), Buffer.from(X)]),
    b.request('passwd', {}, [Buffer.from(PASSPHRASE), Buffer.from(Y)]),
  ]);
  t.comment(`passwd X: ${JSON.stringify(ra)}; passwd Y: ${JSON.stringify(rb)}`);
  await a.request('lock');
  for (const [reply, pass, label] of [
    [ra, X, 'X'],
    [rb, Y, 'Y'],
  ] as const) {
    if (reply['ok'] !== true) continue;
    const u = cli(h, ['unlock', '--passphrase-file', h.file(`p${label}`, pass + '\n')]);
    t.equal(u.code, 0, `passwd to ${label} answered ok, so ${label} unlocks the vault (stderr: ${u.stderr.trim()})`);
    await a.request('lock');
  }
});

t.test('passwd and cred add at once: the credential survives under the new passphrase', async (t) => {
  const { h, admin } = await setup(t);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const a = await admin();
  const b = await admin();
  const NEW = 'the brand new passphrase';
  const [rp, rc] = await Promise.all([
    a.request('passwd', {}, [Buffer.from(PASSPHRASE), Buffer.from(NEW)]),
    b.request('cred.add', { definition: DEF('raced') }, [Buffer.from(PASSPHRASE), Buffer.from('tok_raced_0123456789')]),
  ]);
  t.comment(`passwd: ${JSON.stringify(rp)}; cred.add: ${JSON.stringify(rc)}`);
  t.equal(rp['ok'], true, 'passwd done');
  await a.request('lock');
  const u = cli(h, ['unlock', '--passphrase-file', h.file('new', NEW + '\n')]);
  t.equal(u.code, 0, u.stderr);
  const list = cli(h, ['cred', 'list', '--json']);
  const names = (JSON.parse(list.stdout).credentials as { name: string }[]).map((c) => c.name);
  t.equal(names.includes('raced'), rc['ok'] === true, `cred add answered ${rc['ok']}; stored: ${names.join(',')}`);
});

t.test('lock during cred add: what the reply says is what the vault holds', async (t) => {
  const { h, admin } = await setup(t);
  const a = await admin();
  const b = await admin();
  for (const delay of [0, 100, 200, 300]) {
    t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
    const name = `c${delay}`;
    const adding = a.request('cred.add', { definition: DEF(name) }, [
      Buffer.from(PASSPHRASE),
      Buffer.from('tok_0123456789abcdef'),
    ]);
    await sleep(delay);
    await b.request('lock');
    const r = await adding;
    t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
    const list = cli(h, ['cred', 'list', '--json']);
    const names = (JSON.parse(list.stdout).credentials as { name: string }[]).map((c) => c.name);
    t.equal(names.includes(name), r['ok'] === true, `(delay ${delay}) reply ${JSON.stringify(r)}; stored: ${names}`);
    if (r['ok'] !== true)
      t.not(
        (r['error'] as { code: string }).code,
        'wrong_passphrase',
        `(delay ${delay}) the passphrase was right: a refusal caused by the lock must not say wrong_passphrase (nor count as a failed guess)`,
      );
    await b.request('lock');
  }
  const v = cli(h, ['audit', 'verify', '--allow-unsigned-tail']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});
