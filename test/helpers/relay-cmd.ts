// RelayStack harness (not a test): a real stack (daemon + HTTPS upstream + one
// credential + an approver granting sessions) and a real `postern run`
// whose CMD is a node script remote-controlled by the test over a loopback
// control connection: the test sends JS source, CMD runs it (inside the
// run's tree) and sends back the result. The test process itself is
// OUTSIDE the tree, so it plays the hostile local process.
import { spawn, ChildProcess } from 'node:child_process';
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProxyStack, ProxyStack } from './proxy-stack';
import { CLI } from './postern';
import type { Handler } from './https-upstream';

const CMD_SCRIPT = String.raw`
const net = require('node:net');
const fs = require('node:fs');
const tls = require('node:tls');
const state = {};
const AsyncFunction = (async () => {}).constructor;
const c = net.connect(Number(process.argv[2]), '127.0.0.1');
let buf = '';
c.on('connect', () => c.write(JSON.stringify({ hello: true, pid: process.pid, env: process.env }) + '\n'));
c.on('data', (d) => {
  buf += d.toString();
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    const m = JSON.parse(line);
    if (m.exit !== undefined) process.exit(m.exit);
    new AsyncFunction('env', 'net', 'fs', 'tls', 'state', 'require', m.code)(process.env, net, fs, tls, state, require)
      .then((value) => c.write(JSON.stringify({ id: m.id, value }) + '\n'))
      .catch((e) => c.write(JSON.stringify({ id: m.id, error: String(e && e.stack || e) }) + '\n'));
  }
});
c.on('close', () => process.exit(7));
`;

export interface RelayStack {
  s: ProxyStack;
  run: ChildProcess;
  runPid: number;
  cmdPid: number;
  env: Record<string, string>;
  token: string;
  port: number;
  placeholder: string;
  // runs `code` (an async function body) inside CMD; resolves with its value
  inCmd<T = unknown>(code: string, timeoutMs?: number): Promise<T>;
  stderr(): string;
  exited(): { code: number | null; signal: string | null } | null;
  waitExit(ms: number): Promise<{ code: number | null; signal: string | null } | null>;
  close(): Promise<void>;
}

export async function startRelayStack(o: { nofile?: number; handler?: Handler } = {}): Promise<RelayStack> {
  const s = await startProxyStack(o.handler ? { handler: o.handler } : {});
  const script = join(s.h.dir, 'relay-cmd.js');
  writeFileSync(script, CMD_SCRIPT);
  const control = net.createServer();
  await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
  const cport = (control.address() as net.AddressInfo).port;
  const pre = o.nofile ? ['prlimit', `--nofile=${o.nofile}`, '--'] : [];
  const argv = [
    ...pre,
    '/usr/bin/env',
    '-u',
    'NODE_OPTIONS',
    process.execPath,
    CLI,
    'run',
    '--',
    process.execPath,
    script,
    String(cport),
  ];
  const run = spawn(argv[0]!, argv.slice(1), { env: s.h.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  run.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  run.stdout!.on('data', (d: Buffer) => (err += d.toString()));
  let exit: { code: number | null; signal: string | null } | null = null;
  const exitWaiters: (() => void)[] = [];
  run.on('exit', (code, signal) => {
    exit = { code, signal };
    for (const w of exitWaiters.splice(0)) w();
  });
  const sock: net.Socket = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`CMD did not call back: ${err}`)), 30_000);
    control.once('connection', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  let buf = '';
  let hello: { pid: number; env: Record<string, string> } | null = null;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const helloP = new Promise<void>((resolveHello) => {
    sock.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (m.hello) {
          hello = m;
          resolveHello();
          continue;
        }
        const p = pending.get(m.id);
        pending.delete(m.id);
        if (!p) continue;
        if (m.error !== undefined) p.reject(new Error(m.error));
        else p.resolve(m.value);
      }
    });
  });
  sock.on('close', () => {
    for (const p of pending.values()) p.reject(new Error('CMD went away'));
    pending.clear();
  });
  await helloP;
  const h = hello as unknown as { pid: number; env: Record<string, string> };
  const proxy = new URL(h.env['HTTPS_PROXY']!);
  let next = 0;
  return {
    s,
    run,
    runPid: run.pid!,
    cmdPid: h.pid,
    env: h.env,
    token: decodeURIComponent(proxy.username),
    port: Number(proxy.port),
    placeholder: h.env['GH_TOKEN'] ?? '',
    inCmd<T>(code: string, timeoutMs = 60_000): Promise<T> {
      const id = ++next;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('inCmd timeout'));
        }, timeoutMs);
        pending.set(id, {
          resolve: (v) => {
            clearTimeout(timer);
            resolve(v as T);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        sock.write(JSON.stringify({ id, code }) + '\n');
      });
    },
    stderr: () => err,
    exited: () => exit,
    waitExit(ms) {
      if (exit) return Promise.resolve(exit);
      return new Promise((r) => {
        const timer = setTimeout(() => r(exit), ms);
        exitWaiters.push(() => {
          clearTimeout(timer);
          r(exit);
        });
      });
    },
    async close() {
      if (!exit) {
        sock.write(JSON.stringify({ exit: 0 }) + '\n');
        await new Promise((r) => setTimeout(r, 300));
        if (!exit) run.kill('SIGKILL');
      }
      sock.destroy();
      control.close();
      await s.close();
    },
  };
}

