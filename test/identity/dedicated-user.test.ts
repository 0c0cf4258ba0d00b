// SPEC §1, §3, §7: the dedicated-user deployment, end to end, with real
// users this test creates and removes: the daemon runs as a non-root
// system user, the agent as another user that reaches the agent socket
// through a group. The steps are those of docs/operations.md, *Dedicated-
// user deployment*, in its order and with its commands (names made unique,
// paths under a scratch directory instead of /var/lib and /run). A
// non-root daemon cannot read the agent's /proc/<pid>/exe or cwd: the agent
// is identified from what Linux shows everyone, and the card says what was
// not readable.
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, writeFileSync, chownSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { PASSPHRASE, canConnect, cleanEnv } from '../helpers/postern';
import { startUpstream } from '../helpers/identity-upstream';
import { startSshd } from '../helpers/sshd';
import { sshDefinition } from '../helpers/ssh-credential';
import { asRoot, gidOf, makeUsers, runAs, runnableRoot, setprivAs, spawnAs, uidOf } from '../helpers/identity-users';
import { NOT_READABLE } from '../../shared/admin-protocol';

const NODE = process.execPath;

// An approver's view as the daemon's user: attached over admin.sock with
// the passphrase, it prints every card it is pushed (JSON, then the lines
// the interactive approver would draw) and decides nothing; `postern
// approver --auto approve` decides.
const WATCHER = String.raw`
const net = require('node:net');
const fs = require('node:fs');
const root = process.argv[2];
const { encodeFrame, FrameDecoder } = require(root + '/dist/shared/admin-frame.js');
const { readCard } = require(root + '/dist/cli/approver/card.js');
const { renderCard } = require(root + '/dist/cli/approver/render.js');
const s = net.connect(process.argv[3]);
const dec = new FrameDecoder();
s.on('connect', () => s.write(encodeFrame({ id: 1, op: 'approver.attach', args: {} }, [Buffer.from(fs.readFileSync(process.argv[4], 'utf8').trim())])));
s.on('data', (c) => {
  for (const f of dec.push(c)) {
    if (f.json.push === 'pending') process.stdout.write(JSON.stringify({ card: f.json.card, lines: renderCard(readCard(f.json.card)) }) + '\n');
    else if (f.json.id === 1) process.stdout.write(JSON.stringify({ attached: f.json.ok === true, error: f.json.error }) + '\n');
  }
});
s.on('close', () => process.exit(0));
`;

interface Seen {
  card?: {
    process: { pid: number; uid: number; exe: string; cwd: string; cmdline: string[]; key: string };
    ancestors: { uid: number; exe: string }[];
    credential: string;
  };
  lines?: string[];
  attached?: boolean;
}

function lines(p: ChildProcess): { all: Seen[]; text(): string } {
  let buf = '';
  let text = '';
  const all: Seen[] = [];
  p.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    text += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        all.push(JSON.parse(line) as Seen);
      } catch {
        // not JSON: kept in text()
      }
    }
  });
  p.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  return { all, text: () => text };
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function exited(p: ChildProcess): Promise<number | null> {
  return p.exitCode !== null ? Promise.resolve(p.exitCode) : new Promise((r) => p.once('exit', (code) => r(code)));
}

