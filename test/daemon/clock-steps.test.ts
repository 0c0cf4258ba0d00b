// The daemon's durations under wall-clock steps (NTP step, a user changing
// the date, suspend/resume), with the real daemon under libfaketime
// (test/helpers/faketime-daemon.ts; Debian's faketime). Found and fixed: a
// wall clock stepped back stretched a session past session_ttl by the step
// and drained a rate budget for as long; a forward step (a suspended
// laptop) left the vault unlocked past unlock_max and auto_lock, which ran
// only on the monotonic clock. Limits now hold by both clocks
// (daemon/two-clocks.ts).
import t from 'tap';
import type { Test } from 'tap';
import { cli } from '../helpers/postern';
import { startStack, Stack } from '../helpers/stack';
import { haveFaketime, makeClock, startFakeDaemon, sleep, Clock } from '../helpers/faketime-daemon';
import type { Daemon } from '../helpers/postern';

if (!haveFaketime) {
  t.fail('libfaketime is not installed: apt-get install -y faketime (.ci/run installs it)');
} else {
  const def = (name: string, port: number, extra = ''): string =>
    `name = "${name}"\nkind = "http"\n${extra}\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\n`;

  // A stack whose daemon runs under faketime (the stack's own daemon is
  // stopped and replaced on the same home, then unlocked).
  async function fakeStack(
    tt: Test,
    config: string,
    startOffset = '+0',
  ): Promise<{ s: Stack; d: Daemon; clock: Clock; get: (cred: string) => Promise<{ status: number; json: any }> }> {
    const s = await startStack({ config });
    await s.d.stop();
    const clock = makeClock(s.h.dir);
    clock.set(startOffset);
    const d = await startFakeDaemon(s.h, clock);
    tt.teardown(async () => {
      await d.stop();
      await s.close();
    });
    const u = cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
    if (u.code !== 0) throw new Error(`unlock: ${u.stderr}`);
    const get = (cred: string) =>
      s.request({ credential: cred, method: 'GET', url: s.url('api.example.test', '/x') }) as Promise<{
        status: number;
        json: any;
      }>;
    return { s, d, clock, get };
  }

  const status = (s: Stack): any => JSON.parse(cli(s.h, ['status', '--json']).stdout);
  const code = (r: { json: any }): string => r.json?.error?.code ?? `status ${(r as any).status}`;

  t.test('a backward wall-clock step does not extend a session past session_ttl', async (t) => {
    // The daemon's clock starts an hour fast and is then corrected (an NTP
    // step back to the true time), so the test upstream's certificate, made
    // just now, stays valid for the daemon throughout.
    const { s, d, clock, get } = await fakeStack(t, 'session_ttl = "10s"', '+1h');
    s.addCredential('api', def('api', s.up.port), 'tok_secret_0001');

    // Control: no step. The session ends after session_ttl; with no
    // approver attached the next request is refused `no_approver`.
    let a = await s.approver();
    t.equal((await get('api')).status, 200, 'session approved, request done');
    a.close();
    await sleep(12_000);
    t.equal(code(await get('api')), 'no_approver', 'control: after session_ttl (no clock step) the session is over');

    // Same again, but the wall clock steps back one hour after approval.
    a = await s.approver();
    t.equal((await get('api')).status, 200, 'second session approved');
    a.close();
    clock.set('+0');
    await sleep(12_000);
    const after = await get('api');
    const sessions = status(s).sessions;
    t.comment(
      `after the clock was stepped back 1 h and 12 s of real time: ${after.status} ${code(after)}; sessions: ${JSON.stringify(sessions)}`,
    );
    t.equal(
      code(after),
      'no_approver',
      'session_ttl = 10s: 12 s of real time later the session must be over, whatever the wall clock did',
    );

    // The journal now has times that go backwards; verify is indifferent.
    await d.stop();
    const v = cli(s.h, ['audit', 'verify']);
    t.equal(v.code, 0, `audit verify accepts a journal whose times step back:\n${v.stdout}${v.stderr}`);
    const shown = cli(s.h, ['audit', 'show', '--json', '--passphrase-file', s.h.passFile]);
    const times = shown.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).time as string);
    const backwards = times.filter((x, i) => i > 0 && x < times[i - 1]!).length;
    t.comment(`journal entries whose time is before the previous entry's: ${backwards} of ${times.length}`);
  });

  t.test('a forward wall-clock step (suspend/resume) locks the vault past unlock_max and ends sessions', async (t) => {
    const { s, clock, get } = await fakeStack(t, 'auto_lock = "1m"\nunlock_max = "2m"\nsession_ttl = "1h"');
    s.addCredential('api', def('api', s.up.port), 'tok_secret_0002');
    const a = await s.approver();
    t.equal((await get('api')).status, 200, 'session approved');
    a.close();
    // Suspend for 3 h: CLOCK_REALTIME jumps, CLOCK_MONOTONIC does not count it.
    clock.set('+3h');
    // The wall-clock deadlines are looked at every 5 s.
    for (let i = 0; i < 30 && status(s).locked !== true; i++) await sleep(500);
    const st = status(s);
    t.comment(
      `after +3h: locked=${st.locked} unlocked_at=${st.unlocked_at} auto_lock=${JSON.stringify(st.auto_lock)} unlock_max=${JSON.stringify(st.unlock_max)} sessions=${st.sessions.length}`,
    );
    t.equal(st.sessions.length, 0, 'the session (wall clock) ended at resume');
    t.equal(st.locked, true, 'unlocked 3 h by the wall clock with unlock_max = 2m: the vault must be locked');
    const r = await get('api');
    t.comment(`a request after resume: ${r.status} ${code(r)}`);
  });

  t.test('a backward step: approval_timeout and auto_lock still fire on time (monotonic timers)', async (t) => {
    const { s, clock, get } = await fakeStack(t, 'auto_lock = "12s"\napproval_timeout = "4s"');
    s.addCredential('api', def('api', s.up.port), 'tok_secret_0003');
    clock.set('-1d');
    const a = await s.approver(() => null); // attached, never decides
    const t0 = Date.now();
    const r = await get('api');
    const waited = Date.now() - t0;
    a.close();
    t.equal(code(r), 'approval_timeout', 'the card times out');
    t.ok(waited < 15_000, `after about approval_timeout (${waited} ms)`);
    await sleep(16_000);
    const st = status(s);
    t.equal(st.locked, true, `auto_lock fired although the wall clock went back a day (${st.lock_reason})`);
  });

  t.test('a backward wall-clock step does not starve a rate-limited credential', async (t) => {
    const { s, clock, get } = await fakeStack(t, '');
    s.addCredential('rated', def('rated', s.up.port, 'rate = "60/min"'), 'tok_secret_0004');
    await s.approver();
    t.equal((await get('rated')).status, 200, 'first request within budget');
    clock.set('-1h');
    await sleep(1_500);
    const r = await get('rated');
    t.comment(`after a -1h step: ${r.status} ${JSON.stringify(r.json?.error ?? {})}`);
    t.equal(r.status, 200, 'rate = 60/min, one request sent in the last minute: the next is within budget');
    clock.set('+0');
    await sleep(1_500);
    const back = await get('rated');
    t.comment(`clock restored: ${back.status} ${code(back)}`);
  });
}
