import t from 'tap';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { loadNative, peerCred, peerCredOfSocket, pidfdOpen, projectRoot, socketFd } from '../../shared/native';
import { ROOT } from '../helpers/repo-root';

// Children running as another uid must not load tap's coverage hook (tap's
// processinfo plugin adds it to every child's NODE_OPTIONS), so they run
// through `env -u NODE_OPTIONS`.
const root = ROOT;
const addonFile = path.join(root, 'native', 'build', 'Release', 'postern_native.node');

t.test('loads from the project root, from shared/ and from dist/shared/', async (t) => {
  t.equal(projectRoot(path.join(root, 'shared')), root);
  t.equal(projectRoot(path.join(root, 'dist', 'shared')), root);
  t.equal(projectRoot(os.tmpdir()), null);
  const addon = loadNative();
  t.equal(loadNative(), addon, 'cached');
  t.same(Object.keys(addon).sort(), ['peerCred', 'pidfdOpen', 'setNonDumpable'], 'exports exactly three functions');
});

t.test('peerCred over a real Unix socket names this process from both ends', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-peercred-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const sockPath = path.join(dir, 's.sock');
  const server = net.createServer();
  server.listen(sockPath);
  await once(server, 'listening');
  t.teardown(() => server.close());

  const accepted = once(server, 'connection') as Promise<[net.Socket]>;
  const client = net.connect(sockPath);
  await once(client, 'connect');
  const [serverSide] = await accepted;
  t.teardown(() => {
    client.destroy();
    serverSide.destroy();
  });

  const me = { pid: process.pid, uid: process.getuid!(), gid: process.getgid!() };
  t.same(peerCred(socketFd(serverSide)), me, 'accepted socket: the connecting process');
  t.same(peerCred(socketFd(client)), me, 'client socket: the listening process');
  t.same(peerCredOfSocket(serverSide), me);
});

t.test('peerCred from a process of another uid reports that uid', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-peercred-'));
  fs.chmodSync(dir, 0o755);
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const sockPath = path.join(dir, 's.sock');
  const server = net.createServer();
  server.listen(sockPath);
  await once(server, 'listening');
  fs.chmodSync(sockPath, 0o777);
  t.teardown(() => server.close());

  const accepted = once(server, 'connection') as Promise<[net.Socket]>;
  const child = spawn(
    'env',
    [
      '-u',
      'NODE_OPTIONS',
      'setpriv',
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      process.execPath,
      '-e',
      `const s = require('net').connect(${JSON.stringify(sockPath)}); s.on('connect', () => setTimeout(() => s.end(), 2000));`,
    ],
    { stdio: 'ignore', env: {} },
  );
  const [sock] = await accepted;
  t.same(peerCredOfSocket(sock), { pid: child.pid, uid: 65534, gid: 65534 });
  sock.destroy();
  child.kill();
  await once(child, 'exit');
});

t.test('peerCred refuses bad descriptors and bad arguments', async (t) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'postern-peercred-')), 'f');
  fs.writeFileSync(file, '');
  const fd = fs.openSync(file, 'r');
  t.throws(() => peerCred(fd), { code: 'ENOTSOCK', message: /getsockopt\(SO_PEERCRED\) failed/ }, 'a regular file');
  fs.closeSync(fd);
  t.throws(() => peerCred(fd), { code: 'EBADF' }, 'a closed descriptor');
  fs.rmSync(path.dirname(file), { recursive: true });

  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  t.throws(() => addon.peerCred!('3'), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  t.throws(() => addon.peerCred!(), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 31]) {
    t.throws(() => addon.peerCred!(bad), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' }, `fd ${bad}`);
  }
});

t.test('socketFd refuses a socket without a descriptor', async (t) => {
  const unconnected = new net.Socket();
  t.throws(() => socketFd(unconnected), { name: 'Refusal', code: 'unidentified_peer' });
  t.throws(() => peerCredOfSocket(unconnected), { name: 'Refusal', code: 'unidentified_peer' });
});

t.test('peerCredOfSocket refuses a connection the kernel names no process for (TCP)', async (t) => {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const accepted = once(server, 'connection') as Promise<[net.Socket]>;
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const [sock] = await accepted;
  t.teardown(() => {
    client.destroy();
    sock.destroy();
  });
  t.equal(peerCred(socketFd(sock)).pid, 0, 'the raw call reports pid 0');
  t.throws(() => peerCredOfSocket(sock), { name: 'Refusal', code: 'unidentified_peer', message: /names no process/ });
});

