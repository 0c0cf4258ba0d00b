// A network namespace with only `lo` up, for tests of broken networks: no
// route leaves it, so a connect to any non-loopback address fails at once
// with the kernel's real errno (ENETUNREACH; EHOSTUNREACH under an
// `unreachable` route the test adds), and nothing leaves the machine. The
// peers a test needs (a UDP DNS server, HTTP and TLS servers that answer,
// reset, speak garbage or close at once) run inside it, in a small plain-JS
// process that holds the namespace (written to a temp dir, so it runs
// without tap's loader); the daemon joins it with `nsenter --net`. The
// agent and admin sockets are files, so the test talks to the daemon from
// its own namespace. Everything ends with the test: the peers exit when
// their stdin closes, and the namespace goes with its last process.
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import readline from 'node:readline';
import type { Test } from 'tap';
import { Daemon, Home, cli, init, makeHome, startDaemon } from './postern';

const PEERS_JS = String.raw`'use strict';
const net = require('node:net');
const tls = require('node:tls');
const http = require('node:http');
const https = require('node:https');
const dgram = require('node:dgram');
const fs = require('node:fs');
const readline = require('node:readline');
const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const dnsPacket = require(spec.dnsPacket);
const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const stats = {};

function listen(server, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host || '127.0.0.1', () => resolve(server.address().port));
  });
}

async function peer(p) {
  const st = (stats[p.name] = { connections: 0, requests: 0 });
  if (p.behaviour === 'closed') {
    // A port nothing listens on: bound, then released.
    const s = net.createServer();
    const port = await listen(s, p.host);
    await new Promise((r) => s.close(r));
    return port;
  }
  if (p.behaviour === 'echo') {
    const handler = (req, res) => {
      st.requests++;
      req.resume();
      req.on('end', () => {
        const text = JSON.stringify({ peer: p.name, method: req.method, url: req.url, authorized: typeof req.headers.authorization === 'string' });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    };
    const server = p.tls ? https.createServer(p.tls, handler) : http.createServer(handler);
    server.on(p.tls ? 'secureConnection' : 'connection', () => st.connections++);
    server.on('tlsClientError', () => undefined);
    server.on('clientError', (_e, s) => s.destroy());
    return listen(server, p.host);
  }
  // Raw peers: each accepted connection is handled below, over TLS when the
  // peer has a certificate. The TCP socket is kept to reset it.
  const onSocket = (s, tcp) => {
    st.connections++;
    s.on('error', () => undefined);
    tcp.on('error', () => undefined);
    if (p.behaviour === 'close') {
      s.destroy();
      return;
    }
    let buf = '';
    let answered = false;
    s.on('data', (d) => {
      if (answered) return;
      buf += d.toString('latin1');
      // Answer once the whole request is in (its head, then Content-Length
      // bytes of body), so no byte of it arrives after a close and turns
      // the close into a reset.
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(buf.slice(0, end));
      if (buf.length < end + 4 + (length ? Number(length[1]) : 0)) return;
      answered = true;
      st.requests++;
      // What the peer sends back quotes the request it read, with the
      // injected credential: a daemon that copied a broken response into
      // an error would show it.
      const quoted = buf.slice(0, end).split('\r\n').filter(Boolean).join(' | ');
      const reset = () => setTimeout(() => tcp.resetAndDestroy(), 30);
      if (p.behaviour === 'reset-headers') {
        s.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-request: ' + quoted + '\r\nx-part', reset);
      } else if (p.behaviour === 'reset-body') {
        const body = 'request: ' + quoted + '\n';
        s.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000\r\n\r\n' + body + 'x'.repeat(8192), reset);
      } else if (p.behaviour === 'garbage') {
        s.end('\x16\x03\x01\x00\x2a\x00 not http at all: ' + quoted + '\r\n\r\n');
      }
    });
  };
  // Over TLS the TCP socket under the TLS one is its _parent. A peer that
  // closes at once never has TLS: it closes before any handshake.
  let server;
  if (p.tls && p.behaviour !== 'close') {
    server = tls.createServer(p.tls, (s) => onSocket(s, s._parent));
    server.on('tlsClientError', () => undefined);
    server.on('connection', (tcp) => tcp.on('error', () => undefined));
  } else {
    server = net.createServer((tcp) => onSocket(tcp, tcp));
  }
  return listen(server, p.host);
}

function probe(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.on('connect', () => { s.destroy(); resolve('connected'); });
    s.on('error', (e) => resolve(e.code || String(e)));
  });
}

function answer(msg, from, socket) {
  let q;
  try { q = dnsPacket.decode(msg); } catch { return; }
  const question = q.questions && q.questions[0];
  if (!question) return;
  const name = question.name.toLowerCase().replace(/\.$/, '');
  const known = Object.prototype.hasOwnProperty.call(spec.records, name) ? spec.records[name] : null;
  const data = known ? known[question.type] || [] : [];
  socket.send(dnsPacket.encode({
    type: 'response', id: q.id || 0,
    flags: dnsPacket.RECURSION_AVAILABLE | (q.flag_rd ? dnsPacket.RECURSION_DESIRED : 0) | (known ? 0 : 3),
    questions: [question],
    answers: data.map((address) => ({ type: question.type, name: question.name, ttl: 60, class: 'IN', data: address })),
  }), from.port, from.address);
}

(async () => {
  const dns = dgram.createSocket('udp4');
  dns.on('message', (m, from) => answer(m, from, dns));
  await new Promise((r) => dns.bind(0, '127.0.0.1', r));
  const ports = {};
  for (const p of spec.peers) ports[p.name] = await peer(p);
  out({ event: 'ready', dnsPort: dns.address().port, ports });
  readline.createInterface({ input: process.stdin }).on('line', async (line) => {
    const c = JSON.parse(line);
    if (c.op === 'probe') out({ id: c.id, result: await probe(c.host, c.port) });
    if (c.op === 'stats') out({ id: c.id, result: stats });
  });
  process.stdin.on('end', () => process.exit(0));
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
`;

