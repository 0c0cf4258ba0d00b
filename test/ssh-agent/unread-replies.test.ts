// Adversarial rows: a client on the ssh-agent socket that pipelines
// requests and never reads the replies. Each batch stays under the
// 64-unanswered limit, so the connection is not closed for flooding; the
// daemon must still not hold an unbounded amount of unsent replies for it
// (SPEC §1: flooding costs the flooder, and no input ends the process).
// Written while each reply was written without a look at sock.write's
// answer, the replies piling up in the daemon's memory (a 5-byte request,
// a reply of every offered key); the daemon now stops reading a client
// until its answers drain. Batches of 8 every 5 ms stay under the daemon's
// answering rate on this machine.
import t from 'tap';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { startAgentStack, AgentStack } from '../helpers/ssh-agent-stack';
import { frame, MSG } from '../helpers/raw-agent-client';

let a: AgentStack;
t.before(async () => {
  a = await startAgentStack({
    creds: [
      { name: 'deploy', key: 'ed25519', sshAgent: true },
      { name: 'deploy-rsa', key: 'rsa', sshAgent: true },
    ],
  });
});
t.teardown(async () => {
  await a?.close();
});

function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

t.test('replies a client never reads are not buffered without bound', async (t) => {
  const pid = a.s.d.proc.pid!;
  const before = rssKiB(pid);
  const c = net.connect(a.agentSock);
  await new Promise((r) => c.once('connect', r));
  c.pause(); // never read a reply
  let closed = false;
  c.on('close', () => (closed = true));
  c.on('error', () => undefined);
  const batch = Buffer.concat(Array.from({ length: 8 }, () => frame(MSG.REQUEST_IDENTITIES)));
  let sent = 0;
  const until = Date.now() + 20000;
  let peak = before;
  while (!closed && Date.now() < until) {
    if (!c.write(batch)) {
      const drained = await Promise.race([
        new Promise((r) => c.once('drain', () => r(true))),
        new Promise((r) => setTimeout(() => r(false), 4000)),
      ]);
      if (!drained) {
        t.comment(`the daemon stopped reading after ${sent} bytes; RSS ${rssKiB(pid)} KiB`);
        break;
      }
    }
    sent += batch.length;
    await new Promise((r) => setTimeout(r, 5));
    if (sent % (batch.length * 200) === 0) peak = Math.max(peak, rssKiB(pid));
  }
  peak = Math.max(peak, rssKiB(pid));
  c.destroy();
  t.comment(
    `sent ${sent} bytes of requests; daemon RSS ${before} KiB -> peak ${peak} KiB; closed by daemon: ${closed}`,
  );
  t.equal(a.s.d.proc.exitCode, null, 'the daemon is still running');
  t.ok(peak - before < 48 * 1024, `the daemon's memory grew by ${peak - before} KiB, less than 48 MiB`);
});
