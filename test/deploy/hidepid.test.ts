// The dedicated-user deployment on a host whose /proc is mounted
// hidepid=2 (a common hardening): the non-root daemon cannot see the agent
// user's /proc/<pid> at all (not even stat). SPEC §7: "Unreadable identity
// -> unidentified_peer". The daemon runs in a mount namespace of its own
// with such a /proc; the agent user is outside it. Expected: the agent's
// request refused 403 unidentified_peer, no card, nothing sent, the daemon
// alive and serving its own user.
import t from 'tap';
import { setprivAs } from '../helpers/identity-users';
import { findCanary, makeCanary } from '../helpers/canary';
import { deploy, entries, httpDef } from '../helpers/deploy-users';

t.test('a daemon that cannot see the agent user in /proc (hidepid=2)', { timeout: 120_000 }, async (t) => {
  const d = await deploy(t, {
    hidepid: true,
    handler: (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    },
  });
  const secret = makeCanary('HIDEPID');
  const r = d.addCred('api', httpDef('api', d.up.port), secret);
  t.equal(r.code, 0, r.stderr);
  const curl = (args: string[]): Promise<{ status: number; body: string; text: string }> =>
    setprivAs(
      d.agentUser,
      ['curl', '-sS', '--max-time', '30', '--unix-socket', d.agentSock, '-w', '\n%{http_code}', ...args],
      {
        cwd: d.agentHome,
      },
    ).then((x) => {
      const cut = x.stdout.lastIndexOf('\n');
      return { status: Number(x.stdout.slice(cut + 1)), body: x.stdout.slice(0, cut), text: x.stdout + x.stderr };
    });

  await t.test('POST /v1/http from the agent user: 403 unidentified_peer, no card, nothing sent', async (t) => {
    const cards = d.approver.cards.length;
    const res = await curl([
      '-H',
      'content-type: application/json',
      '--data',
      JSON.stringify({ credential: 'api', method: 'GET', url: `https://api.example.test:${d.up.port}/hidden` }),
      'http://postern/v1/http',
    ]);
    t.equal(res.status, 403, res.text);
    t.equal((JSON.parse(res.body) as { error?: { code?: string } }).error?.code, 'unidentified_peer', res.body);
    t.equal(d.approver.cards.length, cards, 'no card');
    t.equal(d.up.requests.length, 0, 'nothing sent');
    t.same(findCanary(res.text, secret), []);
  });

  await t.test('the daemon lives on and serves its own user', async (t) => {
    t.equal(d.daemon.exitCode, null, `daemon running (${d.daemonLog().slice(-500)})`);
    const s = d.postern('status');
    t.equal(s.code, 0, s.stderr);
    const j = d.journal();
    t.same(findCanary(j, secret), [], 'journal');
    t.same(findCanary(d.daemonLog(), secret), [], 'daemon log');
    t.comment(
      JSON.stringify(
        entries(j)
          .filter((e) => e['type'] === 'event')
          .slice(-2),
      ),
    );
  });
});
