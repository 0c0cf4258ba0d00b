// An agent fills its pending-approval budget (16 per process) and
// keeps sending more (hundreds refused as 429 busy, summarised in the
// journal), while the human's approver leaves the cards undecided. Then the
// human pulls the brake: `postern status` and `postern lock` answer, every
// waiting request is answered (not left hanging until approval_timeout),
// the approver is told its cards are gone, and the journal verifies.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { cliAsync, eventually, openRequest, Result } from '../helpers/postern';

async function guarded(p: Promise<Result>, ms = 60_000): Promise<Result | null> {
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([p, new Promise<null>((res) => (timer = setTimeout(() => res(null), ms)))]);
  clearTimeout(timer);
  return r;
}

t.test('pending flood, then the brake', async (t) => {
  const s = await startStack({ config: 'approval_timeout = "600s"', auditConfig: '' });
  t.teardown(() => s.close());
  s.addCredential(
    'each',
    `name = "each"\nkind = "http"\napprove = "each-use"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\n`,
    'pending-flood-secret-0123456789',
  );
  const admin = await s.approver(() => null); // never decides
  const cards = (): number => admin.pushes.filter((p) => p['push'] === 'pending').length;
  const body = (i: number): unknown => ({
    credential: 'each',
    method: 'GET',
    url: s.url('api.example.test', `/p${i}`),
    reason: `flood ${i}`,
  });

  const waiting = Array.from({ length: 16 }, (_, i) => openRequest(s.sock, body(i)));
  t.teardown(() => waiting.forEach((w) => w.socket.destroy()));
  t.ok(await eventually(() => cards() >= 16, 15_000), `16 cards pending (${cards()})`);

  // The flood beyond the budget.
  const extra = await Promise.all(Array.from({ length: 300 }, (_, i) => s.request(body(1000 + i))));
  const codes: Record<string, number> = {};
  for (const r of extra) {
    const c = (r.json as { error?: { code: string } })?.error?.code ?? String(r.status);
    codes[c] = (codes[c] ?? 0) + 1;
  }
  t.same(codes, { busy: 300 }, 'every request beyond the budget: busy');

  const st = await guarded(cliAsync(s.h, ['status', '--json']));
  t.equal(st?.code, 0, `status answers during the flood (${st?.stderr.trim()})`);

  const lock = await guarded(cliAsync(s.h, ['lock']));
  t.equal(lock?.code, 0, `lock answers (${lock?.stderr.trim()})`);

  const replies = await Promise.race([
    Promise.all(waiting.map((w) => w.reply)),
    new Promise<null>((r) => setTimeout(() => r(null), 30_000).unref()),
  ]);
  t.not(replies, null, 'every waiting request was answered after the lock (hang guard 30 s)');
  const statuses = (replies ?? []).map((d) => {
    const m = /\r\n\r\n(\{.*)$/s.exec(d.split('HTTP/1.1 ').filter((x) => x !== '' && !x.startsWith('102'))[0] ?? '');
    try {
      return (JSON.parse(m?.[1] ?? '') as { error?: { code: string } }).error?.code ?? '?';
    } catch {
      return '?';
    }
  });
  t.ok(
    statuses.every((c) => c !== '?' && c !== undefined),
    `each answered with a refusal code: ${statuses.join(',')} (first reply: ${JSON.stringify((replies ?? [])[0]?.slice(0, 600))})`,
  );
  t.equal(s.up.requests.length, 0, 'nothing reached the upstream');
  t.ok(
    await eventually(
      () => admin.pushes.filter((p) => p['push'] === 'withdrawn' || p['push'] === 'decided').length >= 16,
      10_000,
    ),
    'the approver was told each card is gone',
  );
  t.ok(s.d.proc.exitCode === null, 'the daemon is running');
});
