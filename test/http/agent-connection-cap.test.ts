// An agent flooding the agent socket with connections under a low
// descriptor limit must not lock the human out of admin.sock.
import t from 'tap';
import net from 'node:net';
import { join } from 'node:path';
import { makeHome, init, startDaemon, cli } from '../helpers/postern';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('connection flood under a descriptor limit of 200', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const d = await startDaemon(h, [], { prefix: ['prlimit', '--nofile=200:200', '--'] });
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0, 'unlock');
  const sock = join(h.home, 'agent.sock');
  const conns: net.Socket[] = [];
  let accepted = 0;
  for (let i = 0; i < 400; i++) {
    const c = net.connect(sock);
    c.on('error', () => undefined);
    c.on('connect', () => {
      accepted += 1;
      // a request whose body never comes: held until agent_request_timeout
      c.write('POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-length: 100\r\n\r\n{');
    });
    conns.push(c);
  }
  await sleep(1500);
  const open = conns.filter((c) => !c.destroyed).length;
  t.comment(`connected ${accepted}, still open ${open}`);
  const st = cli(h, ['status']);
  t.comment(`status: ${st.code} ${st.stderr.slice(0, 200)}`);
  t.equal(st.code, 0, 'postern status works over admin.sock during the flood');
  const lock = cli(h, ['lock']);
  t.equal(lock.code, 0, `postern lock works during the flood (${lock.stderr.slice(0, 200)})`);
  const logs = d.logs();
  t.ok(/connections_at_limit/.test(logs), 'the log says connections were dropped');
  t.notOk(
    /EMFILE|Error:|\bstack\b/.test(logs),
    `no EMFILE or stack in the log: ${(/.*(EMFILE|Error:).*/.exec(logs) ?? [''])[0].slice(0, 300)}`,
  );
  for (const c of conns) c.destroy();
});