t.test('pidfdOpen returns a pidfd for a live process and throws ESRCH for a dead one', async (t) => {
  const fd = pidfdOpen(process.pid);
  if (fd === null) {
    // Only acceptable on a kernel older than 5.3, which lacks pidfd_open.
    const [major = 0, minor = 0] = os.release().split('.').map(Number);
    t.ok(major < 5 || (major === 5 && minor < 3), `null only on kernels before 5.3 (this is ${os.release()})`);
    return;
  }
  t.equal(fs.readlinkSync(`/proc/self/fd/${fd}`), 'anon_inode:[pidfd]');
  fs.closeSync(fd);

  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  const pid = child.pid!;
  await once(child, 'exit'); // reaped: the pid no longer exists
  t.throws(() => pidfdOpen(pid), { code: 'ESRCH', message: /pidfd_open failed/ });

  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  t.throws(() => addon.pidfdOpen!('1'), { name: 'TypeError' });
  for (const bad of [0, -1, 2.5]) t.throws(() => addon.pidfdOpen!(bad), { name: 'RangeError' }, `pid ${bad}`);
});

// As root every /proc file is readable, so the effect of PR_SET_DUMPABLE is
// only visible to an unprivileged reader: a uid-65534 child, and a uid-65534
// `cat` of its /proc/<pid>/environ before and after it calls setNonDumpable.
t.test('setNonDumpable stops a same-uid process from reading /proc/<pid>/environ', async (t) => {
  const asNobody = ['--reuid=65534', '--regid=65534', '--clear-groups'];
  const script = `
    const addon = require(${JSON.stringify(addonFile)});
    process.stdout.write('pid ' + process.pid + '\\n');
    process.stdin.once('data', () => { addon.setNonDumpable(); process.stdout.write('done\\n'); });`;
  const child = spawn('env', ['-u', 'NODE_OPTIONS', 'setpriv', ...asNobody, process.execPath, '-e', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { POSTERN_PROBE: '1' },
  });
  t.teardown(() => child.kill());
  const lines = lineReader(child.stdout!);
  const pid = Number((await lines.next()).replace(/^pid /, ''));
  t.equal(pid, child.pid, 'env and setpriv exec() in place');

  const read = () => spawnSync('setpriv', [...asNobody, 'cat', `/proc/${pid}/environ`], { encoding: 'utf8' });
  const before = read();
  t.equal(before.status, 0, 'readable before');
  t.match(before.stdout, 'POSTERN_PROBE=1');

  child.stdin!.write('go\n');
  t.equal(await lines.next(), 'done');
  const after = read();
  t.not(after.status, 0, 'unreadable after');
  t.match(after.stderr, /Permission denied/);
  t.notMatch(after.stdout, 'POSTERN_PROBE');
});

t.test('a missing addon is refused with bad_environment and says how to build it', async (t) => {
  // A copy of the three shared modules, as built in dist/, under a root
  // whose addon is not built.
  const fakeRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-noaddon-'));
  t.teardown(() => fs.rmSync(fakeRoot, { recursive: true, force: true }));
  fs.mkdirSync(path.join(fakeRoot, 'native'));
  fs.writeFileSync(path.join(fakeRoot, 'native', 'binding.gyp'), '{}');
  fs.mkdirSync(path.join(fakeRoot, 'shared'));
  for (const f of ['native.js', 'errors.js', 'protocol.js']) {
    fs.copyFileSync(path.join(root, 'dist', 'shared', f), path.join(fakeRoot, 'shared', f));
  }
  const run = spawnSync(
    process.execPath,
    [
      '-e',
      `try { require(${JSON.stringify(path.join(fakeRoot, 'shared', 'native.js'))}).loadNative(); }
      catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`,
    ],
    { encoding: 'utf8' },
  );
  const out = JSON.parse(run.stdout) as { code: string; message: string };
  t.equal(out.code, 'bad_environment');
  t.match(out.message, 'postern refuses to run without its native addon');
  t.match(out.message, path.join(fakeRoot, 'native', 'build', 'Release', 'postern_native.node'));
  t.match(out.message, 'node native/build.js');
});

function lineReader(stream: NodeJS.ReadableStream): { next(): Promise<string> } {
  const queue: string[] = [];
  const waiting: ((l: string) => void)[] = [];
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const w = waiting.shift();
      if (w) w(line);
      else queue.push(line);
    }
  });
  return {
    next: () => (queue.length ? Promise.resolve(queue.shift()!) : new Promise((res) => waiting.push(res))),
  };
}
