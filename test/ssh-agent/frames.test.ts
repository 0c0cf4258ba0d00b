// Frames that cannot be messages and floods, on the ssh-agent front door
// of a real daemon: a zero-length frame and one over 256 KiB are refused
// (journaled as ssh_agent_refused, request "frame", bad_request) and the
// connection closed; more than 64 unanswered messages close the connection;
// the daemon keeps serving new connections after each.
import t from 'tap';
import net from 'node:net';
import { join } from 'node:path';
import { startStack, auditList } from '../helpers/stack';
import { eventually } from '../helpers/postern';
import { frame, u32, MSG } from '../helpers/raw-agent-client';

function send(sock: string, bytes: Buffer): Promise<{ reply: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const got: Buffer[] = [];
    const timer = setTimeout(() => {
      c.destroy();
      resolve({ reply: Buffer.concat(got), closed: false });
    }, 3000);
    c.on('data', (d: Buffer) => got.push(d));
    c.on('error', () => undefined);
    c.on('close', () => {
      clearTimeout(timer);
      resolve({ reply: Buffer.concat(got), closed: true });
    });
    c.on('connect', () => c.write(bytes));
  });
}

t.test('bad frames and floods close the connection; the daemon serves the next', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const sock = join(s.h.home, 'ssh-agent.sock');
  const list = frame(MSG.REQUEST_IDENTITIES);
  const alive = async (what: string) => {
    const r = await send(sock, list);
    t.equal(r.reply[4], MSG.IDENTITIES_ANSWER, `${what}: a new connection is answered`);
  };
  await alive('first');
  for (const [what, bytes] of [
    ['a zero-length frame', u32(0)],
    ['a frame over 256 KiB', u32(256 * 1024 + 1)],
    ['a length of 2^32-1', u32(0xffffffff)],
  ] as const) {
    const before = auditList(s).filter((e) => e['kind'] === 'ssh_agent_refused').length;
    const r = await send(sock, bytes);
    t.ok(r.closed, `${what}: the connection is closed`);
    t.equal(r.reply.length, 0, `${what}: nothing answered`);
    t.ok(
      await eventually(() => auditList(s).filter((e) => e['kind'] === 'ssh_agent_refused').length === before + 1, 5000),
      `${what}: journaled`,
    );
    t.match(
      auditList(s)
        .filter((e) => e['kind'] === 'ssh_agent_refused')
        .at(-1),
      { code: 'bad_request', request: 'frame' },
    );
    await alive(what);
  }
  const flood = await send(sock, Buffer.concat(Array.from({ length: 200 }, () => list)));
  t.ok(flood.closed, 'more than 64 unanswered messages: closed');
  await alive('after the flood');
  t.equal(s.d.proc.exitCode, null, 'the daemon is still running');
});
