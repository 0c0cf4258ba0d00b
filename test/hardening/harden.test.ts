import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { FORBIDDEN_ENV, FORBIDDEN_ENV_REASONS } from '../../shared/hardening';

// Real child processes running test/helpers/hardening-probe.ts, compiled
// beside this file. tap's processinfo plugin puts NODE_OPTIONS into the
// environment of every child this file spawns, so each command is run
// through `env -u NODE_OPTIONS`, and a test that wants a forbidden variable
// sets it after that, on env's command line.
const probe = path.resolve(__dirname, '..', 'helpers', 'hardening-probe.js');

function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of FORBIDDEN_ENV) delete env[name];
  return env;
}

function withEnv(set: Record<string, string>, argv: string[]): string[] {
  return ['env', '-u', 'NODE_OPTIONS', ...Object.entries(set).map(([k, v]) => `${k}=${v}`), ...argv];
}

class Lines {
  private queue: string[] = [];
  private waiting: ((l: string) => void)[] = [];
  private buf = '';
  constructor(stream: NodeJS.ReadableStream) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      this.buf += chunk;
      let i;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        const w = this.waiting.shift();
        if (w) w(line);
        else this.queue.push(line);
      }
    });
  }
  next(): Promise<string> {
    const l = this.queue.shift();
    return l !== undefined ? Promise.resolve(l) : new Promise((res) => this.waiting.push(res));
  }
}

interface Probe {
  child: ChildProcess;
  stdout: Lines;
  stderr: () => string;
  exit: Promise<number | null>;
}

