// `postern run -- CMD` ends when CMD ends (SPEC §11: "it exits with CMD's
// status"), also while a process CMD left behind still holds a proxy
// connection open: run exits with CMD's status at once, the connection it
// relayed is closed (nothing more reaches the agent socket through it), and
// the loopback port no longer accepts connections. The agent socket is a
// real peer that answers CONNECT with 200 and echoes.
import t from 'tap';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, cleanEnv, eventually, makeHome } from '../helpers/postern';
import { startRunsPeer } from '../helpers/runs-peer';

// The process CMD leaves behind: opens a CONNECT through HTTP_PROXY, says
// so, records when the connection closes, and lives on for 20 s.
const HOLDER = (dir: string): string => `
const net = require('node:net'); const fs = require('node:fs');
const u = new URL(process.env.HTTP_PROXY);
const auth = Buffer.from(decodeURIComponent(u.username) + ':' + decodeURIComponent(u.password)).toString('base64');
fs.writeFileSync(${JSON.stringify(join(dir, 'holder-pid'))}, String(process.pid));
const s = net.connect(Number(u.port), u.hostname, () =>
  s.write('CONNECT held.example:443 HTTP/1.1\\r\\nHost: held.example:443\\r\\nProxy-Authorization: Basic ' + auth + '\\r\\n\\r\\n'));
s.once('data', (d) => fs.writeFileSync(${JSON.stringify(join(dir, 'open'))}, d.toString('latin1').split('\\r\\n')[0]));
s.on('error', () => {});
s.on('close', () => fs.writeFileSync(${JSON.stringify(join(dir, 'closed'))}, String(Date.now())));
setTimeout(() => process.exit(0), 20000);`;

t.test('CMD exits while a connection it opened through the proxy is still open', async (t) => {
  const peer = await startRunsPeer();
  t.teardown(() => peer.close());
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  const env = cleanEnv({ POSTERN_HOME: h.home, POSTERN_AGENT_SOCKET: peer.socket });
  const script = `echo "$HTTP_PROXY" > ${join(h.dir, 'proxy')}
${JSON.stringify(process.execPath)} -e '${HOLDER(h.dir).replace(/'/g, `'\\''`)}' </dev/null >/dev/null 2>&1 &
for i in $(seq 400); do [ -e ${join(h.dir, 'open')} ] && exit 5; sleep 0.05; done; exit 9`;
  const run = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'run', '--', 'sh', '-c', script], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => run.on('exit', (c) => r(c)));
  t.teardown(() => {
    const pidFile = join(h.dir, 'holder-pid');
    if (existsSync(pidFile))
      try {
        process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL');
      } catch {
        // already gone
      }
  });
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 20_000).unref())]);
  t.equal(code, 5, `run ends with CMD's status ${stderr}`);
  t.match(readFileSync(join(h.dir, 'open'), 'utf8'), /^HTTP\/1\.1 200/, 'the connection had been relayed');
  t.ok(await eventually(() => existsSync(join(h.dir, 'closed')), 8000), 'the held connection was closed');
  const port = Number(/:(\d+)\n$/.exec(readFileSync(join(h.dir, 'proxy'), 'utf8'))![1]);
  const refused = await new Promise<string>((r) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => {
      s.destroy();
      r('connected');
    });
    s.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? 'error'));
  });
  t.equal(refused, 'ECONNREFUSED', 'the loopback port is closed');
});
