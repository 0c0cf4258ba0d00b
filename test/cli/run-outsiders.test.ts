// SPEC §11, §7, §1: `postern run`'s placeholders and proxy token
// used from OUTSIDE the run. The run's CMD (a real shell with real curl)
// uses its credential through run's loopback proxy; a human approves a
// session rooted at `postern run`. Then:
//  - a same-uid process that is NOT a descendant of the run (it read CMD's
//    environment, as any same-uid process can through /proc/<pid>/environ)
//  - a process of ANOTHER uid (nobody), which agent_uids does not allow
// present the token and placeholder to run's loopback port. SPEC §11: "a
// placeholder is honoured only on connections from that process or its
// descendants, so one that leaks elsewhere is worthless"; §7: a uid not in
// agent_uids is `denied_peer`. Both must be refused, and never served under
// the session the human granted to the run.
// Finally, a lock ends every run (SPEC §11 "ends when it exits (or on
// lock)"): after lock + unlock, CMD's old placeholder must not designate the
// credential any more.
import t from 'tap';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, Card } from '../helpers/stack';
import { CLI, cli, eventually } from '../helpers/postern';

function run(cmd: string, args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString('latin1')));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('close', (code) => resolve({ code, out, err }));
  });
}

function envOf(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\0')) {
    const i = line.indexOf('=');
    if (i > 0) env[line.slice(0, i)] = line.slice(i + 1);
  }
  return env;
}

t.test('a leaked run token and placeholder are worthless outside the run', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const SECRET = 'run-outsider-secret-0123456789abcdef';
  s.addCredential(
    'gh',
    `name = "gh"\nkind = "http"\nenv = ["GH_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    SECRET,
  );
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'session', root_key: card.process.key };
  });

  const dir = mkdtempSync(join(tmpdir(), 'pt-run-outsiders-'));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const url = s.url('api.example.test', '/v1/x');
  // CMD: dumps its environment, then serves numbered triggers: for trigger
  // N it runs curl through its proxy with its placeholder and writes
  // out-N (body) and code-N (curl's exit code and HTTP status).
  const script = `cat /proc/$$/environ > ${dir}/env
i=1
for k in $(seq 1200); do
  if [ -e ${dir}/go-$i ]; then
    curl -sS --max-time 20 -o ${dir}/out-$i -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" ${url} > ${dir}/status-$i 2>${dir}/err-$i; echo $? > ${dir}/code-$i
    i=$((i+1))
  fi
  [ -e ${dir}/done ] && exit 0
  sleep 0.05
done
exit 9`;
  const runProc = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'run', '--', 'sh', '-c', script],
    {
      env: s.h.env,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let runErr = '';
  runProc.stderr.on('data', (d: Buffer) => (runErr += d.toString()));
  t.teardown(() => {
    writeFileSync(join(dir, 'done'), '');
    runProc.kill();
  });
  t.ok(
    await eventually(() => existsSync(join(dir, 'env')) && readFileSync(join(dir, 'env')).length > 0, 20_000),
    `CMD started ${runErr}`,
  );
  const env = envOf(readFileSync(join(dir, 'env'), 'latin1'));
  const placeholder = env['GH_TOKEN'] ?? '';
  const proxy = new URL(env['HTTPS_PROXY'] ?? 'http://x');
  const token = decodeURIComponent(proxy.username);
  t.match(placeholder, /^postern-gh-[0-9a-f]{16}$/, 'CMD got a placeholder');
  t.ok(token.length > 10, 'CMD got a proxy token');

  const inside = async (n: number): Promise<{ status: string; body: string; code: string }> => {
    writeFileSync(join(dir, `go-${n}`), '');
    await eventually(
      () => existsSync(join(dir, `code-${n}`)) && readFileSync(join(dir, `code-${n}`), 'utf8').trim() !== '',
      30_000,
    );
    return {
      status: readFileSync(join(dir, `status-${n}`), 'utf8'),
      body: existsSync(join(dir, `out-${n}`)) ? readFileSync(join(dir, `out-${n}`), 'utf8') : '',
      code: readFileSync(join(dir, `code-${n}`), 'utf8').trim(),
    };
  };

  // Control: CMD itself, inside the run: one card (rooted at postern run), approved, 200.
  const r1 = await inside(1);
  t.equal(r1.status, '200', `CMD's own request through the run is served (${r1.body})`);
  t.equal(cards.length, 1, 'one card for the run');

  // A copy of the bundle every uid can read, for the other uid's curl.
  const bundle = join(dir, 'bundle.pem');
  copyFileSync(env['SSL_CERT_FILE']!, bundle);
  chmodSync(bundle, 0o644);
  const outsiderArgs = [
    '-sS',
    '--max-time',
    '20',
    '--cacert',
    bundle,
    '-o',
    '-',
    '-w',
    '\n%{http_code}',
    '--proxy',
    `http://127.0.0.1:${proxy.port}`,
    '--proxy-user',
    `${token}:${token}`,
    '-H',
    `Authorization: Bearer ${placeholder}`,
    url,
  ];
  const statusOf = (out: string): string => out.trim().split('\n').pop() ?? '';

  await t.test('a same-uid process outside the run (not a descendant) is refused', async (t) => {
    const before = cards.length;
    const r = await run('curl', outsiderArgs);
    t.not(
      statusOf(r.out),
      '200',
      `outsider must not be served; got ${statusOf(r.out)}: ${r.out.slice(0, 300)} ${r.err}`,
    );
    t.notOk(r.out.includes(SECRET), 'the outsider never sees the secret echoed back');
    t.comment(`cards shown for the outsider: ${cards.length - before}`);
  });

  await t.test('a process of another uid (not in agent_uids) is refused', async (t) => {
    const r = await run('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', 'curl', ...outsiderArgs]);
    t.not(
      statusOf(r.out),
      '200',
      `uid 65534 must not use the run (agent_uids is the daemon's own uid only); got ${statusOf(r.out)}: ${r.out.slice(0, 300)} ${r.err}`,
    );
  });

  await t.test(
    'after lock and unlock, the old run is ended: its placeholder no longer designates the credential',
    async (t) => {
      t.equal(cli(s.h, ['lock']).code, 0, 'locked');
      t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0, 'unlocked');
      const before = cards.length;
      const r = await inside(2);
      t.not(
        r.status,
        '200',
        `the old placeholder after a lock must be refused; got ${r.status}: ${r.body.slice(0, 300)}`,
      );
      t.equal(cards.length, before, 'no card is even shown for it');
    },
  );
});
