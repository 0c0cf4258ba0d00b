// SPEC §7: a recycled pid never inherits an approval. The daemon runs as the
// init of its own pid namespace, so it sees the pids of that namespace; the
// agents join it (nsenter) and the test forces pid reuse with ns_last_pid.
// X and Y then have the SAME pid as the daemon sees it; only the instance
// (start time) tells them apart.
import t from 'tap';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRequest, init, makeHome, eventually } from '../helpers/postern';
import { startUpstream } from '../helpers/identity-upstream';
import { nsPids, startDaemonInPidNs } from '../helpers/identity-pidns';
import type { Card } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

type Answer = { decision: 'deny' | 'once' | 'session'; root_key?: string } | null;

// key = pid:start_time:exe_dev:exe_ino:arg_start:argv_hash
function keyParts(key: string): { pid: string; start: string; exe: string } {
  const [pid, start, dev, ino] = key.split(':');
  return { pid: pid!, start: start!, exe: `${dev}:${ino}` };
}

t.test('a recycled pid never inherits an approval (daemon and agents in one pid namespace)', async (t) => {
  const { ca, up, dns } = await startUpstream(t);
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(
    join(h.home, 'config.toml'),
    `[http]\ndns_servers = ["127.0.0.1:${dns.port}"]\nca_file = "${ca.caFile}"\n`,
    { mode: 0o600 },
  );
  t.equal(init(h).code, 0, 'init');

  // The daemon as pid 1 of a new pid namespace with its own /proc; the CLI
  // and the approver connect from inside it.
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const ns = await startDaemonInPidNs(h, script);
  t.teardown(() => ns.close());
  const { daemonPid, inNs, admin } = ns;
  t.same(nsPids(daemonPid).slice(1), [1], 'the daemon is pid 1 of its own namespace');
  const def = h.file(
    'api.toml',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
  );
  t.equal(
    ns.cli([
      'cred',
      'add',
      '--file',
      def,
      '--secret-file',
      h.file('s', 'pid-reuse-secret-0123'),
      '--passphrase-file',
      h.passFile,
    ]).code,
    0,
    'cred add',
  );

  const cards: Card[] = [];
  let plan: (card: Card) => Answer = () => null;
  admin.onPush = (f) => {
    if (f['push'] !== 'pending') return;
    const card = f['card'] as Card;
    cards.push(card);
    const answer = plan(card);
    if (answer) void admin.request('approval.decide', { id: card.id, ...answer });
  };
  const sessionRoots = async (): Promise<string[]> =>
    ((await admin.request('sessions.list'))['result'] as { sessions: { root: { key: string } }[] }).sessions.map(
      (s) => s.root.key,
    );

  const sock = join(h.home, 'agent.sock');
  const body0 = (): Record<string, unknown> => ({
    credential: 'api',
    method: 'GET',
    url: `https://api.example.test:${up.port}/v1/x`,
  });
  // A peer outside the daemon's pid namespace has no pid the daemon can see.
  const outside = await agentRequest(sock, 'POST', '/v1/http', body0());
  t.equal(outside.status, 403, outside.text);
  t.equal(
    (outside.json as { error: { code: string } }).error.code,
    'unidentified_peer',
    'a peer the daemon cannot name is refused',
  );
  const body = body0();

  // The controller joins the daemon's pid and mount namespaces; it forks the agents.
  const ctl = await Agent.start(script, { prefix: inNs([]) });
  t.teardown(() => ctl.kill());
  t.equal(ctl.ppid, 0, 'the controller is inside the namespace (its parent, nsenter, is outside)');

  await t.test('X approved for a session; Y with the same pid must ask again', async (t) => {
    const P = 4242;
    const x = await ctl.spawnAt({ id: 'x' }, P);
    t.equal(x.pid, P, 'X runs at the forced pid');
    plan = (card) => ({ decision: 'session', root_key: card.process.key });
    let r = await x.request(sock, body);
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 1);
    const xCard = cards[0]!;
    t.equal(xCard.process.pid, P, 'the daemon sees the pid of its namespace');
    r = await x.request(sock, body);
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 1, 'X is covered by its session');
    t.same(await sessionRoots(), [xCard.process.key], 'one session, rooted at X');

    await x.exit();
    const y = await ctl.spawnAt({ id: 'y' }, P);
    t.equal(y.pid, P, 'Y got the very pid X had');
    plan = () => ({ decision: 'deny' });
    r = await y.request(sock, body);
    t.equal(r.status, 403, r.text);
    t.equal(
      (r.json as { error: { code: string } }).error.code,
      'denied_by_user',
      'Y had to wait for a decision, and it was a denial',
    );
    t.equal(cards.length, 2, 'Y produced a new card');
    const yCard = cards[1]!;
    t.equal(yCard.process.pid, P, "Y's card shows the same pid");
    const [xk, yk] = [keyParts(xCard.process.key), keyParts(yCard.process.key)];
    t.equal(yk.pid, xk.pid);
    t.equal(yk.exe, xk.exe, 'same executable');
    t.not(yk.start, xk.start, 'only the start time tells the instances apart');
    t.ok(await eventually(async () => (await sessionRoots()).length === 0, 5000), "X's session ended with X");
    await y.exit();
  });

  await t.test("an approval decided after the requester's pid was recycled is refused at decision time", async (t) => {
    const P = 5242;
    const replyFile = join(h.dir, 'held-reply');
    const x = await ctl.spawnAt({ id: 'x2' }, P);
    t.equal(x.pid, P);
    const before = cards.length;
    plan = () => null; // the human has not decided yet
    // X sends; its connection is held by X's child, so the card stays pending after X exits.
    const holder = await x.handOff(sock, body, replyFile);
    t.not(holder, P);
    t.ok(await eventually(() => cards.length === before + 1, 5000), 'a card for X');
    const xCard = cards[before]!;
    t.equal(xCard.process.pid, P);
    await x.exit();
    const y = await ctl.spawnAt({ id: 'y2' }, P);
    t.equal(y.pid, P, 'Y now holds the pid of the waiting requester');
    const pending = (await admin.request('approvals.list'))['result'] as { pending: { id: string }[] };
    t.ok(
      pending.pending.some((c) => c.id === xCard.id),
      "X's card is still pending (its connection is open)",
    );

    // The human approves X's card with a session rooted at X.
    const d = await admin.request('approval.decide', {
      id: xCard.id,
      decision: 'session',
      root_key: xCard.process.key,
    });
    t.equal((d['result'] as { taken: boolean }).taken, true, 'the decision was taken');
    t.ok(await eventually(() => existsSync(replyFile), 5000), 'the held request was answered');
    const raw = readFileSync(replyFile, 'utf8');
    t.match(raw, /^HTTP\/1\.1 403 /, raw);
    const json = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
    t.equal(json.error.code, 'unidentified_peer', 'the instance check at decision time refused it');
    t.notOk((await sessionRoots()).includes(xCard.process.key), 'no session was created for the dead instance');
    t.equal(
      up.requests.filter((q) => q.url === '/v1/x').length,
      2,
      'the upstream saw only the two requests of the first X',
    );

    plan = () => ({ decision: 'deny' });
    const r = await y.request(sock, body);
    t.equal((r.json as { error: { code: string } }).error.code, 'denied_by_user');
    t.equal(cards.length, before + 2, 'Y needed a card of its own');
    t.equal(cards.at(-1)!.process.pid, P);
    await y.exit();
  });
});
