// SPEC §7: an executable deleted while its process runs is marked on the
// approval card, also when the same process already asked before the
// deletion: the executable path is read again on every request.
import t from 'tap';
import { copyFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, Card } from '../helpers/stack';
import { ControlServer, startIdentityAgent, writeIdentityAgent } from '../helpers/identity-agent';

type Answer = { decision: 'deny' | 'once' | 'session'; root_key?: string } | null;
interface CardProcess {
  key: string;
  pid: number;
  exe: string;
  exe_deleted: boolean;
  exe_memfd: boolean;
}

function errorCode(json: unknown): string | undefined {
  return (json as { error?: { code?: string } } | null)?.error?.code;
}

t.test(
  'a process that deletes its own executable between two requests: the second card is marked deleted',
  async (t) => {
    const s = await startStack();
    t.teardown(() => s.close());
    // each-use: no session can cover the second request, every one is a card.
    s.addCredential(
      'api',
      `name = "api"\nkind = "http"\napprove = "each-use"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
      'deleted-secret-0123456789',
    );
    const script = writeIdentityAgent();
    t.teardown(() => script.cleanup());
    const control = await ControlServer.listen(join(s.h.dir, 'control.sock'));
    t.teardown(() => control.close());

    const cards: Card[] = [];
    let plan: (card: Card) => Answer = () => null;
    await s.approver((card) => {
      cards.push(card);
      return plan(card);
    });
    const body = { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') };

    // The agent runs from its own copy of the interpreter.
    const copy = join(realpathSync(script.dir), 'python-copy');
    copyFileSync(realpathSync('/usr/bin/python3'), copy);
    const started = startIdentityAgent(copy, script, control);
    t.teardown(() => started.proc.kill('SIGKILL'));
    const agent = await control.next();
    t.equal(agent.pid, started.proc.pid, 'the agent is the process the test started');

    plan = () => ({ decision: 'once' });
    let r = await agent.request(s.sock, body);
    t.equal(r.status, 200, r.text);
    t.equal(cards.length, 1, 'one card');
    const before = cards[0]!.process as CardProcess;
    t.same(
      { pid: before.pid, exe: before.exe, exe_deleted: before.exe_deleted, exe_memfd: before.exe_memfd },
      { pid: agent.pid, exe: copy, exe_deleted: false, exe_memfd: false },
      'the first card: the copy, not deleted',
    );

    await agent.unlink(copy);
    plan = () => ({ decision: 'deny' });
    r = await agent.request(s.sock, body);
    t.equal(r.status, 403, r.text);
    t.equal(errorCode(r.json), 'denied_by_user', 'the request reached a human (and was denied)');
    t.equal(cards.length, 2, 'a second card');
    const after = cards[1]?.process as CardProcess | undefined;
    t.equal(after?.key, before.key, 'the same process instance asked');
    t.same(
      { pid: after?.pid, exe: after?.exe, exe_deleted: after?.exe_deleted, exe_memfd: after?.exe_memfd },
      { pid: agent.pid, exe: `${copy} (deleted)`, exe_deleted: true, exe_memfd: false },
      'the second card marks the executable deleted',
    );
    await agent.exit();
  },
);
