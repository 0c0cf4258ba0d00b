// An unlucky machine: the terminal running `postern daemon` goes away (SSH
// drops, the window is closed), which sends SIGHUP; or an admin sends
// `kill -HUP`, as one does to ask a daemon to reload. SPEC §9: a checkpoint
// is signed "at lock and at shutdown", and the daemon's stop is journaled.
// Whatever the daemon does with SIGHUP (ignore it, reload, or stop), it must
// not die abruptly leaving a journal that `postern audit verify` rejects
// and no record of its stop. SIGTERM is the reference: it does all this.
import t from 'tap';
import { cli, startDaemon, makeHome, init, eventually, credAdd } from '../helpers/postern';

const DEF = `name = "api"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\n`;

for (const sig of ['SIGTERM', 'SIGHUP'] as const) {
  t.test(`${sig} right after a credential change: the journal verifies afterwards`, async (t) => {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    t.equal(init(h).code, 0);
    const d = await startDaemon(h);
    t.teardown(() => {
      if (d.proc.exitCode === null) d.proc.kill('SIGKILL');
    });
    t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
    const add = credAdd(h, 'd', DEF, 'tok_abcdefgh12345678\n');
    t.equal(add.code, 0, add.stderr);
    d.proc.kill(sig);
    const gone = await eventually(() => d.proc.exitCode !== null || d.proc.signalCode !== null, 3000);
    if (!gone) {
      // Survived the signal: it must still serve, unchanged.
      const st = cli(h, ['status', '--json']);
      t.equal(st.code, 0, 'still answers');
      t.equal(JSON.parse(st.stdout).locked, false, 'still unlocked as before');
      return;
    }
    t.equal(
      d.proc.signalCode,
      null,
      `the daemon exited by itself, not killed by ${sig} (signal: ${d.proc.signalCode})`,
    );
    const v = cli(h, ['audit', 'verify']);
    t.equal(v.code, 0, `audit verify accepts the journal without --allow-unsigned-tail:\n${v.stdout}${v.stderr}`);
    const d2 = await startDaemon(h);
    t.teardown(() => d2.stop());
    t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
    const shown = cli(h, ['audit', 'show', '--json', '--passphrase-file', h.passFile]);
    const kinds = shown.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { kind?: string }).kind ?? '');
    const stops = kinds.filter((k) => k === 'daemon_stop').length;
    t.ok(stops >= 1, `the daemon's stop is journaled (kinds seen: ${[...new Set(kinds)].join(',')})`);
  });
}
