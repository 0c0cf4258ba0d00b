// Requests waiting for approval have their own budget (SPEC §7): at most 16
// per process instance and daemon.max_pending in all, beyond either 429
// busy saying which limit; and they do not hold http.max_concurrent slots,
// so a full set of undecided cards never starves a request a session
// already covers. Agents are real child processes, each its own instance.
import t, { Test } from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { eventually } from '../helpers/postern';
import { Agent, writeAgentScript, AgentReply } from '../helpers/agent-child';
import { canaryForms, makeCanary } from '../helpers/canary';
import type { TestAdmin } from '../helpers/admin';

interface ErrorBody {
  error: { code: string; message: string; limit?: string };
}

const SECRET = makeCanary('PENDING');

async function setUp(
  t: Test,
  config: string,
  httpConfig = '',
): Promise<{
  s: Stack;
  admin: TestAdmin;
  agents: (n: number) => Promise<Agent[]>;
  body: (cred: string, tag: string) => unknown;
  pending: () => number;
}> {
  const s = await startStack({ config, httpConfig });
  const script = writeAgentScript();
  const started: Agent[] = [];
  t.teardown(async () => {
    for (const a of started) a.kill();
    await s.close();
    script.cleanup();
  });
  const P = s.up.port;
  const def = (name: string, approve: string): string =>
    `name = "${name}"\nkind = "http"\napprove = "${approve}"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\n`;
  s.addCredential('api', def('api', 'session'), SECRET);
  s.addCredential('each', def('each', 'each-use'), SECRET);
  // Cards for `each` stay undecided; `api` gets a session.
  const admin = await s.approver((card) =>
    card.credential === 'each' ? null : { decision: 'session', root_key: card.process.key },
  );
  const agents = async (n: number): Promise<Agent[]> => {
    const list = await Promise.all(Array.from({ length: n }, () => Agent.start(script)));
    started.push(...list);
    return list;
  };
  const body = (cred: string, tag: string): unknown => ({
    credential: cred,
    method: 'GET',
    url: s.url('api.example.test', `/p/${tag}`),
  });
  const pending = (): number => {
    const open = new Set<string>();
    for (const p of admin.pushes) {
      if (p['push'] === 'pending') open.add((p['card'] as { id: string }).id);
      if (p['push'] === 'withdrawn') open.delete(p['id'] as string);
    }
    return open.size;
  };
  return { s, admin, agents, body, pending };
}

function noSecret(t: Test, r: AgentReply): void {
  for (const f of canaryForms(SECRET)) if (r.text.includes(f)) t.fail('the secret reached the agent');
}

t.test(
  '64 pending cards (16 each from 4 processes) leave http.max_concurrent to requests a session covers',
  async (t) => {
    // max_concurrent stays at its default, 64: before, the 64 waiting requests held every slot.
    const { s, agents, body, pending } = await setUp(t, 'max_pending = 64');
    const [covered, ...flooders] = await agents(5);
    const first = await covered!.request(s.sock, body('api', 'session'));
    t.equal(first.status, 200, `a session is granted: ${first.text}`);

    const waiting: Promise<AgentReply>[] = [];
    for (const [i, a] of flooders.entries())
      for (let k = 0; k < 16; k++)
        waiting.push(a.request(s.sock, body('each', `${i}-${k}`)).catch(() => ({ status: 0, json: null, text: '' })));
    t.ok(await eventually(() => pending() === 64, 20_000), `64 cards are pending (${pending()})`);

    const served = await covered!.request(s.sock, body('api', 'covered'));
    t.equal(served.status, 200, `the covered request is served: ${served.text}`);
    t.match(served.json, { status: 200 });
    noSecret(t, served);

    const seventeenth = await flooders[0]!.request(s.sock, body('each', '0-16'));
    t.equal(seventeenth.status, 429, seventeenth.text);
    const e = (seventeenth.json as ErrorBody).error;
    t.equal(e.code, 'busy');
    t.equal(e.limit, 'per_process');
    t.match(
      e.message,
      /already has 16 requests waiting for approval \(the limit per process\); wait for them to be decided/,
    );
    t.equal(pending(), 64, 'the refused one made no card');
    noSecret(t, seventeenth);

    for (const a of flooders) a.kill();
    const ends = await Promise.allSettled(waiting);
    t.equal(ends.length, 64);
    t.ok(await eventually(() => pending() === 0, 10_000), 'the cards of processes that went away are withdrawn');
  },
);

t.test('daemon.max_pending (default 32) bounds the cards of all processes together', async (t) => {
  // As many slots as cards: the cards hold none of them.
  const { s, agents, body, pending } = await setUp(t, '', 'max_concurrent = 32');
  const [a, b, c, covered] = await agents(4);
  const first = await covered!.request(s.sock, body('api', 'session'));
  t.equal(first.status, 200, `a session is granted: ${first.text}`);
  const waiting: Promise<AgentReply>[] = [];
  for (const [i, x] of [a!, b!].entries())
    for (let k = 0; k < 16; k++)
      waiting.push(x.request(s.sock, body('each', `${i}-${k}`)).catch(() => ({ status: 0, json: null, text: '' })));
  t.ok(await eventually(() => pending() === 32, 20_000), `32 cards are pending (${pending()})`);

  const thirtyThird = await c!.request(s.sock, body('each', 'c-0'));
  t.equal(thirtyThird.status, 429, thirtyThird.text);
  const e = (thirtyThird.json as ErrorBody).error;
  t.equal(e.code, 'busy');
  t.equal(e.limit, 'max_pending');
  t.match(
    e.message,
    /32 requests are already waiting for approval \(daemon\.max_pending = 32, all processes together\); wait for the human to decide some, then retry/,
  );
  t.equal(pending(), 32, 'the refused one made no card');
  noSecret(t, thirtyThird);
  const served = await covered!.request(s.sock, body('api', 'covered'));
  t.equal(
    served.status,
    200,
    `with 32 cards pending and max_concurrent = 32, the covered request is served: ${served.text}`,
  );
  noSecret(t, served);

  // A card decided frees a place at once.
  a!.kill();
  t.ok(await eventually(() => pending() === 16, 10_000), 'the cards of a process that went away are withdrawn');
  const next = c!.request(s.sock, body('each', 'c-1')).catch(() => null);
  t.ok(await eventually(() => pending() === 17, 10_000), 'another process may wait again');
  c!.kill();
  b!.kill();
  await Promise.allSettled([...waiting, next]);
});
