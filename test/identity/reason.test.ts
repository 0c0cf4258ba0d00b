// SPEC §6.1, §7: the agent may give a `reason` (at most 200 characters) with
// POST /v1/http and /v1/ssh; the card shows it escaped and marked as the
// agent's words, and the journal records it. It decides nothing.
import t from 'tap';
import { startStack, auditList, Card } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';
import { startSshd } from '../helpers/sshd';
import { addSshCredential } from '../helpers/ssh-credential';
import { readCard } from '../../cli/approver/card';
import { renderCard } from '../../cli/approver/render';

function errorOf(json: unknown): { code?: string; problems?: { path: string }[] } {
  return (json as { error?: { code?: string; problems?: { path: string }[] } } | null)?.error ?? {};
}

t.test("the agent's reason: on the card, escaped and marked, and in the journal", async (t) => {
  const [sshd, s] = await Promise.all([startSshd(), startStack()]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\napprove = "each-use"\n`,
    'reason-secret-0123456789',
  );
  const added = addSshCredential(
    s.h,
    {
      name: 'box',
      port: sshd.port,
      user: sshd.user,
      hostKey: sshd.hostKeyFingerprint,
      commands: ['echo *'],
      approve: 'each-use',
    },
    sshd.keys.ed25519.path,
  );
  t.equal(added.code, 0, added.stderr);
  const cards: Card[] = [];
  await s.approver((card) => (cards.push(card), { decision: 'once' }));
  const url = s.url('api.example.test', '/v1/x');
  // A newline, a bidi override and a fake key line: all escaped on the card.
  const hostile = 'file the bug\n  o  allow once\u202e "quoted"';

  await t.test('POST /v1/http', async (t) => {
    const r = await s.request({ credential: 'api', method: 'GET', url, reason: hostile });
    t.equal(r.status, 200, r.text);
    const card = cards.at(-1)!;
    t.equal(card.action['reason'], hostile, 'the card carries the reason as given');
    const text = renderCard(readCard(card)!);
    const line = text.find((l) => l.trimStart().startsWith('reason'));
    t.ok(line, text.join('\n'));
    t.match(
      line!,
      '"file the bug\\n  o  allow once\\u{202E} \\"quoted\\""',
      'escaped: one line, no bidi override, quotes escaped',
    );
    t.match(line!, /the agent's words, not checked by postern/, "marked as the agent's words");
    const intent = auditList(s)
      .filter((e) => e['kind'] === 'http_intent')
      .at(-1);
    t.equal(intent?.['reason'], hostile, 'the journal records it');
  });

  await t.test('POST /v1/ssh', async (t) => {
    const r = await agentRequest(s.sock, 'POST', '/v1/ssh', {
      credential: 'box',
      command: 'echo hi',
      reason: 'deploy the fix',
    });
    t.equal(r.status, 200, r.text);
    const card = cards.at(-1)!;
    t.equal(card.action['reason'], 'deploy the fix');
    t.match(renderCard(readCard(card)!).join('\n'), /reason\s+"deploy the fix"  <- the agent's words/);
    const intent = auditList(s)
      .filter((e) => e['kind'] === 'ssh_intent')
      .at(-1);
    t.equal(intent?.['reason'], 'deploy the fix');
  });

  await t.test('without a reason the card says none was given', async (t) => {
    const r = await s.request({ credential: 'api', method: 'GET', url });
    t.equal(r.status, 200, r.text);
    t.match(renderCard(readCard(cards.at(-1)!)!).join('\n'), /reason\s+\(none given by the agent\)/);
  });

  await t.test('200 characters are accepted; 201, or not a string, are bad_request naming the field', async (t) => {
    const long = '\u{1F600}'.repeat(200); // 200 characters, 400 UTF-16 units
    let r = await s.request({ credential: 'api', method: 'GET', url, reason: long });
    t.equal(r.status, 200, r.text);
    const before = cards.length;
    for (const [endpoint, body] of [
      ['/v1/http', { credential: 'api', method: 'GET', url, reason: 'x'.repeat(201) }],
      ['/v1/http', { credential: 'api', method: 'GET', url, reason: 7 }],
      ['/v1/ssh', { credential: 'box', command: 'echo hi', reason: 'x'.repeat(201) }],
    ] as const) {
      r = await agentRequest(s.sock, 'POST', endpoint, body);
      t.equal(r.status, 400, r.text);
      t.equal(errorOf(r.json).code, 'bad_request');
      t.same(
        errorOf(r.json).problems?.map((p) => p.path),
        ['reason'],
        r.text,
      );
    }
    t.equal(cards.length, before, 'no card for a refused request');
  });
});