export type PeerBehaviour =
  | 'echo' // answers 200 with JSON { peer, method, url, authorized }
  | 'reset-headers' // reads the request, sends part of the response head, resets (RST)
  | 'reset-body' // sends the head and 8 KiB of a 100,000-byte body, resets
  | 'garbage' // answers bytes that are not HTTP, then closes
  | 'close' // accepts, then closes at once (plain TCP: before any TLS handshake)
  | 'closed'; // a port nothing listens on

export interface PeerTls {
  key: string;
  cert: string;
  ciphers?: string;
  minVersion?: 'TLSv1.2' | 'TLSv1.3';
  requestCert?: boolean; // ask for a client certificate (and refuse the handshake without one)
}

export interface PeerSpec {
  name: string;
  behaviour: PeerBehaviour;
  tls?: PeerTls; // TLS on the port (a raw peer's bytes go inside it)
  host?: string; // the address it listens on (one of OfflineOptions.addresses); 127.0.0.1 by default
}

export interface PeerStats {
  connections: number;
  requests: number;
}

export interface OfflineNetwork {
  pid: number; // the process holding the namespace (and serving the peers)
  netns: string; // /proc/<pid>/ns/net
  dnsPort: number; // UDP on 127.0.0.1 inside the namespace
  ports: Record<string, number>; // by peer name, on the peer's host inside the namespace
  // argv run inside the namespace
  inNs(argv: string[]): string[];
  // What a connect from inside the namespace gets: 'connected' or the errno code.
  probe(host: string, port: number): Promise<string>;
  stats(): Promise<Record<string, PeerStats>>;
  close(): Promise<void>;
}

export interface OfflineOptions {
  peers: PeerSpec[];
  // DNS answers by name (lower case, no trailing dot); other names: NXDOMAIN.
  records: Record<string, { A?: string[]; AAAA?: string[] }>;
  // `ip route add` arguments applied inside, e.g. ['unreachable', '1.1.1.0/24'].
  routes?: string[][];
  // Addresses put on `lo` before the peers listen, e.g. '11.0.0.1/32': a
  // public-looking address that stays inside the namespace.
  addresses?: string[];
}

