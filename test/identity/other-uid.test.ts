// SPEC §7: a process of a uid not in daemon.agent_uids is refused with
// denied_peer before anything else; listed, it is served like any agent (it
// still needs a human's approval). The agent really runs as uid 65534
// (setpriv), and the test opens the agent socket's path to it.
import t from 'tap';
import { chmodSync } from 'node:fs';
import { startStack, Stack, Card } from '../helpers/stack';
import { Agent, AgentScript, writeAgentScript } from '../helpers/agent-child';

const NOBODY = 65534;

function credential(port: number): string {
  return `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;
}

// After the daemon checked its home at start: let another uid reach the socket.
function openToOthers(s: Stack): void {
  chmodSync(s.h.dir, 0o711);
  chmodSync(s.h.home, 0o711);
  chmodSync(s.sock, 0o666);
}

function asNobody(script: AgentScript): Promise<Agent> {
  return Agent.start(script, {
    prefix: ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'],
    cwd: script.dir,
  });
}

function errorCode(json: unknown): string | undefined {
  return (json as { error?: { code?: string } } | null)?.error?.code;
}

t.test('agent_uids decides who may use the agent socket', async (t) => {
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  // Both daemons at once: each start costs seconds.
  const [own, listed] = await Promise.all([startStack(), startStack({ config: `agent_uids = [${NOBODY}]` })]);
  t.teardown(() => own.close());
  t.teardown(() => listed.close());
  own.addCredential('api', credential(own.up.port), 'uid-secret-0123456789');
  listed.addCredential('api', credential(listed.up.port), 'uid-secret-0123456789');
  openToOthers(own);
  openToOthers(listed);
  const ownCards: Card[] = [];
  const listedCards: Card[] = [];
  await own.approver((card) => (ownCards.push(card), { decision: 'session', root_key: card.process.key }));
  await listed.approver((card) => (listedCards.push(card), { decision: 'session', root_key: card.process.key }));

  const nobody = await asNobody(script);
  t.teardown(() => nobody.kill());
  t.equal(nobody.uid, NOBODY, 'the agent runs as uid 65534');
  const body = (s: Stack): unknown => ({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });

  await t.test("agent_uids = [] (the daemon's own uid only): another uid is refused", async (t) => {
    const r = await nobody.request(own.sock, body(own));
    t.equal(r.status, 403, r.text);
    t.equal(errorCode(r.json), 'denied_peer');
    t.match(
      (r.json as { error: { message: string } }).error.message,
      /uid 65534.*agent_uids/,
      'the message names the uid and the setting',
    );
    t.equal(ownCards.length, 0, 'no card: refused before approval');
    // The daemon's own uid is still served (the refusal above is about the uid).
    const root = await Agent.start(script);
    t.teardown(() => root.kill());
    const ok = await root.request(own.sock, body(own));
    t.equal(ok.status, 200, ok.text);
    t.equal(ownCards.length, 1);
    await root.exit();
  });

  await t.test(
    "agent_uids = [65534]: that uid is served, with a card naming it; the daemon's uid no longer is",
    async (t) => {
      const r = await nobody.request(listed.sock, body(listed));
      t.equal(r.status, 200, r.text);
      t.equal(listedCards.length, 1, 'served after a human approved its card');
      const card = listedCards[0]! as Card & { process: { uid: number } };
      t.equal(card.process.pid, nobody.pid);
      t.equal(card.process.uid, NOBODY, 'the card names the uid');
      const root = await Agent.start(script);
      t.teardown(() => root.kill());
      const refused = await root.request(listed.sock, body(listed));
      t.equal(refused.status, 403, refused.text);
      t.equal(errorCode(refused.json), 'denied_peer', 'a non-empty agent_uids replaces the default');
      t.equal(listedCards.length, 1);
      await root.exit();
    },
  );
});
