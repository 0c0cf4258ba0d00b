// `postern run` as users deploy it: the daemon as a non-root system user,
// `postern run` (and so its relay and CMD) as a separate agent user with a
// config of its own naming the agent socket. The relay finds which process
// of CMD's tree holds each connection through /proc; the daemon, another
// uid, can read none of the agent's /proc/<pid>/fd. Rows: a grandchild of
// CMD (CMD -> sh -> curl) making HTTPS requests through the proxy, served
// with the secret injected; the same uid's process OUTSIDE the tree that
// learned the token is refused 403 denied_peer, nothing sent; the canary is
// in nothing the agent gets, the journal or the daemon log.
import t from 'tap';
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { cleanEnv } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';
import { gidOf, setprivAs } from '../helpers/identity-users';
import { deploy, entries, NODE, until } from '../helpers/deploy-users';

// A raw proxy client: CONNECT with the run's token, prints the proxy's
// whole answer (status line, headers, body) as JSON.
const RAW = String.raw`
const net = require('node:net');
const [port, token, target] = process.argv.slice(2);
const s = net.connect(Number(port), '127.0.0.1');
let out = Buffer.alloc(0);
s.on('connect', () => s.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\nProxy-Authorization: Basic ' + Buffer.from(token + ':' + token).toString('base64') + '\r\n\r\n'));
s.on('data', (d) => { out = Buffer.concat([out, d]); if (out.includes('\r\n\r\n') && /^HTTP\/1\.1 200/.test(out.toString())) { process.stdout.write(JSON.stringify({ answer: out.toString('latin1') })); process.exit(0); } });
s.on('close', () => { process.stdout.write(JSON.stringify({ answer: out.toString('latin1') })); process.exit(0); });
s.on('error', (e) => { process.stdout.write(JSON.stringify({ error: String(e) })); process.exit(0); });
setTimeout(() => { process.stdout.write(JSON.stringify({ answer: out.toString('latin1'), timeout: true })); process.exit(0); }, 15000);
`;

// Straight to the agent socket: CONNECT with a forged postern-run-client,
// then TLS under postern's CA and a GET carrying the run's placeholder.
const DIRECT = String.raw`
const net = require('node:net'); const tls = require('node:tls'); const fs = require('node:fs');
const [sock, target, pid, placeholder, caFile] = process.argv.slice(2);
const [host, port] = target.split(':');
const out = {};
const done = () => { process.stdout.write(JSON.stringify(out)); process.exit(0); };
setTimeout(done, 15000);
const s = net.connect(sock);
let head = Buffer.alloc(0);
s.on('error', (e) => { out.error = String(e); done(); });
s.on('connect', () => s.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\npostern-run-client: ' + pid + '\r\n\r\n'));
const onData = (d) => {
  head = Buffer.concat([head, d]);
  const i = head.indexOf('\r\n\r\n');
  if (i < 0) return;
  out.connect = head.toString('latin1');
  s.removeListener('data', onData);
  if (!/^HTTP\/1\.1 200/.test(out.connect)) { s.on('close', done); setTimeout(done, 500); return; }
  const c = tls.connect({ socket: s, servername: host, ca: fs.readFileSync(caFile) });
  let inner = Buffer.alloc(0);
  c.on('secureConnect', () => c.write('GET /v1/direct HTTP/1.1\r\nHost: ' + target + '\r\nAuthorization: Bearer ' + placeholder + '\r\nConnection: close\r\n\r\n'));
  c.on('data', (x) => (inner = Buffer.concat([inner, x])));
  c.on('error', (e) => { out.tlsError = String(e); out.inner = inner.toString('latin1'); done(); });
  c.on('close', () => { out.inner = inner.toString('latin1'); done(); });
};
s.on('data', onData);
`;

