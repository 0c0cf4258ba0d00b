// The daemon as pid 1 of its own pid namespace (with its own /proc), for
// identity tests that recycle pids with ns_last_pid without racing the rest
// of the machine. The daemon serves only peers it can name, so the CLI and
// the approver connect from inside the namespace (the approver through a
// relay agent that joined it).
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, PASSPHRASE, Home, Result, canConnect } from './postern';
import { TestAdmin } from './admin';
import { Agent, AgentScript } from './agent-child';

export interface NsDaemon {
  daemonPid: number; // as the test sees it
  // argv run inside the daemon's pid and mount namespaces
  inNs(argv: string[]): string[];
  // The CLI inside the namespace (synchronous: not for commands that make requests).
  cli(args: string[]): Result;
  // An approver attached over a relay into the namespace.
  admin: TestAdmin;
  close(): Promise<void>;
}

// The pids of a process in each namespace it belongs to, outermost first.
export function nsPids(pid: number): number[] {
  const line =
    readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('NSpid:')) ?? '';
  return line.split(/\s+/).slice(1).filter(Boolean).map(Number);
}

// Start the daemon for the initialised home `h`, unlock it and attach an approver.
export async function startDaemonInPidNs(h: Home, script: AgentScript): Promise<NsDaemon> {
  const unshare = spawn(
    '/usr/bin/env',
    [
      '-u',
      'NODE_OPTIONS',
      'unshare',
      '--fork',
      '--pid',
      '--mount-proc',
      '--kill-child=SIGTERM',
      process.execPath,
      CLI,
      'daemon',
    ],
    { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let logs = '';
  unshare.stdout.on('data', (d: Buffer) => (logs += d.toString()));
  unshare.stderr.on('data', (d: Buffer) => (logs += d.toString()));
  let exited = false;
  const unshareExit = new Promise<void>((r) => unshare.on('exit', () => ((exited = true), r())));
  const deadline = Date.now() + 30_000;
  while (!(await canConnect(join(h.home, 'admin.sock'))) || !(await canConnect(join(h.home, 'agent.sock')))) {
    if (exited || Date.now() > deadline) {
      unshare.kill('SIGKILL');
      throw new Error(`the daemon did not start in its pid namespace:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const daemonPid = Number(
    readFileSync(`/proc/${unshare.pid}/task/${unshare.pid}/children`, 'utf8').trim().split(/\s+/)[0],
  );
  const stopDaemon = async (): Promise<void> => {
    try {
      process.kill(daemonPid, 'SIGTERM');
    } catch {
      // already gone
    }
    await unshareExit;
  };
  const inNs = (argv: string[]): string[] => ['nsenter', '-t', String(daemonPid), '-p', '-m', '--', ...argv];
  const cli = (args: string[]): Result => {
    const r = spawnSync('/usr/bin/env', ['-u', 'NODE_OPTIONS', ...inNs([process.execPath, CLI, ...args])], {
      env: h.env,
      encoding: 'utf8',
      timeout: 60_000,
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  let relay: Agent | null = null;
  let admin: TestAdmin | null = null;
  try {
    const u = cli(['unlock', '--passphrase-file', h.passFile]);
    if (u.code !== 0) throw new Error(`unlock: ${u.stderr}`);
    relay = await Agent.start(script, { prefix: inNs([]) });
    const relayPath = join(h.dir, 'admin-relay.sock');
    await relay.relay(relayPath, join(h.home, 'admin.sock'));
    admin = await TestAdmin.connect(relayPath);
    const att = await admin.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]);
    if (att['ok'] !== true) throw new Error(`attach: ${JSON.stringify(att)}`);
  } catch (e) {
    admin?.close();
    relay?.kill();
    await stopDaemon();
    throw e;
  }
  const [a, r] = [admin, relay];
  return {
    daemonPid,
    inNs,
    cli,
    admin: a,
    async close() {
      a.close();
      r.kill();
      await stopDaemon();
    },
  };
}
