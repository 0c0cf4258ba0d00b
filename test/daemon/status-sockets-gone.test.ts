// The socket files of a running daemon deleted: `postern status`, `postern
// daemon`, `postern doctor` and every command that needs the daemon name the running daemon's pid (the
// kernel names the holder of its one-daemon-per-home lock) and say to
// restart it; following that advice brings a reachable daemon back. With no
// daemon at all, they still say to start one.
import t from 'tap';
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon } from '../helpers/postern';

interface Finding {
  level: string;
  what: string;
  fix?: string;
}

t.test('a running daemon whose sockets were deleted is named by its pid', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  // The CLI runs node through /usr/bin/env, which execs: the pid is node's.
  const pid = d.proc.pid!;
  t.equal(JSON.parse(cli(h, ['status', '--json']).stdout).pid, pid, 'the daemon answers as pid ' + pid);
  const admin = join(h.home, 'admin.sock');
  const agent = join(h.home, 'agent.sock');
  unlinkSync(admin);
  unlinkSync(agent);
  const sshAgent = join(h.home, 'ssh-agent.sock');
  unlinkSync(sshAgent);
  const restart = `restart it: stop pid ${pid} (\`kill ${pid}\`), then run \`postern daemon\``;

  const status = cli(h, ['status']);
  t.equal(status.code, 3, 'unreachable');
  t.equal(
    status.stderr,
    `postern: the postern daemon (pid ${pid}) is running for ${h.home}, but its admin socket ${admin} is missing; ${restart}\n`,
  );
  t.notMatch(status.stderr, /start it with/, 'not told to start a daemon that runs');

  // Every command that needs the daemon says the same, not "start it".
  for (const args of [['lock'], ['sessions'], ['cred', 'list'], ['unlock', '--passphrase-file', h.passFile]]) {
    const r = cli(h, args);
    t.equal(r.code, 3, `${args[0]}: unreachable`);
    t.equal(
      r.stderr,
      `postern: the postern daemon (pid ${pid}) is running for ${h.home}, but its admin socket ${admin} is missing; ${restart}\n`,
      `${args.join(' ')}: names the running daemon`,
    );
  }

  const second = cli(h, ['daemon']);
  t.equal(second.code, 1, 'a second daemon still refuses');
  t.equal(
    second.stderr,
    `postern daemon: another postern daemon (pid ${pid}) is already running for ${h.home}; use it (\`postern status\`), or, if its sockets are gone, ${restart}\n`,
  );

  const doctor = cli(h, ['doctor', '--json']);
  t.equal(doctor.code, 1);
  const findings = (JSON.parse(doctor.stdout) as { findings: Finding[] }).findings;
  t.same(
    findings.filter((f) => /socket/.test(f.what)),
    [
      {
        level: 'fail',
        what: `admin socket ${admin} does not exist, but the daemon (pid ${pid}) is running`,
        fix: restart,
      },
      {
        level: 'fail',
        what: `agent socket ${agent} does not exist, but the daemon (pid ${pid}) is running`,
        fix: restart,
      },
      {
        level: 'fail',
        what: `ssh-agent socket ${sshAgent} does not exist, but the daemon (pid ${pid}) is running`,
        fix: restart,
      },
    ],
  );
  t.match(
    cli(h, ['doctor']).stdout,
    `[fail] admin socket ${admin} does not exist, but the daemon (pid ${pid}) is running — ${restart}\n`,
  );

  // The advice works: stop that pid, start again.
  process.kill(pid, 'SIGTERM');
  t.equal(await d.exited, 0, 'the daemon stopped cleanly');
  const gone = cli(h, ['status']);
  t.equal(gone.code, 3);
  t.match(gone.stderr, /not reachable at .*; start it with `postern daemon`/, 'no daemon: told to start one');
  const noDaemon = (JSON.parse(cli(h, ['doctor', '--json']).stdout) as { findings: Finding[] }).findings.filter((f) =>
    /socket/.test(f.what),
  );
  t.match(noDaemon, [
    { level: 'warn', fix: 'start the daemon: `postern daemon`' },
    { level: 'warn', fix: 'start the daemon: `postern daemon`' },
  ]);
  const again = await startDaemon(h);
  t.teardown(() => again.stop());
  t.equal(cli(h, ['status']).code, 0, 'restarted: reachable again');
});
