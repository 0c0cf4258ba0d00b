// Agents as real child processes, for identity tests. A tiny plain-JS agent
// (written to a temp dir, so it runs without tap's loader and as any uid)
// speaks JSON lines on stdin/stdout: the test says when it sends a request
// over the agent socket, when it forks a child (optionally forcing the
// child's pid through ns_last_pid inside a pid namespace), and when it exits.
// A parent relays its children's lines, so a whole process tree is driven
// from the test.
import { spawn, ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const AGENT_JS = String.raw`'use strict';
const http = require('node:http');
const net = require('node:net');
const fs = require('node:fs');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const children = new Map();
const out = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');

function post(socketPath, body) {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request({ socketPath, method: 'POST', path: '/v1/http', headers: { host: 'postern', 'content-type': 'application/json', 'content-length': payload.length } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch { json = null; }
        resolve({ status: res.statusCode, json, text });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

// --hold FILE: the connection arrives as fd 3 from a parent that has exited
// (or will); read postern's reply on it and write it to FILE.
function hold(file) {
  const s = new net.Socket({ fd: 3, readable: true, writable: true });
  const chunks = [];
  s.on('data', (c) => chunks.push(c));
  s.on('close', () => { fs.writeFileSync(file + '.tmp', Buffer.concat(chunks)); fs.renameSync(file + '.tmp', file); process.exit(0); });
}

function rawRequest(body) {
  const payload = JSON.stringify(body);
  return 'POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ' + Buffer.byteLength(payload) + '\r\n\r\n' + payload;
}

const ops = {
  info: (c) => out({ event: 'info', tag: c.tag, pid: process.pid, ppid: process.ppid }),
  request: (c) => post(c.socket, c.body).then(
    (r) => out({ event: 'reply', tag: c.tag, ...r }),
    (e) => out({ event: 'reply', tag: c.tag, error: String(e && (e.code || e.message)) })),
  spawn: (c) => {
    // Forcing the next pid: the kernel hands out ns_last_pid + 1.
    if (c.lastPid !== undefined) fs.writeFileSync('/proc/sys/kernel/ns_last_pid', String(c.lastPid));
    const argv = c.argv || [process.execPath, __filename];
    const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], cwd: c.cwd });
    children.set(c.id, child);
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      let msg;
      try { msg = JSON.parse(line); } catch { return; }
      out({ event: 'child', id: c.id, msg });
    });
    child.on('exit', (code, signal) => out({ event: 'child', id: c.id, msg: { event: 'exit', code, signal } }));
    child.on('error', (e) => out({ event: 'child', id: c.id, msg: { event: 'exit', code: null, signal: null, error: String(e.code) } }));
  },
  // Send a request, then hand the connection to a new child that waits for
  // the reply, so this process can exit while its request is pending.
  handOff: (c) => {
    const sock = net.connect(c.socket, () => {
      sock.write(rawRequest(c.body), () => {
        const child = spawn(process.execPath, [__filename, '--hold', c.replyFile], { stdio: ['ignore', 'ignore', 'inherit', sock] });
        child.on('spawn', () => {
          sock.destroy(); // only this process's copy of the descriptor
          out({ event: 'handedOff', tag: c.tag, pid: child.pid });
        });
      });
    });
    sock.on('error', (e) => out({ event: 'handedOff', tag: c.tag, error: String(e.code) }));
  },
  // Serve a Unix socket at c.listen that pipes every connection to c.target:
  // lets a peer outside this process's pid namespace reach a daemon that
  // only accepts peers it can name.
  relay: (c) => {
    const server = net.createServer((inbound) => {
      const outbound = net.connect(c.target);
      inbound.pipe(outbound).pipe(inbound);
      const stop = () => { inbound.destroy(); outbound.destroy(); };
      inbound.on('error', stop); outbound.on('error', stop);
      inbound.on('close', stop); outbound.on('close', stop);
    });
    server.listen(c.listen, () => out({ event: 'relaying', tag: c.tag }));
  },
  to: (c) => { const ch = children.get(c.id); if (ch) ch.stdin.write(JSON.stringify(c.cmd) + '\n'); },
  exit: () => process.exit(0),
};

if (process.argv[2] === '--hold') {
  hold(process.argv[3]);
} else {
  readline.createInterface({ input: process.stdin })
    .on('line', (line) => { let c; try { c = JSON.parse(line); } catch { return; } const op = ops[c.op]; if (op) op(c); })
    // The test went away: so does the agent (and, through their stdin, its children).
    .on('close', () => process.exit(0));
  out({ event: 'ready', pid: process.pid, ppid: process.ppid, uid: process.getuid() });
}
`;

export interface AgentScript {
  dir: string;
  path: string;
  cleanup(): void;
}

// The agent program in a fresh directory every uid can traverse and read.
export function writeAgentScript(): AgentScript {
  const dir = mkdtempSync(join(tmpdir(), 'pt-agent-'));
  chmodSync(dir, 0o755);
  const path = join(dir, 'agent.js');
  writeFileSync(path, AGENT_JS, { mode: 0o644 });
  return { dir, path, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface AgentReply {
  status: number;
  json: unknown;
  text: string;
}

type Message = Record<string, unknown>;

// A line channel to one agent process: direct (stdio) or relayed by its parent.
interface Channel {
  send(cmd: Message): void;
  listen(fn: (msg: Message) => void): void;
}

export interface SpawnOptions {
  id: string;
  argv?: string[]; // default: this node and the agent script
  cwd?: string;
  lastPid?: number; // write to ns_last_pid first (inside a pid namespace, as root)
}

export class Agent {
  private tag = 1;
  private waiters: { match: (m: Message) => boolean; resolve: (m: Message) => void; reject: (e: Error) => void }[] = [];
  private exited = false;
  private exitWaiters: (() => void)[] = [];

  private constructor(
    private readonly channel: Channel,
    readonly pid: number, // as the agent sees itself (the inner pid in a pid namespace)
    readonly ppid: number,
    readonly uid: number,
    private readonly proc: ChildProcess | null,
  ) {
    channel.listen((m) => this.onMessage(m));
  }

  // Start an agent as a child of the test. `prefix` runs first and must exec
  // into node (setpriv, nsenter), e.g. ['setpriv', '--reuid=65534', ...].
  static async start(script: AgentScript, o: { prefix?: string[]; cwd?: string } = {}): Promise<Agent> {
    const argv = [process.execPath, script.path];
    // tap re-inserts NODE_OPTIONS (its loader) into every child: remove it.
    const proc = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', ...(o.prefix ?? []), ...argv], {
      stdio: ['pipe', 'pipe', 'inherit'],
      cwd: o.cwd,
    });
    const listeners: ((m: Message) => void)[] = [];
    let buffered = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buffered += d.toString('utf8');
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let msg: Message;
        try {
          msg = JSON.parse(line) as Message;
        } catch {
          continue;
        }
        for (const l of listeners) l(msg);
      }
    });
    proc.stdin!.on('error', () => undefined);
    const channel: Channel = {
      send: (cmd) => {
        if (proc.stdin!.writable) proc.stdin!.write(JSON.stringify(cmd) + '\n');
      },
      listen: (fn) => listeners.push(fn),
    };
    const ready = await firstMessage(
      channel,
      (m) => m['event'] === 'ready',
      () => proc.exitCode !== null || proc.signalCode !== null,
    );
    const agent = new Agent(channel, ready['pid'] as number, ready['ppid'] as number, ready['uid'] as number, proc);
    proc.on('exit', () => agent.markExited());
    if (proc.exitCode !== null || proc.signalCode !== null) agent.markExited();
    return agent;
  }

  // POST /v1/http over `socket`, sent now; resolves with postern's reply.
  async request(socket: string, body: unknown): Promise<AgentReply> {
    const m = await this.ask({ op: 'request', socket, body }, 'reply');
    if (typeof m['error'] === 'string') throw new Error(`agent ${this.pid}: request failed: ${m['error']}`);
    return { status: m['status'] as number, json: m['json'], text: m['text'] as string };
  }

  // Send a request whose connection is then held by a new child of this
  // agent (which writes the raw HTTP reply to `replyFile`), so this agent may
  // exit while its request waits for approval. Resolves with the holder's pid.
  async handOff(socket: string, body: unknown, replyFile: string): Promise<number> {
    const m = await this.ask({ op: 'handOff', socket, body, replyFile }, 'handedOff');
    if (typeof m['error'] === 'string') throw new Error(`agent ${this.pid}: hand-off failed: ${m['error']}`);
    return m['pid'] as number;
  }

  // Relay connections made to `listen` (a new socket path) to `target`.
  async relay(listen: string, target: string): Promise<void> {
    await this.ask({ op: 'relay', listen, target }, 'relaying');
  }

  // Fork a child agent of this agent.
  async spawn(o: SpawnOptions): Promise<Agent> {
    const listeners: ((m: Message) => void)[] = [];
    this.childListeners.set(o.id, listeners);
    const channel: Channel = {
      send: (cmd) => this.channel.send({ op: 'to', id: o.id, cmd }),
      listen: (fn) => listeners.push(fn),
    };
    let gone = false;
    listeners.push((m) => {
      if (m['event'] === 'exit') gone = true;
    });
    this.channel.send({ op: 'spawn', id: o.id, argv: o.argv, cwd: o.cwd, lastPid: o.lastPid });
    const ready = await firstMessage(
      channel,
      (m) => m['event'] === 'ready' || m['event'] === 'exit',
      () => gone,
    );
    if (ready['event'] !== 'ready') throw new Error(`child ${o.id} did not start: ${JSON.stringify(ready)}`);
    const child = new Agent(channel, ready['pid'] as number, ready['ppid'] as number, ready['uid'] as number, null);
    listeners.push((m) => {
      if (m['event'] === 'exit') child.markExited();
    });
    return child;
  }

  // Fork a child agent at exactly `pid` of this agent's pid namespace (the
  // agent must be root in it). Another task forking between the write to
  // ns_last_pid and the fork would take the pid first; so retry a few times.
  async spawnAt(o: SpawnOptions, pid: number, attempts = 5): Promise<Agent> {
    for (let i = 1; ; i += 1) {
      const child = await this.spawn({ ...o, id: `${o.id}#${i}`, lastPid: pid - 1 });
      if (child.pid === pid || i >= attempts) return child;
      await child.exit();
    }
  }

  // Ask the agent to exit and wait until it has (and, for a child, was reaped).
  async exit(): Promise<void> {
    if (this.exited) return;
    const done = new Promise<void>((r) => this.exitWaiters.push(r));
    this.channel.send({ op: 'exit' });
    await done;
  }

  // Teardown: kill what the test spawned and close the agent's stdin (which
  // ends an agent behind a forking prefix such as nsenter, too).
  kill(): void {
    if (!this.proc || this.exited) return;
    this.proc.kill('SIGKILL');
    this.proc.stdin?.destroy();
  }

  private childListeners = new Map<string, ((m: Message) => void)[]>();

  private onMessage(m: Message): void {
    if (m['event'] === 'child') {
      for (const l of this.childListeners.get(m['id'] as string) ?? []) l(m['msg'] as Message);
      return;
    }
    const i = this.waiters.findIndex((w) => w.match(m));
    if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(m);
  }

  private markExited(): void {
    this.exited = true;
    for (const r of this.exitWaiters.splice(0)) r();
    // Nothing more will come from a dead agent.
    for (const w of this.waiters.splice(0)) w.reject(new Error(`agent ${this.pid} exited before it answered`));
  }

  private ask(cmd: Message, event: string): Promise<Message> {
    const tag = this.tag++;
    if (this.exited) return Promise.reject(new Error(`agent ${this.pid} has exited`));
    return new Promise((resolve, reject) => {
      this.waiters.push({ match: (m) => m['event'] === event && m['tag'] === tag, resolve, reject });
      this.channel.send({ ...cmd, tag });
    });
  }
}

function firstMessage(channel: Channel, match: (m: Message) => boolean, dead: () => boolean): Promise<Message> {
  return new Promise((resolve, reject) => {
    let done = false;
    channel.listen((m) => {
      if (!done && match(m)) {
        done = true;
        clearInterval(poll);
        resolve(m);
      }
    });
    // A process that dies before saying ready must not hang the test.
    const poll = setInterval(() => {
      if (!done && dead()) {
        done = true;
        clearInterval(poll);
        reject(new Error('the agent exited before it was ready'));
      }
    }, 50);
  });
}
