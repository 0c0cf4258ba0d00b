// SPEC §7: "The instance is checked again at decision time so a reused pid
// or an exec never inherits an approval". A process that turned
// address-space randomisation off for itself (personality
// ADDR_NO_RANDOMIZE, `setarch -R`: no privilege needed, inherited across
// exec) gets a session rooted at itself, then execs (a new program image,
// fresh interpreter state, code re-read from disk) with the same argv, cwd
// and environment: the same instance key. The daemon held the process's
// address space (/proc/<pid>/pagemap) since it connected, which reads
// nothing after the exec: the new program is refused (unidentified_peer,
// saying why and what to do), with no card and not under the session, and
// so is every later connection of it; its old session ends.
import t from 'tap';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { realpathSync } from 'node:fs';
import { startStack, Card } from '../helpers/stack';
import { cli } from '../helpers/postern';
import { ControlServer, writeIdentityAgent } from '../helpers/identity-agent';

t.test('an exec of a process with randomisation off does not inherit its session', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'norandom-secret-0123456789',
  );
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return cards.length === 1 ? { decision: 'session', root_key: card.process.key } : { decision: 'deny' };
  });
  const script = writeIdentityAgent();
  t.teardown(() => script.cleanup());
  const control = await ControlServer.listen(join(s.h.dir, 'control.sock'));
  t.teardown(() => control.close());
  const py = realpathSync('/usr/bin/python3');
  const argv = [py, script.path, '--control', control.path];
  const proc = spawn('setarch', ['-R', ...argv], { cwd: script.dir, stdio: ['ignore', 'ignore', 'inherit'] });
  t.teardown(() => proc.kill('SIGKILL'));
  const agent = await control.next();
  const body = { credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') };
  let r = await agent.request(s.sock, body);
  t.equal(r.status, 200, 'first program: approved, session rooted at itself');
  t.equal(cards.length, 1);
  await agent.exec(argv, script.dir);
  const again = await control.next();
  t.equal(again.pid, agent.pid, 'the same pid, a new program image');
  r = await again.request(s.sock, body);
  t.equal(r.status, 403, 'not served under the old session');
  t.match(r.json, {
    error: { code: 'unidentified_peer', message: /exec'd the program it ran.*start the program afresh/ },
  });
  t.equal(cards.length, 1, 'no card: the key names two programs, so it names neither');
  r = await again.request(s.sock, body);
  t.equal(r.status, 403, 'a retry on a new connection is refused too');
  const listed = cli(s.h, ['sessions', '--json']);
  t.equal(listed.code, 0, listed.stderr);
  t.same(JSON.parse(listed.stdout), { sessions: [] }, 'the session rooted at the old program ended');
  await again.exit();
});
