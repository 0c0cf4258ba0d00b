// Agents for identity tests that must outlive their parent or replace their
// own program: a small Python agent driven over a Unix control socket the
// test listens on, not over stdio, so it keeps working after its parent
// exits (it is reparented) and after it execs (the new program connects
// again, from the same pid). Every request it makes is a new connection to
// the agent socket, so the daemon identifies the process afresh each time.
import { spawn, ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentReply } from './agent-child';

const AGENT_PY = String.raw`import http.client, json, os, socket, sys

class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__('postern', timeout=120)
        self.unix_path = path
    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s

def post(path, body):
    conn = UnixConnection(path)
    try:
        conn.request('POST', '/v1/http', body=json.dumps(body).encode(), headers={'content-type': 'application/json', 'connection': 'close'})
        res = conn.getresponse()
        text = res.read().decode('utf-8', 'replace')
    finally:
        conn.close()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return {'status': res.status, 'json': parsed, 'text': text}

control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
control.connect(sys.argv[sys.argv.index('--control') + 1])
def out(msg):
    control.sendall((json.dumps(msg) + '\n').encode())

ready = {'event': 'ready', 'pid': os.getpid(), 'ppid': os.getppid(), 'uid': os.getuid(), 'cwd': os.getcwd()}
# A parent that waits for "ready" on stdout (agent-child's spawn) gets it
# once; nothing is written there later, when that parent may be gone.
try:
    sys.stdout.write(json.dumps(ready) + '\n')
    sys.stdout.flush()
except OSError:
    pass
out(ready)

for line in control.makefile('rb'):
    c = json.loads(line)
    op, tag = c.get('op'), c.get('tag')
    try:
        if op == 'info':
            out({'event': 'info', 'tag': tag, 'pid': os.getpid(), 'ppid': os.getppid(), 'cwd': os.getcwd()})
        elif op == 'request':
            out({'event': 'reply', 'tag': tag, **post(c['socket'], c['body'])})
        elif op == 'unlink':
            os.unlink(c['path'])
            out({'event': 'done', 'tag': tag})
        elif op == 'exec':
            os.chdir(c['cwd'])
            os.execv(c['argv'][0], c['argv'])
        elif op == 'exit':
            break
    except Exception as e:
        out({'event': 'error', 'tag': tag, 'error': repr(e)})
# The test closed the control socket (or said exit): so does the agent.
os._exit(0)
`;

export interface IdentityAgentScript {
  dir: string;
  path: string;
  cleanup(): void;
}

