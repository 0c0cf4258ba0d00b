// Agents that hand a kept agent-socket connection to another process, for
// SPEC §7 "the requester is the process that made the connection": a
// Python program that connects, makes a request, then forks and lets the
// child use the inherited connection (before and after the parent exits),
// or passes the connection over SCM_RIGHTS (socket.send_fds) to an
// unrelated process started by the test; or sends a request's head and
// lets the program it execs into send the body; or just asks once. Each prints one JSON line per
// reply on stdout: { "who", "phase", "pid", "status", "code" }.
import { spawn, ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HOLDER_PY = String.raw`import json, os, socket, sys, time

def json_head(data):
    return b'POST /v1/http HTTP/1.1\r\nhost: postern\r\ncontent-type: application/json\r\ncontent-length: ' + str(len(data)).encode() + b'\r\n\r\n'

def request(s, body):
    data = json.dumps(body).encode()
    s.sendall(json_head(data) + data)
    return reply(s)

def reply(s):
    buf = b''
    while b'\r\n\r\n' not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return {'status': 0, 'code': 'closed'}
        buf += chunk
    head, rest = buf.split(b'\r\n\r\n', 1)
    lines = head.decode().split('\r\n')
    length = 0
    for l in lines[1:]:
        k, v = l.split(':', 1)
        if k.strip().lower() == 'content-length':
            length = int(v.strip())
    while len(rest) < length:
        rest += s.recv(65536)
    status = int(lines[0].split(' ')[1])
    try:
        code = json.loads(rest[:length]).get('error', {}).get('code')
    except ValueError:
        code = None
    return {'status': status, 'code': code}

def say(who, phase, r):
    sys.stdout.write(json.dumps({'who': who, 'phase': phase, 'pid': os.getpid(), **r}) + '\n')
    sys.stdout.flush()

def gone(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split(') ')[-1].startswith('Z')
    except OSError:
        return True

mode, agent_sock, body = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

if mode == 'once':
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(agent_sock)
    say('once', 'first', request(s, body))

elif mode == 'fork':
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(agent_sock)
    say('parent', 'first', request(s, body))
    r, w = os.pipe()
    parent = os.getpid()
    if os.fork() == 0:
        os.close(r)
        say('child', 'parent alive', request(s, body))
        os.write(w, b'x')
        os.close(w)
        while os.getppid() == parent:
            time.sleep(0.02)
        say('child', 'parent exited', request(s, body))
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os._exit(0)

elif mode == 'send':
    # Connect, ask, pass the connection to the process listening at argv[4],
    # wait until it has asked too, then exit.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(agent_sock)
    say('sender', 'first', request(s, body))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[4])
    socket.send_fds(c, [str(os.getpid()).encode()], [s.fileno()])
    c.recv(1)
    os._exit(0)

elif mode == 'split':
    # Ask once; then send a request's head, wait, and send its body, from
    # this process (argv[5] "same") or from the program it execs into,
    # the connection kept across the exec ("exec"). argv[4]: "json" (POST
    # /v1/http, the body the request) or a URL for the proxy front door
    # (an absolute-form POST with a short body).
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(agent_sock)
    say('maker', 'first', request(s, body))
    door, how = sys.argv[4], sys.argv[5]
    if door == 'json':
        data = json.dumps(body).encode()
        head = json_head(data)
    else:
        data = b'split body'
        head = ('POST %s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n\r\n' % (door, door.split('/')[2], len(data))).encode()
    s.sendall(head)
    time.sleep(0.3)
    if how == 'exec':
        os.set_inheritable(s.fileno(), True)
        os.execv(sys.executable, [sys.executable, sys.argv[0], 'split-rest', agent_sock, sys.argv[3], str(s.fileno()), data.decode()])
    s.sendall(data)
    say('maker', 'body', reply(s))

elif mode == 'split-rest':
    s = socket.socket(fileno=int(sys.argv[4]))
    s.sendall(sys.argv[5].encode())
    say('execd', 'body', reply(s))

elif mode == 'receive':
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(sys.argv[4])
    l.listen(1)
    sys.stdout.write(json.dumps({'who': 'receiver', 'phase': 'ready', 'pid': os.getpid()}) + '\n')
    sys.stdout.flush()
    c, _ = l.accept()
    msg, fds, _, _ = socket.recv_fds(c, 64, 1)
    sender = int(msg.decode())
    s = socket.socket(fileno=fds[0])
    say('receiver', 'sender alive', request(s, body))
    c.sendall(b'x')
    while not gone(sender):
        time.sleep(0.02)
    say('receiver', 'sender exited', request(s, body))
`;

export interface Reply {
  who: string;
  phase: string;
  pid: number;
  status?: number;
  code?: string | null;
}

export interface Holder {
  dir: string;
  path: string;
  cleanup(): void;
}

export function writeHolder(): Holder {
  const dir = mkdtempSync(join(tmpdir(), 'pt-holder-'));
  chmodSync(dir, 0o755);
  const path = join(dir, 'holder.py');
  writeFileSync(path, HOLDER_PY, { mode: 0o644 });
  return { dir, path, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// Runs one mode; `replies` collects the JSON lines every process of it
// prints (a child inherits the stdout pipe); `done` resolves when the pipe
// closes (every process that held it has exited).
// `prefix`: the command line that runs the script instead of python3
// itself (it must end with an interpreter, e.g. an unshare … exec).
export function runHolder(
  h: Holder,
  args: string[],
  prefix: string[] = ['/usr/bin/python3'],
): { proc: ChildProcess; replies: Reply[]; done: Promise<void>; next(): Promise<Reply> } {
  const proc = spawn(prefix[0]!, [...prefix.slice(1), h.path, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const replies: Reply[] = [];
  const waiting: ((r: Reply) => void)[] = [];
  let taken = 0;
  let buf = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      replies.push(JSON.parse(buf.slice(0, nl)) as Reply);
      buf = buf.slice(nl + 1);
      while (waiting.length > 0 && taken < replies.length) waiting.shift()!(replies[taken++]!);
    }
  });
  const done = new Promise<void>((r) => proc.stdout!.on('close', () => r()));
  return {
    proc,
    replies,
    done,
    next: () => new Promise((r) => (taken < replies.length ? r(replies[taken++]!) : waiting.push(r))),
  };
}