function ip(pid: number, args: string[]): void {
  const r = spawnSync('nsenter', [`--net=/proc/${pid}/ns/net`, '--', 'ip', ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')} in the namespace: ${r.stderr}`);
}

export async function startOfflineNetwork(o: OfflineOptions): Promise<OfflineNetwork> {
  const dir = mkdtempSync(join(tmpdir(), 'pt-netns-'));
  const script = join(dir, 'peers.js');
  const specFile = join(dir, 'spec.json');
  writeFileSync(script, PEERS_JS);
  writeFileSync(
    specFile,
    JSON.stringify({ dnsPacket: require.resolve('dns-packet'), peers: o.peers, records: o.records }),
    { mode: 0o600 },
  );
  // unshare execs the shell, which execs node: the child's pid is the peers'
  // process, the namespace's first member.
  const proc: ChildProcess = spawn(
    '/usr/bin/env',
    [
      '-u',
      'NODE_OPTIONS',
      'unshare',
      '--net',
      '--',
      'sh',
      '-c',
      'ip link set lo up && for a in $NS_ADDRESSES; do ip addr add "$a" dev lo || exit 1; done && exec "$0" "$@"',
      process.execPath,
      script,
      specFile,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, NS_ADDRESSES: (o.addresses ?? []).join(' ') } },
  );
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((r) => proc.on('exit', () => r()));
  const waiting = new Map<number, (v: unknown) => void>();
  let nextId = 1;
  const ready = new Promise<{ dnsPort: number; ports: Record<string, number> }>((resolve, reject) => {
    void exited.then(() => reject(new Error(`the namespace's peers exited:\n${stderr}`)));
    readline.createInterface({ input: proc.stdout! }).on('line', (line) => {
      const m = JSON.parse(line) as {
        event?: string;
        id?: number;
        result?: unknown;
        dnsPort: number;
        ports: Record<string, number>;
      };
      if (m.event === 'ready') resolve(m);
      else if (m.id !== undefined) {
        waiting.get(m.id)?.(m.result);
        waiting.delete(m.id);
      }
    });
  });
  const ask = <T>(c: Record<string, unknown>): Promise<T> =>
    new Promise((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve as (v: unknown) => void);
      proc.stdin!.write(JSON.stringify({ id, ...c }) + '\n');
    });
  const close = async (): Promise<void> => {
    proc.stdin!.end();
    const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
    rmSync(dir, { recursive: true, force: true });
  };
  let r: { dnsPort: number; ports: Record<string, number> };
  try {
    r = await ready;
    for (const route of o.routes ?? []) ip(proc.pid!, ['route', 'add', ...route]);
  } catch (e) {
    await close();
    throw e;
  }
  const pid = proc.pid!;
  return {
    pid,
    netns: `/proc/${pid}/ns/net`,
    dnsPort: r.dnsPort,
    ports: r.ports,
    inNs: (argv) => ['nsenter', `--net=/proc/${pid}/ns/net`, '--', ...argv],
    probe: (host, port) => ask<string>({ op: 'probe', host, port }),
    stats: () => ask<Record<string, PeerStats>>({ op: 'stats' }),
    close,
  };
}

// The network namespace a process is in (the link's target, e.g. "net:[4026532281]").
export function netnsOf(pid: number | 'self'): string {
  return readlinkSync(`/proc/${pid}/ns/net`);
}

// The compiled daemon for the home `h`, inside the namespace. nsenter joins
// it and execs node, so `proc.pid` is the daemon's pid.
export function startDaemonInNetns(h: { env: NodeJS.ProcessEnv; home: string }, n: OfflineNetwork): Promise<Daemon> {
  return startDaemon(h, [], { prefix: n.inNs([]), startMs: 30_000 });
}

export interface NetnsHome {
  h: Home;
  d: Daemon;
  sock: string; // agent.sock
  pubkey: string; // the audit public key init printed, for audit verify --pubkey
}

// A fresh home whose config is `config(h)`, initialised, and its daemon
// started in the namespace and unlocked; all removed at the end of `t`.
export async function unlockedDaemonInNetns(
  t: Test,
  n: OfflineNetwork,
  config: (h: Home) => string,
): Promise<NetnsHome> {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(join(h.home, 'config.toml'), config(h), { mode: 0o600 });
  const ini = init(h, ['--json']);
  if (ini.code !== 0) throw new Error(`init: ${ini.stderr}`);
  const pubkey = (JSON.parse(ini.stdout) as { audit_public_key: string }).audit_public_key;
  const d = await startDaemonInNetns(h, n);
  t.teardown(() => d.stop());
  const u = cli(h, ['unlock', '--passphrase-file', h.passFile]);
  if (u.code !== 0) throw new Error(`unlock: ${u.stderr}`);
  return { h, d, sock: join(h.home, 'agent.sock'), pubkey };
}
