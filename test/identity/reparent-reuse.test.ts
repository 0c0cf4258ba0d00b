// SPEC §7: a process whose parent exited is not a descendant of whatever
// process later gets the parent's pid. U's parent Q exits (U is reparented
// to the namespace's init), R is forced onto Q's pid and approved for a
// session rooted at itself; U must still ask. The daemon and the agents share
// one pid namespace, so ns_last_pid recycles the pid without racing the rest
// of the machine.
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { init, makeHome } from '../helpers/postern';
import { startUpstream } from '../helpers/identity-upstream';
import type { Card } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';
import { nsPids, startDaemonInPidNs } from '../helpers/identity-pidns';
import { ControlServer, writeIdentityAgent } from '../helpers/identity-agent';

type Answer = { decision: 'deny' | 'once' | 'session'; root_key?: string } | null;

function errorCode(json: unknown): string | undefined {
  return (json as { error?: { code?: string } } | null)?.error?.code;
}

t.test(
  "a child reparented after its parent exited is not covered by a session rooted at the process that reused the parent's pid",
  async (t) => {
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
    const script = writeAgentScript();
    t.teardown(() => script.cleanup());
    const py = writeIdentityAgent();
    t.teardown(() => py.cleanup());

    const ns = await startDaemonInPidNs(h, script);
    t.teardown(() => ns.close());
    t.same(nsPids(ns.daemonPid).slice(1), [1], 'the daemon is pid 1 of its own namespace');
    const def = h.file(
      'api.toml',
      `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    );
    const add = ns.cli([
      'cred',
      'add',
      '--file',
      def,
      '--secret-file',
      h.file('s', 'reparent-secret-0123'),
      '--passphrase-file',
      h.passFile,
    ]);
    t.equal(add.code, 0, add.stderr);

    const cards: Card[] = [];
    let plan: (card: Card) => Answer = () => null;
    ns.admin.onPush = (f) => {
      if (f['push'] !== 'pending') return;
      const card = f['card'] as Card;
      cards.push(card);
      const answer = plan(card);
      if (answer) void ns.admin.request('approval.decide', { id: card.id, ...answer });
    };
    const sessionRoots = async (): Promise<string[]> =>
      ((await ns.admin.request('sessions.list'))['result'] as { sessions: { root: { key: string } }[] }).sessions.map(
        (s) => s.root.key,
      );
    const sock = join(h.home, 'agent.sock');
    const body = { credential: 'api', method: 'GET', url: `https://api.example.test:${up.port}/v1/x` };
    // U is driven over a control socket: it outlives its parent's pipes.
    const control = await ControlServer.listen(join(h.dir, 'control.sock'));
    t.teardown(() => control.close());

    // The controller joins the daemon's pid and mount namespaces and forks Q; Q forks U.
    const ctl = await Agent.start(script, { prefix: ns.inNs([]) });
    t.teardown(() => ctl.kill());
    const q = await ctl.spawn({ id: 'q' });
    const forked = await q.spawn({ id: 'u', argv: ['/usr/bin/python3', py.path, '--control', control.path] });
    const u = await control.next();
    t.equal(u.pid, forked.pid);
    t.equal(u.ppid, q.pid, "U is Q's child");

    // 1. U asks and is denied; its card shows Q as its parent.
    plan = () => ({ decision: 'deny' });
    let r = await u.request(sock, body);
    t.equal(r.status, 403, r.text);
    t.equal(errorCode(r.json), 'denied_by_user');
    t.equal(cards.length, 1, 'a card for U');
    const uCard = cards[0]!;
    t.equal(uCard.process.pid, u.pid);
    t.equal(uCard.ancestors[0]?.pid, q.pid, "U's chain starts at Q");
    const qKey = uCard.ancestors[0]!.key;

    // 2. Q exits; U lives on, reparented to the namespace's init.
    const P = q.pid;
    await q.exit();
    t.equal((await u.info()).ppid, 1, 'U was reparented to pid 1 of the namespace');

    // 3. R takes Q's pid and is approved for a session rooted at itself.
    const rAgent = await ctl.spawnAt({ id: 'r' }, P);
    t.equal(rAgent.pid, P, "R runs at Q's old pid");
    plan = (card) => ({ decision: 'session', root_key: card.process.key });
    r = await rAgent.request(sock, body);
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 2, 'a card for R');
    const rCard = cards[1]!;
    t.equal(rCard.process.pid, P);
    t.not(rCard.process.key, qKey, 'R is another instance than Q');
    t.same(await sessionRoots(), [rCard.process.key], 'one session, rooted at R');

    // 4. U asks again on a new connection: R is not its ancestor, so it must ask.
    plan = () => ({ decision: 'deny' });
    r = await u.request(sock, body);
    t.equal(r.status, 403, r.text);
    t.equal(errorCode(r.json), 'denied_by_user', 'U had to wait for a decision, and it was a denial');
    t.equal(cards.length, 3, 'U produced a new card');
    const again = cards[2];
    t.equal(again?.process.key, uCard.process.key, 'the same U');
    t.notOk(
      again === undefined || again.ancestors.some((a) => a.pid === P || a.key === rCard.process.key),
      "R is not in U's chain",
    );
    t.same(again?.ancestors, [], "U's chain ends at its new parent, the namespace's init");
    t.equal(up.requests.filter((x) => x.url === '/v1/x').length, 1, "the upstream saw only R's request");
    t.same(await sessionRoots(), [rCard.process.key], "R's session is still there");

    await u.exit();
    await rAgent.exit();
  },
);
