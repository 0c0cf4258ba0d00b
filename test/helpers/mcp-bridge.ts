// `postern mcp` driven by the official MCP SDK client (Client +
// StdioClientTransport), as MCP hosts run it: the bridge is this process's
// child, started through env(1) so that the test runner's NODE_OPTIONS
// (which postern refuses) is removed; env execs node, so the bridge's
// parent is this process. Every byte the bridge writes on stdout and stderr
// is kept, for line-size and canary checks.
import type { ChildProcess } from 'node:child_process';
import type { Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CLI } from './postern';

export interface SdkBridge {
  client: Client;
  transport: StdioClientTransport;
  pid: number;
  // Everything the bridge wrote on stdout, and its stderr.
  stdout(): Buffer;
  stderr(): string;
  // The length in bytes of each line the bridge wrote on stdout.
  lineLengths(): number[];
  // True once the transport has closed (the bridge exited, or the client
  // gave up on it).
  closed(): boolean;
}

// The bridge's environment: the given one without NODE_OPTIONS.
export function bridgeEnv(env: NodeJS.ProcessEnv, extra: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && k !== 'NODE_OPTIONS') out[k] = v;
  return { ...out, ...extra };
}

export function bridgeCommand(): { command: string; args: string[] } {
  return { command: '/usr/bin/env', args: ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'mcp'] };
}

export async function connectSdkBridge(
  t: Test,
  env: NodeJS.ProcessEnv,
  extra: Record<string, string> = {},
): Promise<SdkBridge> {
  const transport = new StdioClientTransport({ ...bridgeCommand(), env: bridgeEnv(env, extra), stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name: 'postern-test', version: '1.0.0' });
  let closed = false;
  client.onclose = () => (closed = true);
  // The SDK keeps its child private; a second listener, added as soon as
  // the child is spawned (before the first message), sees the same bytes.
  const chunks: Buffer[] = [];
  const start = transport.start.bind(transport);
  transport.start = async () => {
    await start();
    const child = (transport as unknown as { _process?: ChildProcess })._process;
    child?.stdout?.on('data', (c: Buffer) => chunks.push(c));
  };
  await client.connect(transport);
  t.teardown(() => client.close().catch(() => undefined));
  const pid = transport.pid;
  if (pid === null) throw new Error('the bridge did not start');
  return {
    client,
    transport,
    pid,
    stdout: () => Buffer.concat(chunks),
    stderr: () => stderr,
    lineLengths: () => {
      const all = Buffer.concat(chunks);
      const lengths: number[] = [];
      let start = 0;
      for (let i = all.indexOf(10); i >= 0; i = all.indexOf(10, start)) {
        lengths.push(i - start);
        start = i + 1;
      }
      if (start < all.length) lengths.push(all.length - start);
      return lengths;
    },
    closed: () => closed,
  };
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
