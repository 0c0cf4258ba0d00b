// Incomplete ssh-agent frames sent in many tiny pieces, held open.
// The daemon holds what it has of an incomplete message (up to 256 KiB per
// connection, no idle limit). What it holds must cost about what was sent,
// not a multiple: a client trickling single bytes must not make the daemon
// keep one Buffer object per byte (SPEC §1: flooding costs the flooder).
import t from 'tap';
import net from 'node:net';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { startStack } from '../helpers/stack';
import { frame, u32, MSG } from '../helpers/raw-agent-client';

function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('bytes of an incomplete frame trickled one at a time: memory ~ bytes held', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const sock = join(s.h.home, 'ssh-agent.sock');
  const pid = s.d.proc.pid!;
  const CONNS = 8;
  const conns: net.Socket[] = [];
  for (let i = 0; i < CONNS; i++) {
    const c = net.connect(sock);
    c.setNoDelay?.(true);
    c.on('error', () => undefined);
    await new Promise((r) => c.once('connect', r));
    // A sign request of 256 KiB announced.
    c.write(u32(256 * 1024));
    conns.push(c);
  }
  // Control: the same amount held by as many connections, each sent in one write.
  const control: net.Socket[] = [];
  const base = rssKiB(pid);
  for (let i = 0; i < CONNS; i++) {
    const c = net.connect(sock);
    c.on('error', () => undefined);
    await new Promise((r) => c.once('connect', r));
    c.write(Buffer.concat([u32(256 * 1024), Buffer.from([MSG.SIGN_REQUEST]), Buffer.alloc(256 * 1024 - 16, 0x41)]));
    control.push(c);
  }
  await new Promise((r) => setTimeout(r, 1500));
  const controlKiB = rssKiB(pid) - base;
  t.comment(`control: ${CONNS} x 256 KiB sent in one write each: daemon RSS +${controlKiB} KiB`);
  await new Promise((r) => setTimeout(r, 300));
  const before = rssKiB(pid);
  let sent = 0;
  const until = Date.now() + 20_000;
  const one = Buffer.from([MSG.SIGN_REQUEST]);
  let first = true;
  while (Date.now() < until && sent < CONNS * (256 * 1024 - 16)) {
    for (const c of conns) c.write(first ? one : Buffer.from([0x41]));
    first = false;
    sent += CONNS;
    await tick();
  }
  await new Promise((r) => setTimeout(r, 1500));
  const soon = rssKiB(pid);
  // Held, not garbage: the same a few seconds later, with nothing sent.
  await new Promise((r) => setTimeout(r, 5000));
  const after = rssKiB(pid);
  t.comment(`RSS 1.5 s after the last byte: ${soon} KiB; 6.5 s after: ${after} KiB`);
  const grewKiB = after - before;
  const heldKiB = sent / 1024;
  t.comment(
    `sent ${sent} bytes (${heldKiB.toFixed(0)} KiB) over ${CONNS} connections; daemon RSS ${before} -> ${after} KiB (+${grewKiB})`,
  );
  const closed = conns.filter((c) => c.destroyed).length;
  t.comment(`${closed} of ${CONNS} connections closed by the daemon`);
  t.equal(s.d.proc.exitCode, null, 'the daemon is still running');
  t.ok(
    grewKiB < 4 * heldKiB + 16 * 1024,
    `daemon memory grew ${grewKiB} KiB for ${heldKiB.toFixed(0)} KiB held (expected < 4x + 16 MiB)`,
  );
  // The daemon still answers.
  const c = net.connect(sock);
  const reply = await new Promise<Buffer>((resolve) => {
    c.on('data', (d: Buffer) => resolve(d));
    c.on('connect', () => c.write(frame(MSG.REQUEST_IDENTITIES)));
  });
  c.destroy();
  t.equal(reply[4], MSG.IDENTITIES_ANSWER, 'a new connection is answered');
  for (const x of [...conns, ...control]) x.destroy();
});