export function basic(token: string): string {
  return 'Basic ' + Buffer.from(`${token}:${token}`).toString('base64');
}

// A raw exchange from THIS (outside) process: write `chunks` (with an
// optional delay between them), collect until close or `ms`.
export function rawExchange(
  port: number,
  chunks: (string | Buffer)[],
  o: { ms?: number; gapMs?: number; localAddress?: string; localPort?: number } = {},
): Promise<{ got: Buffer; closed: boolean; error?: string }> {
  return new Promise((resolve) => {
    const c = net.connect({ port, host: '127.0.0.1', localAddress: o.localAddress, localPort: o.localPort });
    let got = Buffer.alloc(0);
    let done = false;
    const finish = (closed: boolean, error?: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      c.destroy();
      resolve({ got, closed, error });
    };
    const timer = setTimeout(() => finish(false), o.ms ?? 5000);
    c.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
    c.on('error', (e) => finish(true, String(e)));
    c.on('close', () => finish(true));
    c.on('connect', async () => {
      for (const ch of chunks) {
        c.write(ch);
        if (o.gapMs) await new Promise((r) => setTimeout(r, o.gapMs));
      }
    });
  });
}

// The same raw exchange, but from INSIDE CMD (the run's tree). `chunks` are
// latin1 strings; "@@AUTH@@" stands for the Basic credentials of the token.
export function cmdRaw(
  p: RelayStack,
  chunks: string[],
  o: { ms?: number; gapMs?: number } = {},
): Promise<{ got: string; closed: boolean; error?: string }> {
  return p.inCmd(
    `
    const proxy = new URL(env.HTTPS_PROXY);
    const auth = 'Basic ' + Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
    const chunks = ${JSON.stringify(chunks)}.map((c) => Buffer.from(c.split('@@AUTH@@').join(auth), 'latin1'));
    return await new Promise((resolve) => {
      const c = net.connect(Number(proxy.port), '127.0.0.1');
      let got = Buffer.alloc(0);
      let done = false;
      const finish = (closed, error) => { if (done) return; done = true; clearTimeout(timer); c.destroy(); resolve({ got: got.toString('latin1'), closed, error }); };
      const timer = setTimeout(() => finish(false), ${o.ms ?? 5000});
      c.on('data', (d) => (got = Buffer.concat([got, d])));
      c.on('error', (e) => finish(true, String(e)));
      c.on('close', () => finish(true));
      c.on('connect', async () => {
        for (const ch of chunks) {
          if (c.destroyed) break;
          c.write(ch);
          if (${o.gapMs ?? 0}) await new Promise((r) => setTimeout(r, ${o.gapMs ?? 0}));
        }
      });
    });
  `,
    (o.ms ?? 5000) + 60_000,
  );
}
