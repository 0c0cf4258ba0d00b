// The interactive approver in a real terminal (tmux), against the real
// daemon and real agent processes: the passphrase typed at a no-echo
// prompt; a card for a request from a process with a hostile command line
// (an ANSI clear-screen, a bidi override, a zero-width joiner), shown
// escaped and flagged, with the concrete action; a session rooted at an
// ancestor with the key 1, covering the next child without a card; an
// each-use credential asked by a deleted executable, where only deny and
// allow once work; two pending cards (the oldest shown with a count), a
// denial, a withdrawal when the requester dies; q quits with exit 0.
import t from 'tap';
import { createHash } from 'node:crypto';
import { copyFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { cli, CLI, PASSPHRASE } from '../helpers/postern';
import { startStack } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';
import { Tmux } from '../helpers/tmux';
import { KEY_GRACE_MS } from '../../cli/approver/run';

const CRED = (name: string, port: number, approve: string): string =>
  `name = "${name}"\nkind = "http"\napprove = "${approve}"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
// Keys pressed right after a card appears are ignored on purpose.
const settle = (): Promise<void> => sleep(KEY_GRACE_MS + 150);

t.test('the interactive approver in a terminal', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential('api', CRED('api', s.up.port, 'session'), 'tmux-secret-0123456789');
  s.addCredential('each', CRED('each', s.up.port, 'each-use'), 'each-secret-0123456789');
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  const parent = await Agent.start(script);
  t.teardown(() => parent.kill());
  const get = (cred: string): Record<string, unknown> => ({
    credential: cred,
    method: 'GET',
    url: s.url('api.example.test', '/v1/x'),
  });

  const tm = Tmux.start([process.execPath, CLI, 'approver'], { env: s.h.env, width: 200, height: 50 });
  t.teardown(() => tm.kill());
  await tm.waitFor(/^Vault passphrase:$/m);
  tm.type(PASSPHRASE);
  tm.send('Enter');
  let screen = await tm.waitFor(/No request is waiting for approval/, 20_000);
  t.notMatch(screen, new RegExp(PASSPHRASE), 'the passphrase was not echoed');
  t.match(screen, /^postern approver — attached as approver [0-9a-f]+$/m);

  t.test('a hostile command line, escaped; a session rooted at ancestor 1', async (t) => {
    const hostile = ['clear\x1b[2J\x1b[Hscreen', 'safe\u202etxt.exe', 'ad\u200dmin'];
    const c1 = await parent.spawn({ id: 'c1', argv: [process.execPath, script.path, ...hostile] });
    const body = '{"a":1}';
    const reply = c1.request(s.sock, {
      credential: 'api',
      method: 'POST',
      url: s.url('api.example.test', '/v1/items?q=1'),
      headers: { 'content-type': 'application/json' },
      body,
    });
    screen = await tm.waitFor(/Approval request [0-9a-f]{12}/);
    t.match(
      screen,
      /^postern approver — attached as approver [0-9a-f]+$/m,
      'the top of the screen is still there: the clear-screen was not run',
    );
    t.notMatch(screen, /taller than the terminal/, 'the card fits in 50 rows');
    t.match(screen, /^ {2}credential +api$/m);
    t.match(screen, /^ {2}approve +session/m);
    t.match(screen, /^ {4}method +POST$/m);
    t.match(screen, /^ {4}scheme +https$/m);
    t.match(screen, /^ {4}host +api\.example\.test$/m);
    t.match(screen, /^ {4}address +127\.0\.0\.1 {2}\(checked/m);
    t.match(screen, new RegExp(`^ {4}port +${s.up.port}$`, 'm'));
    t.match(screen, /^ {4}path +\/v1\/items$/m);
    t.match(screen, /^ {4}query +\?q=1$/m);
    t.match(screen, /^ {4}body size +7 bytes$/m);
    t.match(screen, new RegExp(`^ {4}body sha256 +${createHash('sha256').update(body).digest('hex')}$`, 'm'));
    t.match(
      screen,
      new RegExp(`^ {2}\\[s\\] requester +pid ${c1.pid} .*<- holds escaped characters: read carefully$`, 'm'),
    );
    t.match(screen, new RegExp(`^ {2}\\[1\\] ancestor 1 +pid ${parent.pid} `, 'm'));
    const argv = `"${process.execPath}" "${script.path}" "clear\\x1b[2J\\x1b[Hscreen" "safe\\u{202E}txt.exe" "ad\\u{200D}min"`;
    t.ok(
      screen.split('\n').some((l) => /^ +argv +/.test(l) && l.replace(/^ +argv +/, '') === argv),
      'each argument quoted, every hidden character escaped',
      { screen },
    );
    t.match(screen, /^ {2}d {2}deny {6}o {2}allow once {6}q {2}quit/m);
    t.match(
      screen,
      new RegExp(`^ {2}s {2}session rooted at the requester \\(pid ${c1.pid}\\) {6}1(…\\d)? {2}session rooted at`, 'm'),
    );

    await settle();
    tm.send('1');
    const r = await reply;
    t.equal(r.status, 200, r.text.slice(0, 200));
    screen = await tm.waitFor(new RegExp(`\\(api, pid ${c1.pid}\\): session approved, rooted at pid ${parent.pid}`));
    t.match(screen, /No request is waiting/);

    // Another child of the same parent: covered, no card.
    const c2 = await parent.spawn({ id: 'c2' });
    t.equal((await c2.request(s.sock, get('api'))).status, 200, 'a sibling is covered by the session');
    t.notMatch(tm.screen(), /Approval request/, 'no card was shown for it');
    const list = JSON.parse(cli(s.h, ['sessions', '--json']).stdout) as { sessions: { root: { pid: number } }[] };
    t.equal(list.sessions.length, 1);
    t.equal(list.sessions[0]!.root.pid, parent.pid, '`postern sessions` shows the root the human chose');
    t.equal(cli(s.h, ['sessions', 'revoke', '--all']).code, 0);
  });

  t.test('each-use, from a deleted executable: only deny or allow once', async (t) => {
    const copy = join(script.dir, 'node-copy');
    copyFileSync(process.execPath, copy);
    const c3 = await parent.spawn({ id: 'c3', argv: [copy, script.path] });
    unlinkSync(copy);
    const reply = c3.request(s.sock, get('each'));
    screen = await tm.waitFor(/Approval request [0-9a-f]{12}/);
    t.match(screen, /^ {2}approve +each-use/m);
    t.match(
      screen,
      new RegExp(`^ {6}requester +pid ${c3.pid} .*exe ${copy} \\(deleted\\) {2}\\[DELETED — `, 'm'),
      'the deleted executable is marked',
      { screen },
    );
    t.notMatch(screen, /^ {2}[s1-9] {2}session/m, 'no session offered');
    await settle();
    tm.send('s');
    tm.send('1');
    await sleep(300);
    t.match(tm.screen(), /Approval request/, 's and 1 do nothing for an each-use card');
    tm.send('o');
    const r = await reply;
    t.equal(r.status, 200, r.text.slice(0, 200));
    await tm.waitFor(new RegExp(`\\(each, pid ${c3.pid}\\): allowed once`));
  });

  t.test('two pending: the oldest with a count; deny; a withdrawal', async (t) => {
    const c4 = await parent.spawn({ id: 'c4' });
    const c5 = await parent.spawn({ id: 'c5' });
    const r4 = c4.request(s.sock, get('api'));
    await tm.waitFor(new RegExp(`\\[s\\] requester +pid ${c4.pid} `));
    const r5 = c5.request(s.sock, get('api'));
    screen = await tm.waitFor(/Approval request [0-9a-f]{12} {3}\(1 more waiting\)/);
    t.match(screen, new RegExp(`\\[s\\] requester +pid ${c4.pid} `), 'the oldest is shown');
    await settle();
    tm.send('d');
    const denied = await r4;
    t.equal(denied.status, 403);
    t.equal((denied.json as { error: { code: string } }).error.code, 'denied_by_user');
    screen = await tm.waitFor(new RegExp(`\\[s\\] requester +pid ${c5.pid} `));
    t.match(screen, new RegExp(`\\(api, pid ${c4.pid}\\): denied`));
    t.notMatch(screen, /more waiting/);
    // The requester dies while it waits: its card is withdrawn.
    process.kill(c5.pid, 'SIGKILL');
    void r5.catch(() => undefined);
    screen = await tm.waitFor(new RegExp(`\\(api, pid ${c5.pid}\\) withdrawn: withdrawn by the requester`));
    t.match(screen, /No request is waiting/);
  });

  t.test('q quits with exit 0', async (t) => {
    tm.send('q');
    t.equal(await tm.waitExit(), 0);
    t.match(tm.screen(), /approver stopped/);
    t.equal(JSON.parse(cli(s.h, ['status', '--json']).stdout).approvers, 0, 'detached');
  });
});