// The agent program in a fresh directory every uid can traverse and read.
export function writeIdentityAgent(): IdentityAgentScript {
  const dir = mkdtempSync(join(tmpdir(), 'pt-idagent-'));
  chmodSync(dir, 0o755);
  const path = join(dir, 'agent.py');
  writeFileSync(path, AGENT_PY, { mode: 0o644 });
  return { dir, path, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

type Message = Record<string, unknown>;

// One running program of an agent (a new one after every exec).
export class ControlledAgent {
  private tag = 1;
  private waiters = new Map<number, { resolve: (m: Message) => void; reject: (e: Error) => void }>();
  private gone = false;
  readonly closed: Promise<void>;

  constructor(
    private readonly sock: net.Socket,
    readonly pid: number, // as the agent sees itself (the inner pid in a pid namespace)
    readonly ppid: number,
    readonly cwd: string,
    lines: { on(event: 'line', fn: (line: string) => void): void },
  ) {
    lines.on('line', (line) => {
      const m = JSON.parse(line) as Message;
      const w = this.waiters.get(m['tag'] as number);
      if (!w) return;
      this.waiters.delete(m['tag'] as number);
      if (m['event'] === 'error') w.reject(new Error(`agent ${pid}: ${String(m['error'])}`));
      else w.resolve(m);
    });
    this.closed = new Promise((r) =>
      sock.on('close', () => {
        this.gone = true;
        for (const w of this.waiters.values()) w.reject(new Error(`agent ${pid} went away before it answered`));
        this.waiters.clear();
        r();
      }),
    );
  }

  // POST /v1/http over `socket` on a new connection; postern's reply.
  async request(socket: string, body: unknown): Promise<AgentReply> {
    const m = await this.ask({ op: 'request', socket, body });
    return { status: m['status'] as number, json: m['json'], text: m['text'] as string };
  }

  // The process as it sees itself now (its parent changes when reparented).
  async info(): Promise<{ pid: number; ppid: number; cwd: string }> {
    const m = await this.ask({ op: 'info' });
    return { pid: m['pid'] as number, ppid: m['ppid'] as number, cwd: m['cwd'] as string };
  }

  async unlink(path: string): Promise<void> {
    await this.ask({ op: 'unlink', path });
  }

  // chdir to `cwd`, then execv(argv[0], argv). The new program is a new
  // ControlledAgent (see ControlServer.next); this one is closed.
  async exec(argv: string[], cwd: string): Promise<void> {
    this.send({ op: 'exec', argv, cwd, tag: this.tag++ });
    await this.closed;
  }

  async exit(): Promise<void> {
    this.send({ op: 'exit', tag: this.tag++ });
    await this.closed;
  }

  private send(cmd: Message): void {
    if (!this.gone) this.sock.write(JSON.stringify(cmd) + '\n');
  }

  private ask(cmd: Message): Promise<Message> {
    if (this.gone) return Promise.reject(new Error(`agent ${this.pid} has gone`));
    const tag = this.tag++;
    return new Promise((resolve, reject) => {
      this.waiters.set(tag, { resolve, reject });
      this.send({ ...cmd, tag });
    });
  }
}

// The test's end of the control sockets: every agent program connects here
// when it starts and says ready. Closing the server ends every agent.
export class ControlServer {
  private arrived: ControlledAgent[] = [];
  private waiting: ((a: ControlledAgent) => void)[] = [];
  private sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly path: string,
  ) {
    server.on('connection', (sock) => {
      this.sockets.add(sock);
      sock.on('close', () => this.sockets.delete(sock));
      sock.on('error', () => undefined);
      const listeners: ((line: string) => void)[] = [];
      const lines = { on: (_: 'line', fn: (line: string) => void) => listeners.push(fn) };
      let buffered = '';
      let agent: ControlledAgent | null = null;
      sock.on('data', (d: Buffer) => {
        buffered += d.toString('utf8');
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (agent) {
            for (const l of listeners) l(line);
            continue;
          }
          const ready = JSON.parse(line) as Message;
          agent = new ControlledAgent(
            sock,
            ready['pid'] as number,
            ready['ppid'] as number,
            ready['cwd'] as string,
            lines,
          );
          const w = this.waiting.shift();
          if (w) w(agent);
          else this.arrived.push(agent);
        }
      });
    });
  }

  static listen(path: string): Promise<ControlServer> {
    return new Promise((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen(path, () => resolve(new ControlServer(server, path)));
    });
  }

  // The next agent program to start (or to be exec'd), once it is ready.
  next(ms = 20_000): Promise<ControlledAgent> {
    const a = this.arrived.shift();
    if (a) return Promise.resolve(a);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no agent connected to ${this.path} within ${ms} ms`)), ms);
      this.waiting.push((agent) => {
        clearTimeout(timer);
        resolve(agent);
      });
    });
  }

  close(): void {
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}

// Start the agent as a child of the test: `exe` runs `script` (a Python
// interpreter, or a copy of one), connected to `control`.
export function startIdentityAgent(
  exe: string,
  script: IdentityAgentScript,
  control: ControlServer,
  o: { cwd?: string; args?: string[] } = {},
): { argv: string[]; proc: ChildProcess } {
  const argv = [exe, script.path, '--control', control.path, ...(o.args ?? [])];
  const proc = spawn(argv[0]!, argv.slice(1), { cwd: o.cwd, stdio: ['ignore', 'ignore', 'inherit'] });
  return { argv, proc };
}
