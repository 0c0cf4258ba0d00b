// `postern approver --auto` against the real daemon with real agent
// processes: it answers every card (a session rooted where --root-depth
// says, once for each-use, or deny) and prints one line per decision; the
// sessions it approves are listed and revoked through `postern sessions`;
// a second approver is told its decision was not taken; SIGTERM and SIGINT
// end it with exit 0. (Reconnecting after a daemon restart: reconnect.test.ts.)
import t, { Test } from 'tap';
import { spawn, ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { cli, CLI, eventually, Home } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';
import { startStack, Stack } from '../helpers/stack';
import { Agent, writeAgentScript } from '../helpers/agent-child';

interface Approver {
  proc: ChildProcess;
  lines(): Record<string, unknown>[];
  stderr(): string;
  waitLine(match: (l: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

// A real approver process (JSON lines on stdout).
function startApprover(t: Test, h: Home, args: string[]): Approver {
  const proc = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'approver', '--json', '--passphrase-file', h.passFile, ...args],
    { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  const lines = (): Record<string, unknown>[] =>
    out
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const a: Approver = {
    proc,
    lines,
    stderr: () => err,
    async waitLine(match, ms = 15_000) {
      let found: Record<string, unknown> | undefined;
      const ok = await eventually(() => (found = lines().find(match)) !== undefined, ms);
      if (!ok) throw new Error(`no such approver line within ${ms} ms; stdout:\n${out}\nstderr:\n${err}`);
      return found!;
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
  t.teardown(() => void a.stop('SIGKILL'));
  return a;
}

const CRED = (name: string, port: number, approve = 'session'): string =>
  `name = "${name}"\nkind = "http"\napprove = "${approve}"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;

// One set-up for the whole file (it is the slow part): the stack, the
// credentials, and a parent agent whose children make the requests.
let s: Stack;
let parent: Agent;
// For checks that are not about the CLI (faster than a CLI process each).
let admin: TestAdmin;
t.before(async () => {
  s = await startStack();
  admin = await TestAdmin.connect(join(s.h.home, 'admin.sock'));
  s.addCredential('api', CRED('api', s.up.port), 'auto-secret-0123456789');
  s.addCredential('each', CRED('each', s.up.port, 'each-use'), 'each-secret-0123456789');
  const script = writeAgentScript();
  t.teardown(() => script.cleanup());
  parent = await Agent.start(script);
});
t.teardown(async () => {
  admin?.close();
  parent?.kill();
  await s?.close();
});

interface SessionView {
  id: string;
  credential: string;
  root: { pid: number; exe: string };
}
async function sessions(): Promise<SessionView[]> {
  return ((await admin.request('sessions.list'))['result'] as { sessions: SessionView[] }).sessions;
}
async function revokeAll(): Promise<void> {
  await admin.request('sessions.revoke', { all: true });
}

const get = (cred: string): Record<string, unknown> => ({
  credential: cred,
  method: 'GET',
  url: s.url('api.example.test', '/v1/x'),
});

const decided =
  (id?: unknown) =>
  (l: Record<string, unknown>): boolean =>
    l['event'] === 'decided' && (id === undefined || l['id'] === id);

t.test('approve: sessions at the requester or an ancestor, once for each-use; listed and revoked', async (t) => {
  let ap = startApprover(t, s.h, ['--auto', 'approve']);
  const attached = await ap.waitLine((l) => l['event'] === 'attached');
  t.match(attached, { pending: 0, policy: /session rooted at the requesting process/ });

  // A child of the parent agent asks; the session is rooted at the child.
  const c1 = await parent.spawn({ id: 'c1' });
  let r = await c1.request(s.sock, get('api'));
  t.equal(r.status, 200, r.text.slice(0, 200));
  const l1 = await ap.waitLine(decided());
  t.match(l1, { credential: 'api', pid: c1.pid, decision: 'session', root_pid: c1.pid, taken: true });
  r = await c1.request(s.sock, get('api'));
  t.equal(r.status, 200, 'the session covers the next request of the same process');
  t.equal(ap.lines().filter(decided()).length, 1, 'without a second card');

  // The CLI lists it, then ends it.
  const list = JSON.parse(cli(s.h, ['sessions', '--json']).stdout) as { sessions: SessionView[] };
  t.equal(list.sessions.length, 1);
  t.match(list.sessions[0], { credential: 'api', root: { pid: c1.pid } });
  const text = cli(s.h, ['sessions']);
  t.match(text.stdout, new RegExp(`^${list.sessions[0]!.id}  api  root pid ${c1.pid} \\S+  expires \\d{4}-`, 'm'));
  const rv = cli(s.h, ['sessions', 'revoke', list.sessions[0]!.id]);
  t.equal(rv.code, 0, rv.stderr);
  t.equal(rv.stdout, `session ${list.sessions[0]!.id} ended\n`);
  t.equal(cli(s.h, ['sessions']).stdout, 'no sessions\n');
  r = await c1.request(s.sock, get('api'));
  t.equal(r.status, 200);
  await ap.waitLine((l) => decided()(l) && l['id'] !== l1['id']);
  t.equal(ap.lines().filter(decided()).length, 2, 'after the revoke, a new card');

  // Each-use: allowed once, and asked again every time.
  r = await c1.request(s.sock, get('each'));
  t.equal(r.status, 200, r.text.slice(0, 200));
  r = await c1.request(s.sock, get('each'));
  t.equal(r.status, 200, r.text.slice(0, 200));
  const onces = ap.lines().filter((l) => decided()(l) && l['credential'] === 'each');
  t.equal(onces.length, 2, 'two cards for two requests');
  t.match(onces, [
    { decision: 'once', root_pid: null, taken: true },
    { decision: 'once', root_pid: null, taken: true },
  ]);

  const all = cli(s.h, ['sessions', 'revoke', '--all']);
  t.equal(all.stdout, '1 session ended\n', 'revoke --all');
  t.same(await sessions(), []);
  t.equal(await ap.stop('SIGTERM'), 0, 'SIGTERM: exit 0');
  t.match(ap.lines().at(-1), { event: 'stopped' });

  // --root-depth 1: the session is rooted at the parent agent and covers
  // its other children without a new card.
  ap = startApprover(t, s.h, ['--auto', 'approve', '--root-depth', '1']);
  await ap.waitLine((l) => l['event'] === 'attached');
  const c2 = await parent.spawn({ id: 'c2' });
  r = await c2.request(s.sock, get('api'));
  t.equal(r.status, 200, r.text.slice(0, 200));
  t.match(await ap.waitLine(decided()), { pid: c2.pid, decision: 'session', root_pid: parent.pid, taken: true });
  const c3 = await parent.spawn({ id: 'c3' });
  r = await c3.request(s.sock, get('api'));
  t.equal(r.status, 200, 'a sibling is covered by the session rooted at the parent');
  t.equal(ap.lines().filter(decided()).length, 1);
  t.equal((await sessions())[0]!.root.pid, parent.pid);
  await revokeAll();
  t.equal(await ap.stop('SIGINT'), 0, 'SIGINT: exit 0');

  // (--root-depth beyond the chain picks the highest ancestor: keys.test.ts.)
});

t.test('deny, and a second approver is told its decision was not taken', async (t) => {
  const deny = startApprover(t, s.h, ['--auto', 'deny']);
  await deny.waitLine((l) => l['event'] === 'attached');
  const c = await parent.spawn({ id: 'd' });
  let r = await c.request(s.sock, get('api'));
  t.equal(r.status, 403);
  t.equal((r.json as { error: { code: string } }).error.code, 'denied_by_user');
  t.match(await deny.waitLine(decided()), { credential: 'api', pid: c.pid, decision: 'deny', taken: true });
  // A second approver joins; both answer the next card at once.
  const approve = startApprover(t, s.h, ['--auto', 'approve']);
  await approve.waitLine((l) => l['event'] === 'attached');
  r = await c.request(s.sock, get('each'));
  const d1 = await deny.waitLine((l) => decided()(l) && l['credential'] === 'each');
  const d2 = await approve.waitLine(decided());
  t.equal(d1['id'], d2['id'], 'both saw the same card');
  t.same([d1['taken'], d2['taken']].sort(), [false, true], 'one decision taken, the other reported as not taken');
  t.equal(r.status, d1['taken'] ? 403 : 200, 'the reply follows the decision that was taken');
  t.equal(await deny.stop(), 0);
  t.equal(await approve.stop(), 0);
});
