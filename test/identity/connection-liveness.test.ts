// SPEC §7: the requester is the process that made the connection. Every
// request on a kept connection checks that this process instance still
// runs, so a connection handed to another process (inherited across fork,
// passed over SCM_RIGHTS) is served in the connecting process's name while
// it lives, and refused as unidentified_peer once it has exited.
import t from 'tap';
import { join } from 'node:path';
import { startStack, Card } from '../helpers/stack';
import { runHolder, writeHolder } from '../helpers/identity-holder';

const API = (port: number): string =>
  `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;

t.test('a connection dies with the process that made it', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential('api', API(s.up.port), 'liveness-secret-0123456789');
  const holder = writeHolder();
  t.teardown(() => holder.cleanup());
  const cards: Card[] = [];
  // Sessions rooted at the agents' parent (this test process), as for an
  // agent that spawns a helper per call: the connection's holder is covered
  // by it, which is why the liveness of the connecting process is what
  // decides, not the session.
  await s.approver(
    (card) => (cards.push(card), { decision: 'session', root_key: (card.ancestors[0] ?? card.process).key }),
  );
  const body = JSON.stringify({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });

  await t.test(
    'inherited across fork: served as the parent while it lives, unidentified_peer after it exits',
    async (t) => {
      const before = cards.length;
      const run = runHolder(holder, ['fork', s.sock, body]);
      t.teardown(() => void run.proc.kill('SIGKILL'));
      await run.done;
      const [first, alive, exited] = run.replies;
      t.match(first, { who: 'parent', phase: 'first', status: 200 }, JSON.stringify(first));
      t.match(
        alive,
        { who: 'child', phase: 'parent alive', status: 200 },
        'the parent lives: its connection speaks for it',
      );
      t.not(alive?.pid, first?.pid, 'a different process sent it');
      t.match(
        exited,
        { who: 'child', phase: 'parent exited', status: 403, code: 'unidentified_peer' },
        JSON.stringify(exited),
      );
      t.equal(cards.length, before + 1, 'one card, for the parent: the child spoke as the parent');
      t.equal(cards[before]?.process.pid, first?.pid, 'the card names the process that connected');
    },
  );

  await t.test(
    'passed over SCM_RIGHTS to an unrelated process: unidentified_peer once the sender exited',
    async (t) => {
      const before = cards.length;
      const path = join(holder.dir, 'pass.sock');
      const receiver = runHolder(holder, ['receive', s.sock, body, path]);
      t.teardown(() => void receiver.proc.kill('SIGKILL'));
      const ready = await receiver.next();
      t.equal(ready.phase, 'ready');
      const sender = runHolder(holder, ['send', s.sock, body, path]);
      t.teardown(() => void sender.proc.kill('SIGKILL'));
      await Promise.all([sender.done, receiver.done]);
      const first = sender.replies[0];
      const [alive, exited] = receiver.replies.slice(1);
      t.match(first, { who: 'sender', phase: 'first', status: 200 }, JSON.stringify(first));
      t.match(
        alive,
        { who: 'receiver', phase: 'sender alive', status: 200 },
        "served in the sender's name while it lives",
      );
      t.match(
        exited,
        { who: 'receiver', phase: 'sender exited', status: 403, code: 'unidentified_peer' },
        JSON.stringify(exited),
      );
      t.equal(cards.length, before, 'no card: the session rooted at this test process covers the sender');
      t.not(receiver.proc.pid, sender.proc.pid);
    },
  );
});
