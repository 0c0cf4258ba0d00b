// `postern run` in front of a real daemon (SPEC §11): what CMD's curl sends
// through run's proxy reaches the daemon's agent socket, and the daemon's
// answer comes back to curl as the daemon gave it (the same status, code
// and message as the same request sent straight to the socket); the proxy
// token reaches neither the daemon's log nor its journal. POST /v1/runs is
// answered by a real peer in front of the daemon, which passes every other
// connection to the daemon byte for byte.
import t from 'tap';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon } from '../helpers/postern';
import { cliBytes } from '../helpers/cli-bytes';
import { startRunsPeer } from '../helpers/runs-peer';

function straight(socket: string, head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socket);
    let got = '';
    s.on('connect', () => s.write(head));
    s.on('data', (d: Buffer) => (got += d.toString()));
    s.on('error', reject);
    s.on('close', () => resolve(got));
  });
}

function answer(raw: string): { status: number; error: Record<string, unknown> } {
  const end = raw.indexOf('\r\n\r\n');
  const body = JSON.parse(raw.slice(end + 4)) as { error: Record<string, unknown> };
  const { audit_seq: _seq, ...error } = body.error;
  return { status: Number(raw.split(' ')[1]), error };
}

t.test("a real daemon's answer comes back through postern run's proxy", async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const agentSocket = join(h.home, 'agent.sock');
  const peer = await startRunsPeer({ forward: agentSocket });
  t.teardown(() => peer.close());

  const proxyFile = join(h.dir, 'proxy');
  const env = { ...h.env, POSTERN_AGENT_SOCKET: peer.socket };
  const r = await cliBytes(env, [
    'run',
    '--',
    'sh',
    '-c',
    `echo "$HTTP_PROXY" > ${proxyFile}; curl -sS --max-time 20 -D - http://x.example/some/path`,
  ]);
  t.equal(r.code, 0, r.stderr);
  const token = /^http:\/\/([^:]+):/.exec(readFileSync(proxyFile, 'utf8'))![1]!;
  const viaRun = answer(r.stdout.toString());
  const direct = answer(
    await straight(
      agentSocket,
      'GET http://x.example/some/path HTTP/1.1\r\nHost: x.example\r\nconnection: close\r\n\r\n',
    ),
  );
  t.ok(viaRun.status >= 400, `the daemon refused: ${JSON.stringify(viaRun)}`);
  t.same(viaRun, direct, "the daemon's answer, unchanged by the relay");
  t.equal(peer.relayed.length, 1, 'one connection relayed to the daemon');
  t.match(peer.relayed[0]!.head, /^GET http:\/\/x\.example\/some\/path HTTP\/1\.1\r\n/);
  t.notMatch(peer.relayed[0]!.head, /proxy-authorization/i);

  await d.stop();
  t.equal(d.logs().indexOf(token), -1, "the token is not in the daemon's log");
  const journal = cli(h, ['audit', 'show', '--json', '--passphrase-file', h.passFile]);
  t.equal(journal.code, 0, journal.stderr);
  t.match(journal.stdout, /"kind":"http_refused"[^\n]*"via":"proxy"/, 'the refusal is journaled');
  t.equal(journal.stdout.indexOf(token), -1, 'the token is not in the journal');
  t.equal(journal.stdout.indexOf(Buffer.from(`${token}:${token}`).toString('base64')), -1);
});
