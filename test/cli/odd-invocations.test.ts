// Invocations a careful CLI answers in its own words, at once: a daemon
// that stops answering (status waited for ever), an empty name (refused in
// words meant for another reader), an option given twice (the last one
// silently won: -X GET -X DELETE sent a DELETE), a POSTERN_AGENT_SOCKET that
// is not a socket (told to start the daemon), control characters in a name
// (echoed raw to the terminal). Each row failed before.
import t from 'tap';
import http from 'node:http';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cli, cliAsync, init, makeHome, startDaemon, unlockedHome } from '../helpers/postern';
import { runTimed } from '../helpers/cli-timed';

t.test('a stopped (SIGSTOP) daemon: status says it does not answer, rather than hanging', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(async () => {
    d.proc.kill('SIGCONT');
    await d.stop();
  });
  const pid = d.proc.pid!;
  // startDaemon spawns /usr/bin/env, which execs node: the same pid.
  process.kill(pid, 'SIGSTOP');
  const r = await runTimed(h.env, ['status'], { ms: 15_000 });
  process.kill(pid, 'SIGCONT');
  t.notOk(r.timedOut, `ends by itself within 15 s (killed after ${r.ms} ms, stderr ${JSON.stringify(r.stderr)})`);
  t.equal(r.code, 3, 'exit 3: the daemon is not reachable');
});

t.test('cred show/rm/update "": a usage error in the CLI user\'s words', async (t) => {
  const h = await unlockedHome(t);
  const def = h.file(
    'd.toml',
    'name = "x"\nkind = "http"\n[inject]\nheader = "A"\ntemplate = "{secret}"\n[[allow]]\nhost = "a.example"\n',
  );
  for (const args of [
    ['cred', 'show', ''],
    ['cred', 'rm', '', '--passphrase-file', h.passFile],
    ['cred', 'update', '', '--file', def, '--passphrase-file', h.passFile],
  ]) {
    const r = cli(h, args);
    const name = args.slice(0, 2).join(' ');
    t.notMatch(
      r.stderr,
      /use the postern CLI/,
      `${name} "": not told to use the CLI it is using (${JSON.stringify(r.stderr.trim())})`,
    );
    t.equal(r.code, 2, `${name} "": exit 2 (usage)`);
  }
});

t.test('request http: an option given twice is an error, not "the last one wins"', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const sock = join(h.dir, 'agent.sock');
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    let b = '';
    req.on('data', (d: Buffer) => (b += d.toString()));
    req.on('end', () => {
      seen.push(b);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ error: { code: 'denied_policy', message: 'probe: refused' } }));
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
  t.teardown(() => server.close());
  const env = { ...h.env, POSTERN_AGENT_SOCKET: sock };
  const cases: [string, string[]][] = [
    ['--credential', ['--credential', 'github', '--credential', 'prod-admin', '--url', 'https://a.example/']],
    ['--url', ['--credential', 'github', '--url', 'https://a.example/', '--url', 'https://b.example/']],
    ['--method', ['--credential', 'github', '--url', 'https://a.example/', '-X', 'GET', '-X', 'DELETE']],
  ];
  for (const [opt, args] of cases) {
    const before = seen.length;
    const r = await cliAsync({ env }, ['request', 'http', ...args]);
    t.equal(r.code, 2, `${opt} twice: usage error (got ${r.code})`);
    t.equal(seen.length, before, `${opt} twice: nothing sent (sent ${JSON.stringify(seen.slice(before))})`);
  }
});

t.test('POSTERN_AGENT_SOCKET naming a directory: the message names the variable', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const dir = join(h.dir, 'not-a-socket');
  mkdirSync(dir);
  const r = cli({ env: { ...h.env, POSTERN_AGENT_SOCKET: dir } }, [
    'request',
    'http',
    '--credential',
    'x',
    '--url',
    'https://a.example/',
  ]);
  t.equal(r.code, 3);
  // Told "start it with `postern daemon`" while the daemon runs; the
  // variable that sent the CLI to the wrong place is not named.
  t.match(r.stderr, /POSTERN_AGENT_SOCKET/, `names POSTERN_AGENT_SOCKET: ${JSON.stringify(r.stderr.trim())}`);
  t.notMatch(r.stderr, /start it with `postern daemon`/, 'does not ask to start a daemon that runs');
  rmSync(dir, { recursive: true });
});

t.test('control characters in a name given on the command line are not echoed raw', async (t) => {
  const h = await unlockedHome(t);
  const r = cli(h, ['cred', 'show', 'api\x1b]0;pwned\x07\x1b[2K\rpostern: ok']);
  t.equal(r.code, 1);
  t.notMatch(
    r.stderr,
    /[\x00-\x08\x0b-\x1f\x7f]/,
    `stderr carries no raw control character: ${JSON.stringify(r.stderr)}`,
  );
});
