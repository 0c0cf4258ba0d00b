// SPEC §7: a session covers the process instance it is rooted at and that
// instance's descendants, nothing else. Real agents (child processes) ask
// through the real daemon; an approver over admin.sock decides each card.
import t from 'tap';
import { startStack, Card } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';
import { eventually } from '../helpers/postern';

type Answer = { decision: 'deny' | 'once' | 'session'; root_key?: string } | null;

function httpCredential(name: string, port: number): string {
  return `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;
}

function errorCode(json: unknown): string | undefined {
  return (json as { error?: { code?: string } } | null)?.error?.code;
}

t.test(
  'sibling agents: a session rooted at one sibling does not cover the other; one rooted at their parent covers both, not an unrelated process',
  async (t) => {
    const s = await startStack();
    t.teardown(() => s.close());
    const script = writeAgentScript();
    t.teardown(() => script.cleanup());
    s.addCredential('one', httpCredential('one', s.up.port), 'secret-one-0123456789');
    s.addCredential('two', httpCredential('two', s.up.port), 'secret-two-0123456789');

    const cards: Card[] = [];
    let plan: (card: Card) => Answer = () => null;
    const admin = await s.approver((card) => {
      cards.push(card);
      return plan(card);
    });

    // parent -> (a, b); unrelated is a separate child of the test process.
    const parent = await Agent.start(script);
    t.teardown(() => parent.kill());
    const a = await parent.spawn({ id: 'a' });
    const b = await parent.spawn({ id: 'b' });
    const unrelated = await Agent.start(script);
    t.teardown(() => unrelated.kill());
    t.equal(a.ppid, parent.pid, 'a is a child of the parent');
    t.equal(b.ppid, parent.pid, 'b is a child of the parent');
    t.not(a.pid, b.pid);

    const get = (cred: string) => ({ credential: cred, method: 'GET', url: s.url('api.example.test', '/v1/x') });

    // 1. A asks: a card for A, whose chain shows the parent; approve a session rooted at A.
    plan = (card) => ({ decision: 'session', root_key: card.process.key });
    let r = await a.request(s.sock, get('one'));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 1, 'one card so far');
    t.equal(cards[0]!.process.pid, a.pid, 'the card names A');
    t.equal(cards[0]!.ancestors[0]?.pid, parent.pid, "the card's chain starts at A's parent");
    t.notOk(
      cards[0]!.ancestors.some((p) => p.pid === b.pid),
      'the sibling is not in the chain',
    );

    // A again: covered, no card.
    r = await a.request(s.sock, get('one'));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 1, 'A is covered by its own session: no new card');

    // 2. B asks for the same credential: not covered by A's session; a new card, denied.
    plan = () => ({ decision: 'deny' });
    r = await b.request(s.sock, get('one'));
    t.equal(r.status, 403, r.text);
    t.equal(errorCode(r.json), 'denied_by_user');
    t.equal(cards.length, 2, "the sibling's request produced a new card");
    t.equal(cards[1]!.process.pid, b.pid, 'the new card names B');
    t.not(cards[1]!.process.key, cards[0]!.process.key);

    // 3. Credential two: approve a session rooted at the PARENT (from A's card).
    let parentKey = '';
    plan = (card) => {
      const p = card.ancestors.find((x) => x.pid === parent.pid);
      parentKey = p?.key ?? '';
      return p ? { decision: 'session', root_key: p.key } : { decision: 'deny' };
    };
    r = await a.request(s.sock, get('two'));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 3);
    t.equal(cards[2]!.process.pid, a.pid);
    t.ok(parentKey.startsWith(`${parent.pid}:`), "the session's root is the parent instance");

    // B is covered by the parent's session: served without a card.
    plan = () => ({ decision: 'deny' });
    r = await b.request(s.sock, get('two'));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 3, "the sibling is covered by the parent's session: no new card");
    // A third sibling forked after the approval is covered too.
    const c = await parent.spawn({ id: 'c' });
    r = await c.request(s.sock, get('two'));
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 3, 'a later child of the parent is covered');

    // 4. An unrelated process (another child of the test process) is not covered.
    r = await unrelated.request(s.sock, get('two'));
    t.equal(r.status, 403, r.text);
    t.equal(errorCode(r.json), 'denied_by_user');
    t.equal(cards.length, 4, 'the unrelated process needed a card of its own');
    t.equal(cards[3]!.process.pid, unrelated.pid);
    t.notOk(
      cards[3]!.ancestors.some((p) => p.key === parentKey),
      "the parent is not in the unrelated process's chain",
    );

    // The parent's session does not cover credential one for B either (sessions are per credential).
    r = await b.request(s.sock, get('one'));
    t.equal(errorCode(r.json), 'denied_by_user');
    t.equal(cards.length, 5, 'a session is for one credential only');

    // 5. The sessions end with their roots: first A's, then the parent's.
    const roots = async (): Promise<string[]> => {
      const l = await admin.request('sessions.list');
      return (l['result'] as { sessions: { root: { key: string } }[] }).sessions.map((x) => x.root.key).sort();
    };
    t.same(await roots(), [cards[0]!.process.key, parentKey].sort(), 'two sessions: rooted at A and at the parent');
    await c.exit();
    await b.exit();
    await a.exit();
    t.ok(
      await eventually(async () => (await roots()).join() === parentKey, 5000),
      "A's session ended when A exited; the parent's remains",
    );
    await parent.exit();
    t.ok(
      await eventually(async () => (await roots()).length === 0, 5000),
      "the parent's session ended when the parent exited",
    );
    await unrelated.exit();
  },
);
