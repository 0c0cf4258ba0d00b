// Checkpoints while locked (SPEC §9): a daemon that holds the signing key
// signs a checkpoint within a second of any entry written while locked, so
// `postern lock` followed by refused requests still leaves a journal that
// `postern audit verify` accepts without --allow-unsigned-tail. A daemon
// never unlocked since it started has no signing key: its entries stay an
// unsigned tail, which verify reports as such.
import t from 'tap';
import { join } from 'node:path';
import { agentRequest, cli, eventually, init, makeHome, startDaemon } from '../helpers/postern';

interface Report {
  ok: boolean;
  problem?: { kind?: string } | null;
}

function verify(h: Parameters<typeof cli>[0], extra: string[] = []): { code: number | null; report: Report } {
  const r = cli(h, ['audit', 'verify', '--json', ...extra]);
  return { code: r.code, report: JSON.parse(r.stdout || '{}') as Report };
}

t.test('lock, then refused requests: the journal still verifies', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const ini = init(h, ['--json']);
  if (ini.code !== 0) throw new Error(`init: ${ini.stderr}`);
  const pubkey = (JSON.parse(ini.stdout) as { audit_public_key: string }).audit_public_key;
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const sock = join(h.home, 'agent.sock');

  // Never unlocked since start: no signing key, an unsigned tail.
  for (let i = 0; i < 3; i++)
    t.equal(
      (await agentRequest(sock, 'POST', '/v1/http', { credential: 'x', method: 'GET', url: 'https://a.example/' }))
        .status,
      423,
    );
  await new Promise((r) => setTimeout(r, 1500));
  const before = verify(h, ['--pubkey', pubkey]);
  t.equal(before.code, 1, 'before any unlock the tail is unsigned');
  t.match(before.report, { problem: { kind: 'unsigned_tail' } });
  t.equal(verify(h, ['--pubkey', pubkey, '--allow-unsigned-tail']).code, 0, 'which --allow-unsigned-tail accepts');

  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  t.equal(cli(h, ['lock']).code, 0);
  // Refused while locked: each a journal entry after the lock's checkpoint.
  const refused = await Promise.all(
    Array.from({ length: 10 }, () =>
      agentRequest(sock, 'POST', '/v1/http', { credential: 'x', method: 'GET', url: 'https://a.example/' }),
    ),
  );
  t.same([...new Set(refused.map((r) => r.status))], [423], 'every request is refused as locked');
  t.same([...new Set(refused.map((r) => (r.json as { error: { code: string } }).error.code))], ['vault_locked']);
  t.ok(
    await eventually(() => verify(h, ['--pubkey', pubkey]).code === 0, 3000),
    'within a second or so, audit verify passes with no flag',
  );
  const after = verify(h, ['--pubkey', pubkey]);
  t.equal(after.code, 0, JSON.stringify(after.report));
  t.equal(after.report.ok, true);

  // A burst, then quiet: one checkpoint covers it.
  const status = cli(h, ['audit', 'head']);
  t.equal(status.code, 0);
  for (let i = 0; i < 5; i++) await agentRequest(sock, 'GET', '/v1/credentials');
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(verify(h, ['--pubkey', pubkey]).code, 0, 'still verifies after more refusals');
});
