// A listening socket is never connectable under a mode other than the one
// configured (SPEC §3): the mode is fixed at bind(2), not by a chmod after
// connections are already accepted. In-process checks use the moment Node
// emits 'listening' (after bind and listen, before listenUnix returns); the
// end-to-end check connects in a tight loop while the real daemon starts.
import t from 'tap';
import net from 'node:net';
import { lstatSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { listenUnix } from '../../daemon/sockets';
import { CLI, init, makeHome } from '../helpers/postern';

const modeOf = (p: string): number => lstatSync(p).mode & 0o777;
const octal = (m: number): string => m.toString(8).padStart(4, '0');

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pt-sock-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// The daemon runs with umask 077; so do these checks.
const savedUmask = process.umask(0o077);
t.teardown(() => process.umask(savedUmask));

// A separate process connects while this one is blocked in spawnSync, so
// nothing in this process (a chmod) can run between the two: the reply is
// the mode the socket had when the kernel accepted the connection.
const probe = `
  const net = require('node:net'); const fs = require('node:fs');
  const s = net.connect(process.argv[1]);
  s.on('connect', () => { process.stdout.write('connected ' + (fs.lstatSync(process.argv[1]).mode & 0o777).toString(8)); s.destroy(); });
  s.on('error', (e) => process.stdout.write('error ' + e.code));
`;
function connectFromChild(path: string): string {
  const r = spawnSync('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, '-e', probe, path], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return r.stdout;
}

t.test('Node binds and listens on a Unix path inside server.listen(), synchronously', async (t) => {
  const p = join(scratch(), 's.sock');
  const server = net.createServer((c) => c.destroy());
  t.teardown(() => server.close());
  server.listen(p);
  t.ok(lstatSync(p).isSocket(), 'the socket file exists when listen() returns');
  t.equal(
    connectFromChild(p),
    'connected 700',
    'and accepts connections before any callback ran (umask 077 gives 0700)',
  );
});

for (const mode of [0o600, 0o660, 0o604]) {
  t.test(`listenUnix(${octal(mode)}): that mode from the first connection on`, async (t) => {
    const p = join(scratch(), 'agent.sock');
    const server = net.createServer((c) => c.destroy());
    t.teardown(() => server.close());
    const atListening: { mode?: number; child?: string } = {};
    // Registered before listenUnix, so it runs before anything listenUnix
    // does after listening.
    server.on('listening', () => {
      atListening.mode = modeOf(p);
      atListening.child = connectFromChild(p);
    });
    await listenUnix(server, p, mode);
    t.equal(octal(atListening.mode!), octal(mode), 'the mode when the socket started listening');
    t.equal(atListening.child, `connected ${mode.toString(8)}`, 'a connection at that moment saw the configured mode');
    t.equal(octal(modeOf(p)), octal(mode), 'and afterwards');
    t.equal(octal(process.umask()), '0077', "the process's umask is restored");
  });
}

t.test('with a group to set: owner-only until the group is set, never wider', async (t) => {
  const p = join(scratch(), 'agent.sock');
  const server = net.createServer((c) => c.destroy());
  t.teardown(() => server.close());
  let born = -1;
  let child = '';
  server.on('listening', () => {
    born = modeOf(p);
    child = connectFromChild(p);
  });
  await listenUnix(server, p, 0o660, 'nogroup');
  t.equal(octal(born), '0600', 'born owner-only: its group is not yet the configured one');
  t.equal(child, 'connected 600');
  t.equal(octal(modeOf(p)), '0660');
  t.equal(lstatSync(p).gid, 65534, 'group nogroup');
  t.equal(octal(process.umask()), '0077');
});

t.test('a bad group is refused before any socket file exists; a failed bind restores the umask', async (t) => {
  const dir = scratch();
  const p = join(dir, 'agent.sock');
  const server = net.createServer();
  await t.rejects(listenUnix(server, p, 0o660, 'no-such-group-postern'), {
    name: 'Refusal',
    code: 'bad_config',
    message: 'daemon.agent_socket_group: no group named "no-such-group-postern"; create it or fix the config',
  });
  t.notOk(existsSync(p), 'no socket was created');

  const other = net.createServer();
  // libuv reports a bind in a missing directory as EACCES.
  await t.rejects(listenUnix(other, join(dir, 'missing', 'agent.sock'), 0o600), {
    code: 'EACCES',
    message: /missing\/agent\.sock/,
  });
  t.equal(octal(process.umask()), '0077', 'umask restored after the bind failed');
});

// A blocking connect-and-lstat loop in a separate process, racing the real
// daemon's start. Python because Node has no synchronous connect; Debian's
// python3 is there for node-gyp, which builds the native addon.
const racer = `
import json, os, socket, sys, time
paths = sys.argv[1:]
seen = {p: [] for p in paths}
sys.stdout.write('ready\\n'); sys.stdout.flush()
deadline = time.time() + 30
while time.time() < deadline and any(len(v) < 50 for v in seen.values()):
    for p in paths:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(p)
            seen[p].append(os.lstat(p).st_mode & 0o777)
        except OSError:
            pass
        finally:
            s.close()
print(json.dumps(seen))
`;

t.test('the real daemon: every connection made while it starts sees mode 0600', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const admin = join(h.home, 'admin.sock');
  const agent = join(h.home, 'agent.sock');
  const race = spawn('/usr/bin/python3', ['-c', racer, admin, agent], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  race.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const raceDone = new Promise<void>((r) => race.on('close', () => r()));
  while (!out.startsWith('ready\n')) await new Promise((r) => setTimeout(r, 10));

  const daemon = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'daemon'], {
    env: h.env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let logs = '';
  daemon.stderr.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<void>((r) => daemon.on('exit', () => r()));
  t.teardown(async () => {
    race.kill();
    daemon.kill('SIGTERM');
    await exited;
  });
  await raceDone;
  const seen = JSON.parse(out.slice('ready\n'.length)) as Record<string, number[]>;
  for (const p of [admin, agent]) {
    const modes = seen[p]!;
    t.ok(modes.length >= 50, `${p}: ${modes.length} connections made${modes.length ? '' : `; daemon said: ${logs}`}`);
    t.same([...new Set(modes.map(octal))], ['0600'], `${p}: the mode at every connection`);
  }
});
