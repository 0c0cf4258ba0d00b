// `postern run` is the process the daemon identifies for every request
// CMD's tree makes through its proxy (SPEC §11): a session rooted at it
// covers them. Node opens its inspector (an unauthenticated debugger on
// 127.0.0.1:9229, open to every local user) when the process gets SIGUSR1;
// in `postern run` that would let whoever connects run code as the run's
// root. The hardened commands install a SIGUSR1 listener of their own
// (shared/hardening.ts); run must not open the inspector either. Real
// `postern run`, a real peer on the agent socket.
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, eventually } from '../helpers/postern';
import { runsPeerHome } from '../helpers/runs-peer';

t.test('SIGUSR1 to postern run opens no debugger', async (t) => {
  const { h, env } = await runsPeerHome(t);
  const ready = join(h.dir, 'ready');
  const run = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'run', '--', 'sh', '-c', `touch ${ready}; sleep 2; exit 4`],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => run.on('exit', (c) => r(c)));
  t.ok(await eventually(() => existsSync(ready), 20_000), 'CMD started');
  run.kill('SIGUSR1');
  t.equal(await exited, 4, "run still ends with CMD's status");
  t.notMatch(stderr, /Debugger listening/, `no inspector: ${JSON.stringify(stderr)}`);
});
