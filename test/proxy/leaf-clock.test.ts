// The proxy front door's cached leaf certificates (SPEC §11,
// proxy.leaf_validity) after the daemon's wall clock is corrected backwards.
// A leaf is signed with notBefore = now - 1 min and cached until 90 % of its
// validity by the wall clock. A clock that ran fast and is stepped back
// (NTP) leaves cached leaves "not yet valid" for clients. Real daemon under
// libfaketime (test/helpers/faketime-daemon.ts), real curl through the agent
// socket. Found and fixed: a leaf cached while the clock ran fast was served
// after the clock was set back ("certificate is not yet valid" for as long
// as the step); it is signed again.
import t from 'tap';
import { cliBytes } from '../helpers/cli-bytes';
import { cli } from '../helpers/postern';
import { startStack } from '../helpers/stack';
import { LIBFAKETIME, haveFaketime, makeClock, startFakeDaemon } from '../helpers/faketime-daemon';

if (!haveFaketime) {
  t.fail('libfaketime is not installed: apt-get install -y faketime (.ci/run installs it)');
} else {
  t.test('a cached leaf signed while the clock ran fast is served after the clock is corrected', async (t) => {
    const names = ['api.example.test', 'b.example.test'];
    const s = await startStack({
      names,
      records: { 'api.example.test': { A: ['127.0.0.1'] }, 'b.example.test': { A: ['127.0.0.1'] } },
    });
    await s.d.stop();
    const clock = makeClock(s.h.dir);
    const d = await startFakeDaemon(s.h, clock);
    t.teardown(async () => {
      await d.stop();
      await s.close();
    });
    t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
    s.addCredential(
      'api',
      `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "*.example.test"\nports = [${s.up.port}]\n`,
      'tok_leaf_0001',
    );
    // curl under `postern run` (its proxy and CA bundle), with no
    // placeholder: no credential is used, no approval is asked, but the host
    // is covered by a rule, so the daemon terminates TLS with a leaf.
    const curl = async (host: string): Promise<{ code: number | null; out: string }> => {
      // run and curl share the daemon's faked clock, as on a real machine.
      const env = {
        ...s.h.env,
        LD_PRELOAD: LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE: clock.file,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      };
      const r = await cliBytes(env, [
        'run',
        '--',
        'curl',
        '-sS',
        '--max-time',
        '20',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        s.url(host, '/x'),
      ]);
      return { code: r.code, out: `${r.stdout.toString()} ${r.stderr}`.trim() };
    };
    const a0 = await curl('api.example.test');
    t.equal(a0.code, 0, `true time: proxied request works (${a0.out})`);
    clock.set('+1h'); // the clock runs an hour fast ...
    const b1 = await curl('b.example.test');
    t.equal(b1.code, 0, `clock fast: a leaf for b.example.test is signed and cached (${b1.out})`);
    clock.set('+0'); // ... and NTP steps it back
    const a2 = await curl('api.example.test');
    t.equal(a2.code, 0, `corrected: the leaf signed at true time still works (${a2.out})`);
    const b2 = await curl('b.example.test');
    t.comment(`corrected: b.example.test -> exit ${b2.code}: ${b2.out}`);
    t.equal(
      b2.code,
      0,
      'corrected: b.example.test must work too (the daemon should not serve a leaf that is not yet valid)',
    );
  });
}
