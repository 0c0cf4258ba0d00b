// SPEC §7: every request checks that the process that made its connection
// still runs. A request's head may come from one program and its body from
// the program it execs into (the connection kept across the exec): the
// check is made once the body is whole, so the new program cannot choose
// what is asked in the name of the old one, on either front door, under a
// session rooted at the old program itself (which is then not checked a
// second time) or at its parent. The same split from one process is
// served.
import t from 'tap';
import type { Test } from 'tap';
import { auditList, startStack } from '../helpers/stack';
import { findCanary, makeCanary } from '../helpers/canary';
import { runHolder, writeHolder, type Reply } from '../helpers/identity-holder';

const API = (port: number): string =>
  `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\npaths = ["/v1/*"]\n`;

t.test('a body sent after an exec is refused; the same split from one process is served', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secrets = [makeCanary('EXECAPI'), makeCanary('EXECWIDE')];
  s.addCredential('api', API(s.up.port), secrets[0]!);
  s.addCredential('wide', API(s.up.port).replace('name = "api"', 'name = "wide"'), secrets[1]!);
  const holder = writeHolder();
  t.teardown(() => holder.cleanup());
  // A session for "api" is rooted at the maker itself; one for "wide" at
  // the maker's parent (this test), which covers whatever the maker runs.
  await s.approver((card) => ({
    decision: 'session',
    root_key: card.credential === 'wide' ? card.ancestors[0]!.key : card.process.key,
  }));
  const body = JSON.stringify({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });

  const told: Reply[] = [];
  const split = async (door: string, how: 'same' | 'exec', text = body): Promise<Reply[]> => {
    const run = runHolder(holder, ['split', s.sock, text, door, how]);
    t.teardown(() => void run.proc.kill('SIGKILL'));
    await run.done;
    told.push(...run.replies);
    return run.replies;
  };

  // The maker asks once (served), then sends a head and execs; the program
  // it execs into sends the body: refused, and only the first request
  // reached the upstream.
  const refusedAfterExec = async (t: Test, door: string, text = body): Promise<void> => {
    const sent = s.up.requests.length;
    const [before, after] = await split(door, 'exec', text);
    t.match(before, { who: 'maker', phase: 'first', status: 200 }, JSON.stringify(before));
    t.match(
      after,
      { who: 'execd', phase: 'body', status: 403, code: 'unidentified_peer' },
      `the body came from the program the maker exec'd into: ${JSON.stringify(after)}`,
    );
    t.equal(s.up.requests.length, sent + 1, 'only the request made before the exec reached the upstream');
  };

  await t.test('JSON front door', async (t) => {
    const sent = s.up.requests.length;
    const [first, same] = await split('json', 'same');
    t.match(first, { phase: 'first', status: 200 }, JSON.stringify(first));
    t.match(same, { phase: 'body', status: 200 }, `from one process, head and body apart: served`);
    t.equal(s.up.requests.length, sent + 2, 'both reached the upstream');

    await refusedAfterExec(t, 'json');
  });

  // Under a session rooted at an ancestor, the program exec'd into is
  // covered too (a descendant of the root), so it may ask on its own
  // connection; on the maker's connection it would be served, and
  // journaled, as the maker it no longer is.
  await t.test('JSON front door, a session rooted at the parent', async (t) => {
    await refusedAfterExec(t, 'json', body.replace('"api"', '"wide"'));
  });

  // An absolute-form http:// request on the agent socket (the upstream
  // speaks only TLS, so the one that is sent fails there: what matters is
  // that it was not refused as the peer's).
  await t.test('proxy front door (absolute form)', async (t) => {
    const url = s.url('api.example.test', '/v1/posted').replace(/^https:/, 'http:');
    const [first, same] = await split(url, 'same');
    t.match(first, { phase: 'first', status: 200 }, JSON.stringify(first));
    t.not(
      same?.code,
      'unidentified_peer',
      `from one process, head and body apart: not refused as the peer's (${JSON.stringify(same)})`,
    );
    t.not(same?.status, 0, 'answered');

    await refusedAfterExec(t, url);
  });

  // The secrets are in nothing the makers were told, the daemon logged or
  // the journal holds.
  const emitted = [JSON.stringify(told), s.d.logs(), JSON.stringify(auditList(s))].join('\n');
  for (const secret of secrets) t.same(findCanary(emitted, secret), [], 'no form of a secret was emitted');
});
