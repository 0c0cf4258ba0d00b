// A hostile agent floods each front door (the JSON agent socket, the proxy
// front door's CONNECT, the ssh-agent socket) with connections it holds
// open, against a daemon that runs with only 256 descriptors (`prlimit
// --nofile=256`). SPEC §1: "The daemon never stops because of what an agent
// sends ... Flooding it costs the flooder, not the human"; lock, revoke and
// status are the human's emergency brake (admin.sock). The agent-facing
// sockets keep to a budget of descriptors (connection-budget.ts), so the
// daemon keeps running, `postern status` and `postern lock` answer during
// the flood, the log says connections were closed, and agents are served
// again once the flood ends. Before the budget, the flood took every
// descriptor, and the accept on admin.sock failing closed the human's
// connections: neither status nor lock worked.
import t from 'tap';
import net from 'node:net';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import {
  cli,
  cliAsync,
  credAdd,
  eventually,
  init,
  makeHome,
  startDaemon,
  agentRequest,
  Result,
} from '../helpers/postern';

const NOFILE = 256;
const FLOOD = 400; // connections the agent tries to hold: beyond the daemon's limit

function fdCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return -1;
  }
}

// A CLI call with a hang guard: null when it did not finish in `ms`.
async function guarded(p: Promise<Result>, ms = 60_000): Promise<Result | null> {
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([p, new Promise<null>((res) => (timer = setTimeout(() => res(null), ms)))]);
  clearTimeout(timer);
  return r;
}

type Door = 'agent-idle' | 'agent-half-head' | 'connect-idle' | 'ssh-agent-idle';

// Opens one flood connection to the door; resolves when it is connected (or failed).
function openOne(door: Door, home: string, held: Set<net.Socket>): Promise<void> {
  const path = door === 'ssh-agent-idle' ? join(home, 'ssh-agent.sock') : join(home, 'agent.sock');
  return new Promise((resolve) => {
    const c = net.connect(path);
    c.on('connect', () => {
      held.add(c);
      if (door === 'agent-half-head') c.write('POST /v1/http HTTP/1.1\r\nhost: postern\r\nx-slow: ');
      if (door === 'connect-idle')
        c.write('CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n');
      resolve();
    });
    c.on('error', () => resolve());
    c.on('close', () => held.delete(c));
  });
}

async function floodDoor(t: Test, door: Door): Promise<void> {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const d = await startDaemon(h, [], { prefix: ['prlimit', `--nofile=${NOFILE}`, '--'] });
  t.teardown(() => d.stop());
  const pid = d.proc.pid!;
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0, 'unlocked');
  if (door === 'connect-idle') {
    const r = credAdd(
      h,
      'api',
      'name = "api"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\n',
      'fd-flood-secret-0123456789',
    );
    t.equal(r.code, 0, `cred add: ${r.stderr}`);
  }
  const alive = (): boolean => d.proc.exitCode === null && d.proc.signalCode === null;

  // The flood: held open, and topped up as the daemon drops some, until stopped.
  const held = new Set<net.Socket>();
  let flooding = true;
  const topUp = async (): Promise<void> => {
    while (flooding) {
      const want = FLOOD - held.size;
      const batch = Math.min(50, want);
      if (batch > 0) await Promise.all(Array.from({ length: batch }, () => openOne(door, h.home, held)));
      await new Promise((r) => setTimeout(r, batch > 0 ? 20 : 200));
    }
  };
  const flood = topUp();
  t.teardown(async () => {
    flooding = false;
    await flood;
    for (const c of held) c.destroy();
  });

  // Wait until the flood is beyond the budget: the daemon closes new ones.
  const full = await eventually(() => /connections_at_limit/.test(d.logs()), 20_000);
  t.ok(full, `the flood reaches the agent connections' budget (daemon holds ${fdCount(pid)} of ${NOFILE} descriptors)`);
  await new Promise((r) => setTimeout(r, 1000));
  t.ok(
    fdCount(pid) < NOFILE - 16,
    `descriptors are left for the admin socket (daemon holds ${fdCount(pid)} of ${NOFILE})`,
  );

  await t.test(`${door}: the daemon is still running during the flood`, async (t) => {
    t.ok(alive(), `daemon alive (exit ${d.proc.exitCode}, signal ${d.proc.signalCode})`);
  });

  await t.test(`${door}: postern status answers during the flood`, async (t) => {
    const r = await guarded(cliAsync(h, ['status', '--json']));
    t.not(r, null, 'status finished (hang guard 60 s)');
    t.equal(r?.code, 0, `status exit code (stderr: ${r?.stderr.trim()})`);
  });

  await t.test(`${door}: postern lock works during the flood`, async (t) => {
    const r = await guarded(cliAsync(h, ['lock']));
    t.not(r, null, 'lock finished (hang guard 60 s)');
    t.equal(r?.code, 0, `lock exit code (stderr: ${r?.stderr.trim()})`);
    // Whether the lock happened: asked once the flood is over (below), as the
    // agent socket is part of what is flooded.
  });

  flooding = false;
  await flood;
  for (const c of held) c.destroy();

  await t.test(`${door}: after the flood the daemon serves again, and is locked`, async (t) => {
    t.ok(alive(), 'daemon alive after the flood');
    const ok = await eventually(async () => {
      try {
        const r = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
        return r.status === 200;
      } catch {
        return false;
      }
    }, 20_000);
    t.ok(ok, 'GET /v1/health answers again');
    const r = await agentRequest(join(h.home, 'agent.sock'), 'GET', '/v1/health');
    t.same(r.json, { locked: true }, `the lock asked during the flood took effect (${r.text})`);
    t.ok(await eventually(() => fdCount(pid) < 64, 20_000), `descriptors are released (daemon holds ${fdCount(pid)})`);
  });

  await t.test(`${door}: the daemon says it closed connections beyond its budget`, async (t) => {
    t.match(d.logs(), /connections are open, the most this daemon's descriptor limit allows/, 'a log line says why');
  });

  await t.test(`${door}: the journal verifies after a clean stop`, async (t) => {
    const code = await d.stop();
    t.equal(code, 0, 'clean stop');
    const v = cli(h, ['audit', 'verify', '--json']);
    t.equal(v.code, 0, v.stdout + v.stderr);
  });
}

for (const door of ['agent-idle', 'agent-half-head', 'connect-idle', 'ssh-agent-idle'] as Door[]) {
  t.test(`descriptor flood on ${door} (daemon limited to ${NOFILE} descriptors)`, (t) => floodDoor(t, door));
}
