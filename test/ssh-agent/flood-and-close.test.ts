// Connections the daemon ends, and connections the client ends.
// - more than 64 unanswered messages: the daemon closes the connection; the
//   requests it dropped unanswered (here sign requests) must leave a trace
//   in the journal, as every other refusal does (SPEC §1, §9: "nothing is
//   dropped uncounted"; SPEC §12: "Anything else ... is refused and
//   journaled").
// - half-closes mid-frame and idle connections closed by the client: the
//   daemon closes its side, no descriptor is kept.
import t from 'tap';
import net from 'node:net';
import { join } from 'node:path';
import { readdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { startStack, auditList, Stack } from '../helpers/stack';
import { eventually } from '../helpers/postern';
import { frame, str, u32, MSG } from '../helpers/raw-agent-client';

let s: Stack;
let sock: string;
t.before(async () => {
  s = await startStack();
  sock = join(s.h.home, 'ssh-agent.sock');
});
t.teardown(() => s?.close());

const fds = (): number => readdirSync(`/proc/${s.d.proc.pid}/fd`).length;

function opened(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const c = net.connect(sock);
    c.once('connect', () => resolve(c));
    c.once('error', reject);
  });
}

t.test('a flood of 100 sign requests closed by the daemon is journaled', async (t) => {
  const before = auditList(s).length;
  const c = await opened();
  c.on('error', () => undefined);
  const sign = frame(MSG.SIGN_REQUEST, str(randomBytes(51)), str(randomBytes(100)), u32(0));
  const closed = new Promise<void>((r) => c.on('close', () => r()));
  c.write(Buffer.concat(Array.from({ length: 100 }, () => sign)));
  await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))]);
  t.ok(c.destroyed, 'the daemon closed the connection');
  await new Promise((r) => setTimeout(r, 1500));
  const added = auditList(s).slice(before);
  t.comment(`journal entries added: ${JSON.stringify(added.map((e) => [e['kind'], e['code'], e['request']]))}`);
  const flood = s.d
    .logs()
    .split('\n')
    .filter((l) => l.includes('ssh_agent_flood'));
  t.comment(`daemon log lines about it: ${flood.length}`);
  t.ok(added.length > 0, 'the closed, unanswered requests left an entry in the journal');
});

t.test('half-closes mid-frame and client-closed idle connections keep no descriptor', async (t) => {
  await new Promise((r) => setTimeout(r, 500));
  const base = fds();
  const N = 60;
  const halves: Promise<boolean>[] = [];
  for (let i = 0; i < N; i++) {
    const c = await opened();
    c.on('error', () => undefined);
    halves.push(
      new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 5000);
        c.on('close', () => {
          clearTimeout(timer);
          resolve(true);
        });
        c.resume();
      }),
    );
    // Half of a list request's length, or the length and half a sign request.
    c.end(i % 2 === 0 ? Buffer.from([0, 0]) : Buffer.concat([u32(200), Buffer.from([MSG.SIGN_REQUEST, 0, 0])]));
  }
  const closedByDaemon = (await Promise.all(halves)).filter(Boolean).length;
  t.equal(closedByDaemon, N, 'the daemon ends every half-closed connection');
  const idle: net.Socket[] = [];
  for (let i = 0; i < N; i++) {
    const c = await opened();
    c.on('error', () => undefined);
    c.write(u32(1000));
    idle.push(c);
  }
  t.ok(await eventually(() => fds() >= base + N, 3000), `the daemon holds the ${N} idle connections`);
  for (const c of idle) c.destroy();
  t.ok(await eventually(() => fds() <= base + 2, 5000), `descriptors back to ${base} (now ${fds()})`);
  t.equal(s.d.proc.exitCode, null, 'the daemon is still running');
});

t.test('a whole request followed by a bad frame in one write: the request is still answered', async (t) => {
  const c = await opened();
  c.on('error', () => undefined);
  const got: Buffer[] = [];
  c.on('data', (d: Buffer) => got.push(d));
  const closed = new Promise<void>((r) => c.on('close', () => r()));
  c.write(Buffer.concat([frame(MSG.REQUEST_IDENTITIES), u32(0)]));
  await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))]);
  const reply = Buffer.concat(got);
  t.comment(`reply bytes before close: ${reply.length}`);
  t.equal(reply[4], MSG.IDENTITIES_ANSWER, 'the list request before the bad frame is answered');
  t.ok(c.destroyed, 'then the connection is closed');
});
