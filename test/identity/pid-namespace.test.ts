// SPEC §7 across pid namespaces: agents in a child pid namespace talk to a
// daemon outside it. The kernel translates SO_PEERCRED pids into the
// daemon's namespace, so cards and sessions name the OUTER pid; the agents
// force pid reuse inside their namespace (ns_last_pid), and the second agent,
// at the same inner pid, must still ask.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { startStack, Card } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

// The pids of a process in each namespace it belongs to, outermost first.
function nsPids(pid: number): number[] {
  const line =
    readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('NSpid:')) ?? '';
  return line.split(/\s+/).slice(1).filter(Boolean).map(Number);
}

t.test("same inner pid, new instance: a new card (daemon outside the agents' pid namespace)", async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'ns-secret-0123456789',
  );
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const cards: Card[] = [];
  let plan: (card: Card) => { decision: 'deny' | 'session'; root_key?: string } = (card) => ({
    decision: 'session',
    root_key: card.process.key,
  });
  await s.approver((card) => {
    cards.push(card);
    return plan(card);
  });
  const body = { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') };

  // The controller is pid 1 of a fresh pid namespace (with its own /proc, so
  // ns_last_pid is that namespace's).
  const ctl = await Agent.start(script, { prefix: ['unshare', '--fork', '--pid', '--mount-proc', '--kill-child'] });
  t.teardown(() => ctl.kill());
  t.equal(ctl.pid, 1, 'the controller is the init of its namespace');

  const P = 3131;
  const x = await ctl.spawnAt({ id: 'x' }, P);
  t.equal(x.pid, P, 'X runs at inner pid P');
  let r = await x.request(s.sock, body);
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 1);
  const xCard = cards[0]!;
  const xOuter = xCard.process.pid;
  t.same(nsPids(xOuter), [xOuter, P], "the card names X by its pid in the daemon's namespace (inner pid P)");
  t.ok(xCard.process.key.startsWith(`${xOuter}:`), 'the instance key is built on that pid');
  const ctlCard = xCard.ancestors[0];
  t.ok(ctlCard, 'the chain continues into the parent');
  t.same(nsPids(ctlCard!.pid), [ctlCard!.pid, 1], "X's parent on the card is the namespace's init, by its outer pid");
  r = await x.request(s.sock, body);
  t.equal(r.status, 200, r.text);
  t.equal(cards.length, 1, 'X is covered by the session rooted at X');

  await x.exit();
  const y = await ctl.spawnAt({ id: 'y' }, P);
  t.equal(y.pid, P, 'Y reuses inner pid P');
  plan = () => ({ decision: 'deny' });
  r = await y.request(s.sock, body);
  t.equal(r.status, 403, r.text);
  t.equal(
    (r.json as { error: { code: string } }).error.code,
    'denied_by_user',
    "Y waited for a human and was denied: X's session did not cover it",
  );
  t.equal(cards.length, 2, 'Y produced a new card');
  const yOuter = cards[1]!.process.pid;
  t.same(nsPids(yOuter), [yOuter, P], 'the card names Y by its outer pid, inner pid P');
  t.not(cards[1]!.process.key, xCard.process.key, 'a different instance');
  await y.exit();
  await ctl.exit();
});