t.test('postern run as the agent user, the daemon as its own user', { timeout: 180_000 }, async (t) => {
  const d = await deploy(t, {
    handler: (req, _body, res) => {
      const text = JSON.stringify({ ok: true, url: req.url });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
  });
  const port = d.up.port;
  const secret = makeCanary('RUNDEPLOY');
  const r = d.addCred(
    'gh',
    `name = "gh"\nkind = "http"\nenv = ["GH_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  t.equal(r.code, 0, r.stderr);
  // The agent's own home: postern's CA for the run's bundle (what `postern
  // ca` would have written there), and a scratch directory.
  const agentPostern = join(d.agentHome, '.postern');
  mkdirSync(agentPostern, { mode: 0o700 });
  copyFileSync(join(d.home, 'ca.pem'), join(agentPostern, 'ca.pem'));
  const dir = join(d.agentHome, 'work');
  mkdirSync(dir, { mode: 0o700 });
  const raw = join(d.agentHome, 'raw.js');
  writeFileSync(raw, RAW);
  const direct = join(d.agentHome, 'direct.js');
  writeFileSync(direct, DIRECT);
  for (const p of [agentPostern, join(agentPostern, 'ca.pem'), dir, raw, direct])
    chownSync(p, d.agentUid, gidOf(d.agentUser));

  // Every card: a session rooted at the requester (the run).
  const sessionAll = setInterval(() => {
    for (const c of d.approver.cards.splice(0)) void d.approver.decide(c, 'session');
  }, 50);
  t.teardown(() => clearInterval(sessionAll));

  // CMD: dumps its environment, then for each trigger go-N runs the shell
  // command in cmd-N as a child (CMD -> sh -> the command).
  const script = `cat /proc/$$/environ > ${dir}/env
i=1
while [ ! -e ${dir}/done ]; do
  if [ -e ${dir}/go-$i ]; then
    sh ${dir}/cmd-$i > ${dir}/out-$i 2> ${dir}/err-$i; echo $? > ${dir}/code-$i
    i=$((i+1))
  fi
  sleep 0.05
done`;
  const env: Record<string, string | undefined> = {
    ...cleanEnv({ POSTERN_DEBUG: undefined, HOME: d.agentHome, POSTERN_CONFIG: d.agentConfig }),
  };
  delete env['NODE_OPTIONS'];
  const run = spawn(
    'setpriv',
    [
      `--reuid=${d.agentUser}`,
      `--regid=${d.agentUser}`,
      '--init-groups',
      '/usr/bin/env',
      '-u',
      'NODE_OPTIONS',
      NODE,
      d.CLI,
      'run',
      '--',
      'sh',
      '-c',
      script,
    ],
    { env: env as NodeJS.ProcessEnv, cwd: d.agentHome, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let runOut = '';
  run.stdout.on('data', (x: Buffer) => (runOut += x.toString('latin1')));
  run.stderr.on('data', (x: Buffer) => (runOut += x.toString('latin1')));
  t.teardown(() => {
    writeFileSync(join(dir, 'done'), '');
    run.kill();
  });
  await until(
    () => existsSync(join(dir, 'env')) && readFileSync(join(dir, 'env')).length > 0,
    30_000,
    `CMD (${runOut})`,
  );
  const cmdEnv: Record<string, string> = {};
  for (const kv of readFileSync(join(dir, 'env'), 'latin1').split('\0')) {
    const i = kv.indexOf('=');
    if (i > 0) cmdEnv[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const placeholder = cmdEnv['GH_TOKEN'] ?? '';
  const proxy = new URL(cmdEnv['HTTPS_PROXY'] ?? 'http://x');
  const token = decodeURIComponent(proxy.username);
  t.match(placeholder, /^postern-gh-[0-9a-f]{16}$/, 'CMD got a placeholder');
  t.notMatch(runOut, /ca\.pem is missing/, `run found the CA (${runOut})`);

  let n = 0;
  const inTree = async (cmd: string): Promise<{ out: string; err: string; code: string }> => {
    n++;
    writeFileSync(join(dir, `cmd-${n}`), cmd);
    chownSync(join(dir, `cmd-${n}`), d.agentUid, gidOf(d.agentUser));
    writeFileSync(join(dir, `go-${n}`), '');
    await until(
      () => existsSync(join(dir, `code-${n}`)) && readFileSync(join(dir, `code-${n}`), 'utf8').trim() !== '',
      40_000,
      `trigger ${n} (${runOut})`,
    );
    return {
      out: readFileSync(join(dir, `out-${n}`), 'latin1'),
      err: readFileSync(join(dir, `err-${n}`), 'latin1'),
      code: readFileSync(join(dir, `code-${n}`), 'utf8').trim(),
    };
  };
  const url = `https://api.example.test:${port}/v1/`;
  const seen: string[] = [runOut];

  await t.test('a grandchild of CMD (CMD -> sh -> curl) is served, the secret injected', async (t) => {
    const res = await inTree(
      `curl -sS --max-time 30 -w '\\n%{http_code}' -H "Authorization: Bearer $GH_TOKEN" ${url}child\n`,
    );
    seen.push(res.out, res.err);
    t.equal(res.code, '0', res.err);
    t.equal(res.out.split('\n').pop(), '200', res.out + res.err);
    t.match(res.out, /"url":"\/v1\/child"/);
    t.equal(
      d.up.requests.find((q) => q.url === '/v1/child')?.headers['authorization'],
      `Bearer ${secret}`,
      'the upstream got the secret in place of the placeholder',
    );
    // A great-grandchild too, in the background of a subshell, waited for.
    const res2 = await inTree(
      `( sh -c 'curl -sS --max-time 30 -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $GH_TOKEN" ${url}deeper' & wait )\n`,
    );
    seen.push(res2.out, res2.err);
    t.equal(res2.out, '200', res2.err);
    // The raw client from the tree: the control for the outsider row below.
    const res3 = await inTree(`${NODE} ${raw} ${proxy.port} ${token} api.example.test:${port}\n`);
    seen.push(res3.out);
    t.match(JSON.parse(res3.out).answer, /^HTTP\/1\.1 200/, `the same raw client in the tree is served: ${res3.out}`);
  });

  await t.test('the agent user outside the tree, with the token: 403 denied_peer, nothing sent', async (t) => {
    const before = d.up.requests.length;
    const cards = d.approver.pushes.length;
    const o = await setprivAs(d.agentUser, [NODE, raw, String(proxy.port), token, `api.example.test:${port}`], {
      cwd: d.agentHome,
    });
    seen.push(o.stdout, o.stderr);
    const answer = (JSON.parse(o.stdout) as { answer: string }).answer;
    t.match(answer, /^HTTP\/1\.1 403 /, answer);
    t.match(answer, /"code":"denied_peer"/, 'the refusal carries its code');
    // And curl, the way a program would use the leaked proxy URL and placeholder.
    const c = await setprivAs(
      d.agentUser,
      [
        'curl',
        '-sS',
        '--max-time',
        '20',
        '--cacert',
        join(agentPostern, 'ca.pem'),
        '-w',
        '\n%{http_connect} %{http_code}',
        '--proxy',
        `http://${token}:${token}@127.0.0.1:${proxy.port}`,
        '-H',
        `Authorization: Bearer ${placeholder}`,
        `${url}outsider`,
      ],
      { cwd: d.agentHome },
    );
    seen.push(c.stdout, c.stderr);
    t.equal(c.stdout.split('\n').pop(), '403 000', `curl: CONNECT refused 403 (${c.stdout} ${c.stderr})`);
    t.equal(d.up.requests.length, before, 'nothing reached the upstream');
    t.equal(d.approver.pushes.length, cards, 'no card was shown for it');
  });

  await t.test(
    'the agent user outside the tree, straight to the agent socket with the placeholder and a forged postern-run-client: not served with the secret',
    async (t) => {
      const cmdPid = run.pid ?? 0; // postern run itself (setpriv and env exec)
      const before = d.up.requests.length;
      const o = await setprivAs(
        d.agentUser,
        [
          NODE,
          direct,
          d.agentSock,
          `api.example.test:${port}`,
          String(cmdPid),
          placeholder,
          join(agentPostern, 'ca.pem'),
        ],
        { cwd: d.agentHome },
      );
      seen.push(o.stdout, o.stderr);
      const res = JSON.parse(o.stdout) as { connect?: string; inner?: string; error?: string };
      t.comment(JSON.stringify(res).slice(0, 600));
      t.notOk(
        d.up.requests.slice(before).some((q) => String(q.headers['authorization']).includes(secret)),
        'the upstream never got the secret for it',
      );
      const refusal = /^HTTP\/1\.1 (4\d\d)/.test(res.inner ?? '') ? res.inner! : (res.connect ?? '');
      t.match(refusal, /^HTTP\/1\.1 4\d\d /, `refused (${refusal.slice(0, 200)})`);
      t.match(refusal, /x-postern-error: bad_request/i, 'with its code');
    },
  );

  await t.test('the canary is nowhere the agent looks, nor in the journal or daemon log', async (t) => {
    writeFileSync(join(dir, 'done'), '');
    await new Promise((r) => setTimeout(r, 500));
    t.same(findCanary(seen.join('\n') + runOut, secret), [], 'agent-side bytes');
    const j = d.journal();
    t.same(findCanary(j, secret), [], 'journal');
    t.same(findCanary(d.daemonLog(), secret), [], 'daemon log');
    const runs = entries(j).filter((e) => String(e['kind']).startsWith('run'));
    t.ok(runs.length >= 1, `the run is journaled (${runs.map((e) => e['kind']).join(',')})`);
  });
});