function startProbe(argv: string[], set: Record<string, string> = {}): Probe {
  const cmd = withEnv(set, argv);
  const child = spawn(cmd[0]!, cmd.slice(1), { env: cleanEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return { child, stdout: new Lines(child.stdout!), stderr: () => err, exit };
}

const nodeProbe = (...extraNodeArgs: string[]) => [process.execPath, ...extraNodeArgs, probe, 'daemon'];

t.test('a clean environment starts and answers', async (t) => {
  const p = startProbe(nodeProbe());
  t.match(await p.stdout.next(), /^ready \d+$/);
  p.child.stdin!.write('ping\n');
  t.equal(await p.stdout.next(), 'pong');
  p.child.stdin!.write('exit\n');
  t.equal(await p.exit, 0);
});

const libc = fs
  .readFileSync('/proc/self/maps', 'utf8')
  .split('\n')
  .map((l) => l.split(/\s+/)[5] ?? '')
  .find((f) => /\/libc\.so\.6$/.test(f));

const emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-harden-'));
const hostAliases = path.join(emptyDir, 'hosts');
fs.writeFileSync(hostAliases, 'example localhost\n');
t.teardown(() => fs.rmSync(emptyDir, { recursive: true, force: true }));

// Each forbidden variable, set to a value that is harmless on its own, makes
// the probe refuse with bad_environment, naming exactly that variable.
const isSet = (name: string) => `${name} is set (${FORBIDDEN_ENV_REASONS[name]})`;
const refusals: [string, Record<string, string>, string][] = [
  ['NODE_OPTIONS', { NODE_OPTIONS: '--no-warnings' }, `${isSet('NODE_OPTIONS')}; unset it`],
  ['NODE_OPTIONS empty (present counts)', { NODE_OPTIONS: '' }, `${isSet('NODE_OPTIONS')}; unset it`],
  ['LD_PRELOAD', { LD_PRELOAD: libc ?? '' }, `${isSet('LD_PRELOAD')}; unset it`],
  ['LD_LIBRARY_PATH', { LD_LIBRARY_PATH: emptyDir }, `${isSet('LD_LIBRARY_PATH')}; unset it`],
  ['HOSTALIASES', { HOSTALIASES: hostAliases }, `${isSet('HOSTALIASES')}; unset it`],
  ['LD_AUDIT (empty: no library, present counts)', { LD_AUDIT: '' }, `${isSet('LD_AUDIT')}; unset it`],
  ['OPENSSL_CONF', { OPENSSL_CONF: '/dev/null' }, `${isSet('OPENSSL_CONF')}; unset it`],
  ['OPENSSL_MODULES', { OPENSSL_MODULES: emptyDir }, `${isSet('OPENSSL_MODULES')}; unset it`],
  ['OPENSSL_ENGINES', { OPENSSL_ENGINES: emptyDir }, `${isSet('OPENSSL_ENGINES')}; unset it`],
  [
    'two at once',
    { HOSTALIASES: hostAliases, LD_LIBRARY_PATH: emptyDir },
    `${isSet('LD_LIBRARY_PATH')} and ${isSet('HOSTALIASES')}; unset them`,
  ],
];

for (const [name, set, what] of refusals) {
  t.test(`refuses to run with ${name}`, async (t) => {
    t.ok(libc, "found this process's libc to preload");
    const p = startProbe(nodeProbe(), set);
    t.equal(await p.exit, 3, 'the probe exits through its refusal path');
    t.equal(p.stderr(), `REFUSED bad_environment: postern daemon refuses to run: ${what} and start again\n`);
  });
}

t.test('refuses to run under strace, naming the tracer', async (t) => {
  const p = startProbe(['strace', '-f', '-o', '/dev/null', ...nodeProbe()]);
  t.equal(await p.exit, 3, "strace passes on the probe's exit code");
  t.match(
    p.stderr(),
    `REFUSED bad_environment: postern daemon refuses to run: it is being traced by process ${p.child.pid} (strace)`,
  );
});

// Listening TCP sockets held by `pid`: its socket inodes matched against
// /proc/<pid>/net/tcp{,6} rows in state 0A (LISTEN). Catches the inspector
// on any port, so the test does not depend on 9229 being free.
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // fd closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    for (const row of fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const f = row.trim().split(/\s+/);
      if (f[3] === '0A' && inodes.has(f[9] ?? '')) ports.push(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

// --inspect-port=0: if the inspector opens, it takes a free port rather than
// 9229, which another process on the machine may hold.
let inspectorDelay = 0; // how long the control's inspector took to open

t.test('control: an unhardened node opens the inspector on SIGUSR1', async (t) => {
  const script = 'process.stdout.write("ready\\n"); setInterval(() => {}, 1000);';
  const p = startProbe([process.execPath, '--inspect-port=0', '-e', script]);
  t.teardown(() => p.child.kill('SIGKILL'));
  t.equal(await p.stdout.next(), 'ready');
  t.same(listeningPorts(p.child.pid!), [], 'nothing listening before the signal');
  const start = Date.now();
  p.child.kill('SIGUSR1');
  const port = await waitFor(() =>
    Number(/Debugger listening on ws:\/\/127\.0\.0\.1:(\d+)\//.exec(p.stderr())?.[1] ?? 0),
  );
  inspectorDelay = Date.now() - start;
  t.ok(port > 0, 'the inspector announced itself');
  t.same(listeningPorts(p.child.pid!), [port], 'and listens');
});

t.test('SIGUSR1 does not open the inspector of a hardened process', async (t) => {
  const p = startProbe(nodeProbe('--inspect-port=0'));
  t.teardown(() => p.child.kill('SIGKILL'));
  t.match(await p.stdout.next(), /^ready \d+$/);
  p.child.kill('SIGUSR1');
  // Nothing observable marks "signal handled" without adding a listener, so
  // wait well beyond the time the control's inspector needed.
  await new Promise((r) => setTimeout(r, Math.max(1000, 5 * inspectorDelay)));
  t.notMatch(p.stderr(), /Debugger listening/);
  t.same(listeningPorts(p.child.pid!), [], 'no listening socket');
  p.child.stdin!.write('ping\n');
  t.equal(await p.stdout.next(), 'pong', 'still alive and answering');
});

async function waitFor(f: () => number, ms = 5000): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}