t.test(
  'the dedicated-user deployment of docs/operations.md, with a non-root daemon user and a real agent user',
  { timeout: 110_000 },
  async (t) => {
    const u = makeUsers();
    t.teardown(() => u.close());
    const daemonUser = u.name('d');
    const agentUser = u.name('a');
    const group = u.name('g');
    const daemonHome = join(u.base, 'var-lib-postern'); // /var/lib/postern in the doc
    const agentHome = join(u.base, 'home-agent');
    const runDir = join(u.base, 'run-postern'); // /run/postern in the doc
    const home = join(daemonHome, '.postern');
    const agentSock = join(runDir, 'agent.sock');
    const sshAgentSock = join(runDir, 'ssh-agent.sock');

    // Step 1: the daemon's user, the agents' group, the agent in it (the
    // agent user stands for "you"), and the daemon's user in it too.
    u.madeUser(daemonUser);
    asRoot('useradd', [
      '--system',
      '--create-home',
      '--home-dir',
      daemonHome,
      '--shell',
      '/usr/sbin/nologin',
      daemonUser,
    ]);
    u.madeGroup(daemonUser);
    u.madeGroup(group);
    asRoot('groupadd', [group]);
    u.madeUser(agentUser);
    asRoot('useradd', ['--create-home', '--home-dir', agentHome, '--shell', '/bin/sh', agentUser]);
    u.madeGroup(agentUser);
    asRoot('usermod', ['-aG', group, agentUser]);
    // `postern`: the compiled CLI, where the daemon's user can run it.
    const ROOT = runnableRoot(u, daemonUser);
    const CLI = join(ROOT, 'dist', 'cli', 'main.js');
    const postern = (...args: string[]): string[] => [NODE, CLI, ...args];
    const daemonUid = uidOf(daemonUser);
    const agentUid = uidOf(agentUser);
    t.not(daemonUid, 0, 'the daemon user is not root');
    // Step 2: the socket directory both reach.
    asRoot('install', ['-d', '-o', daemonUser, '-g', group, '-m', '0750', runDir]);

    // The test's own servers: an HTTPS upstream with a throwaway CA (copied
    // where the daemon's user can read it), a DNS server, a real sshd.
    const { ca, up, dns } = await startUpstream(t);
    const sshd = await startSshd();
    t.teardown(() => sshd.close());
    const caFile = join(daemonHome, 'ca.pem');
    copyFileSync(ca.caFile, caFile);
    // The daemon user's scratch files: passphrase, credential definitions, secrets.
    const own = (name: string, content: string): string => {
      const p = join(daemonHome, name);
      writeFileSync(p, content, { mode: 0o600 });
      chownSync(p, daemonUid, gidOf(daemonUser));
      return p;
    };
    const passFile = own('pass', PASSPHRASE + '\n');

    // Step 3: the config, in the daemon user's home, written as that user.
    const config = [
      '[daemon]',
      `agent_socket = "${agentSock}"`,
      'agent_socket_mode = "0660"',
      `agent_socket_group = "${group}"`,
      `agent_uids = [${agentUid}]`,
      `daemon_uid = ${daemonUid}`,
      '[ssh]',
      `ssh_agent_socket = "${sshAgentSock}"`,
      '[http]',
      `dns_servers = ["127.0.0.1:${dns.port}"]`,
      `ca_file = "${caFile}"`,
      '',
    ].join('\n');
    let r = runAs(daemonUser, ['mkdir', '-m', '0700', home]);
    t.equal(r.code, 0, r.stderr);
    r = runAs(daemonUser, ['sh', '-c', `umask 077 && cat > ${home}/config.toml`], { input: config });
    t.equal(r.code, 0, r.stderr);
    // Step 4: init, as the daemon's user: it approves the config it finds.
    r = runAs(daemonUser, postern('init', '--kdf', 'interactive', '--passphrase-file', passFile));
    t.equal(r.code, 0, `init: ${r.stderr}`);
    const pubkey = /audit public key: (\S+)/.exec(r.stdout + r.stderr)?.[1];
    t.ok(pubkey, `init printed the audit public key: ${r.stdout}`);

    // Step 5 without the last command of step 1 (the daemon's user in the
    // group): a clear start-up error naming the fix, no crash.
    const startDaemon = (): ChildProcess => spawnAs(daemonUser, postern('daemon'), { setpriv: { home: daemonHome } });
    await t.test('the daemon user not in agent_socket_group: a start-up error naming usermod, exit 1', async (t) => {
      const d = startDaemon();
      const out = lines(d);
      const code = await exited(d);
      t.equal(code, 1, out.text());
      t.match(out.text(), `usermod -aG ${group} ${daemonUser}`, 'names the fix');
      t.notMatch(out.text(), /\n\s+at /, 'no stack trace');
      t.notOk(existsSync(agentSock), 'no agent socket left behind');
    });
    // The fix the error named, the last command of the doc's step 1.
    asRoot('usermod', ['-aG', group, daemonUser]);

    // Step 5: the daemon, as its user (setpriv --reuid --regid --init-groups).
    const daemon = startDaemon();
    const dlog = lines(daemon);
    t.teardown(async () => {
      if (daemon.exitCode === null) daemon.kill('SIGTERM');
      await exited(daemon);
    });
    await until(
      () => existsSync(agentSock) && existsSync(join(home, 'admin.sock')),
      20_000,
      `the sockets (daemon log: ${dlog.text()})`,
    );
    t.ok(await canConnect(agentSock), 'the agent socket answers');
    const st = asRoot('stat', ['-c', '%U %G %a', agentSock]).trim();
    t.equal(st, `${daemonUser} ${group} 660`, "the agent socket is the daemon user's, shared with the group");
    t.equal(
      asRoot('stat', ['-c', '%U %G %a', sshAgentSock]).trim(),
      `${daemonUser} ${group} 660`,
      'so is the ssh-agent socket',
    );
    // setpriv and env exec: the child is the daemon itself.
    t.equal(
      Number(asRoot('ps', ['-o', 'uid=', '-p', String(daemon.pid)]).trim()),
      daemonUid,
      'the daemon runs as its user',
    );

    // The human, as the daemon's user: unlock, a credential, the approver.
    r = runAs(daemonUser, postern('unlock', '--passphrase-file', passFile));
    t.equal(r.code, 0, `unlock: ${r.stderr}`);
    const httpCred = own(
      'api.toml',
      `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    );
    const secret = 'dedicated-user-secret-0123456789';
    r = runAs(
      daemonUser,
      postern(
        'cred',
        'add',
        '--file',
        httpCred,
        '--secret-file',
        own('api.secret', secret),
        '--passphrase-file',
        passFile,
      ),
    );
    t.equal(r.code, 0, `cred add api: ${r.stderr}`);
    const sshCred = own(
      'box.toml',
      sshDefinition({
        name: 'box',
        port: sshd.port,
        user: sshd.user,
        hostKey: sshd.hostKeyFingerprint,
        commands: ['echo *'],
      }) + 'ssh_agent = true\n',
    );
    r = runAs(
      daemonUser,
      postern(
        'cred',
        'add',
        '--file',
        sshCred,
        '--secret-file',
        own('box.key', sshd.keys.ed25519.privateKey),
        '--passphrase-file',
        passFile,
      ),
    );
    t.equal(r.code, 0, `cred add box: ${r.stderr}`);

    const watcherJs = own('watcher.js', WATCHER);
    const watcher = spawnAs(daemonUser, [NODE, watcherJs, ROOT, join(home, 'admin.sock'), passFile]);
    const seen = lines(watcher);
    t.teardown(() => void watcher.kill());
    await until(() => seen.all.some((s) => s.attached !== undefined), 20_000, `the watcher (${seen.text()})`);
    t.ok(
      seen.all.some((s) => s.attached === true),
      `a card watcher attached as the daemon's user: ${seen.text()}`,
    );
    const approver = spawnAs(daemonUser, postern('approver', '--auto', 'approve', '--passphrase-file', passFile));
    const alog = lines(approver);
    t.teardown(() => void approver.kill());
    await until(() => /approv|attached|waiting/i.test(alog.text()), 20_000, `the approver (${alog.text()})`);

    const cards = (): NonNullable<Seen['card']>[] => seen.all.flatMap((s) => (s.card ? [s.card] : []));
    const agentCurl = (
      args: string[],
    ): Promise<{ code: number | null; status: number; json: Record<string, unknown> | null; text: string }> =>
      setprivAs(agentUser, ['curl', '-sS', '--unix-socket', agentSock, '-w', '\n%{http_code}', ...args], {
        cwd: agentHome,
      }).then((x) => {
        const cut = x.stdout.lastIndexOf('\n');
        const body = x.stdout.slice(0, cut);
        let json: Record<string, unknown> | null = null;
        try {
          json = JSON.parse(body) as Record<string, unknown>;
        } catch {
          json = null;
        }
        return { code: x.code, status: Number(x.stdout.slice(cut + 1)), json, text: x.stdout + x.stderr };
      });

    await t.test('the agent user: health, then an HTTP request through the group-shared socket', async (t) => {
      const health = await agentCurl(['http://postern/v1/health']);
      t.equal(health.status, 200, health.text);
      t.same(health.json, { locked: false }, 'not unidentified_peer: the agent is served');
      const before = cards().length;
      const res = await agentCurl([
        '-H',
        'content-type: application/json',
        '--data',
        JSON.stringify({ credential: 'api', method: 'GET', url: `https://api.example.test:${up.port}/v1/items` }),
        'http://postern/v1/http',
      ]);
      t.equal(res.status, 200, res.text);
      t.equal((res.json as { status?: number })?.status, 200, 'the upstream answered');
      t.equal(up.requests.at(-1)?.headers['authorization'], `Bearer ${secret}`, 'the upstream got the secret');
      t.notMatch(res.text, secret, 'the agent never saw it');
      await until(() => cards().length > before, 5000, 'the card');
      const card = cards()[before]!;
      t.equal(card.credential, 'api');
      t.equal(card.process.uid, agentUid, 'the card names the agent uid');
      t.equal(card.process.cmdline[0], 'curl', 'and its command line');
      t.equal(card.process.exe, NOT_READABLE, 'the executable: not readable by the daemon');
      t.equal(card.process.cwd, NOT_READABLE, 'the directory: not readable by the daemon');
      t.ok(card.ancestors.length >= 1, 'the parent chain is read');
      const text = seen.all.find((s) => s.card === card)!.lines!.join('\n');
      t.match(text, /exe \(not readable by the daemon/, 'the rendered card says so on the exe');
      t.match(text, /the executable and directory are not readable by the daemon/, 'and in words');
      t.match(text, new RegExp(`uid ${agentUid}`));
    });

    await t.test('SSH from the agent user', async (t) => {
      const res = await agentCurl([
        '-H',
        'content-type: application/json',
        '--data',
        JSON.stringify({ credential: 'box', command: 'echo dedicated' }),
        'http://postern/v1/ssh',
      ]);
      t.equal(res.status, 200, res.text);
      t.equal((res.json as { exit_code?: number })?.exit_code, 0, res.text);
      t.equal((res.json as { stdout?: string })?.stdout, 'dedicated\n', 'the command ran on the real sshd');
      t.equal(cards().at(-1)?.credential, 'box', 'a card for the SSH credential');
    });

    await t.test('ssh from the agent user through the ssh-agent socket, the key staying in the vault', async (t) => {
      const before = cards().length;
      const res = await setprivAs(
        agentUser,
        [
          'ssh',
          '-o',
          `IdentityAgent=${sshAgentSock}`,
          '-o',
          'UserKnownHostsFile=/dev/null',
          '-o',
          'StrictHostKeyChecking=no',
          '-o',
          'BatchMode=yes',
          '-p',
          String(sshd.port),
          `${sshd.user}@127.0.0.1`,
          'echo through-the-agent',
        ],
        { cwd: agentHome, env: { HOME: agentHome } },
      );
      t.equal(res.code, 0, res.stderr);
      t.equal(res.stdout, 'through-the-agent\n', 'logged in with the vault key');
      const card = cards()[before];
      t.equal(card?.credential, 'box', 'a card for the key');
      t.equal(card?.process.uid, agentUid, "the card is the agent user's ssh");
      t.equal(card?.process.cmdline[0], 'ssh');
      // Another uid (not in agent_uids, not in the group) cannot connect.
      const outsider = u.name('o');
      u.madeUser(outsider);
      asRoot('useradd', ['--no-create-home', '--shell', '/bin/sh', outsider]);
      u.madeGroup(outsider);
      const other = await setprivAs(outsider, ['ssh-add', '-L'], { env: { SSH_AUTH_SOCK: sshAgentSock } });
      t.not(other.code, 0, 'a user outside the group is not served');
      t.match(other.stderr, /Permission denied|Error connecting to agent/, other.stderr);
    });

    await t.test('MCP (`postern mcp`) as the agent user, with a config naming the agent socket', async (t) => {
      const agentConfig = join(agentHome, 'postern.toml');
      writeFileSync(agentConfig, `[daemon]\nagent_socket = "${agentSock}"\n`, { mode: 0o600 });
      chownSync(agentConfig, agentUid, gidOf(agentUser));
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(
        cleanEnv({ POSTERN_DEBUG: undefined, HOME: agentHome, POSTERN_CONFIG: agentConfig }),
      ))
        if (v !== undefined && k !== 'NODE_OPTIONS') env[k] = v;
      const transport = new StdioClientTransport({
        command: 'setpriv',
        args: [
          `--reuid=${agentUser}`,
          `--regid=${agentUser}`,
          '--init-groups',
          '/usr/bin/env',
          '-u',
          'NODE_OPTIONS',
          NODE,
          CLI,
          'mcp',
        ],
        env,
        stderr: 'pipe',
        cwd: agentHome,
      });
      let stderr = '';
      transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      const client = new Client({ name: 'postern-test', version: '1.0.0' });
      await client.connect(transport);
      t.teardown(() => client.close().catch(() => undefined));
      const before = cards().length;
      const ok = await client.callTool({
        name: 'http_request',
        arguments: { credential: 'api', method: 'GET', url: `https://api.example.test:${up.port}/v1/mcp` },
      });
      t.notOk(ok.isError, `${JSON.stringify(ok)} ${stderr}`);
      t.equal((ok.structuredContent as { status?: number })?.status, 200);
      const card = cards()[before];
      t.equal(card?.process.pid, transport.pid, "the card is the bridge's");
      t.equal(card?.process.uid, agentUid);
      t.equal(card?.process.exe, NOT_READABLE);
      // While the bridge runs, its session is listed for the human.
      const r = runAs(daemonUser, postern('sessions', '--json'));
      t.equal(r.code, 0, r.stderr);
      const sessions = (JSON.parse(r.stdout) as { sessions: Record<string, unknown>[] }).sessions;
      t.equal(sessions.length, 1, r.stdout);
      t.match(sessions[0], { credential: 'api' }, 'the session the approver granted the bridge');
    });

    await t.test('the agent user cannot reach admin.sock, the vault or the journal', async (t) => {
      const probe = String.raw`
const net = require('node:net'); const fs = require('node:fs');
const out = {};
for (const f of ['vault', 'audit.log', 'config.toml']) { try { fs.readFileSync(process.argv[1] + '/' + f); out[f] = 'read'; } catch (e) { out[f] = e.code; } }
const s = net.connect(process.argv[1] + '/admin.sock');
s.on('connect', () => { out.admin = 'connected'; console.log(JSON.stringify(out)); process.exit(0); });
s.on('error', (e) => { out.admin = e.code; console.log(JSON.stringify(out)); process.exit(0); });
`;
      const res = await setprivAs(agentUser, [NODE, '-e', probe, home], { cwd: agentHome });
      t.same(
        JSON.parse(res.stdout),
        { vault: 'EACCES', 'audit.log': 'EACCES', 'config.toml': 'EACCES', admin: 'EACCES' },
        res.stderr,
      );
      // The CLI run by the agent, pointed at the daemon's config: nothing to read.
      const cli = await setprivAs(agentUser, [NODE, CLI, 'status', '--config', join(home, 'config.toml')], {
        cwd: agentHome,
        env: { HOME: agentHome },
      });
      t.equal(cli.code, 1, cli.stderr);
      t.match(cli.stderr, /permission denied|EACCES|not readable/i, cli.stderr);
    });

    await t.test("lock and audit verify as the daemon's user", async (t) => {
      const sessions = (): unknown => JSON.parse(runAs(daemonUser, postern('sessions', '--json')).stdout);
      const deadline = Date.now() + 10_000;
      while (JSON.stringify(sessions()) !== '{"sessions":[]}' && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      t.same(sessions(), { sessions: [] }, 'the bridge exited: its session ended');
      let r = runAs(daemonUser, postern('lock'));
      t.equal(r.code, 0, r.stderr);
      const health = await agentCurl(['http://postern/v1/health']);
      t.same(health.json, { locked: true });
      r = runAs(daemonUser, postern('audit', 'verify', '--pubkey', pubkey ?? ''));
      t.equal(r.code, 0, `audit verify: ${r.stdout} ${r.stderr}`);
    });

    watcher.kill();
    approver.kill();
    daemon.kill('SIGTERM');
    t.equal(await exited(daemon), 0, 'the daemon stops cleanly on SIGTERM');
    t.notOk(existsSync(agentSock), 'and removes its socket');
  },
);
