// Broken networks under SSH (SPEC §6.3, §6.6): the daemon in a network
// namespace with only `lo` up (test/helpers/netns.ts), an SSH credential
// (password auth, the secret a canary) to a name and to a literal for each
// of: ENETUNREACH (a public address, no route), EHOSTUNREACH (an
// `unreachable` route), ECONNREFUSED (a closed loopback port) and a peer
// that closes at once. 20 commands each, then all at once. (Peers that
// misbehave after the handshake begins are test/ssh/failures.test.ts.) Each is 502 upstream_error naming the host, saying what happened and
// what to do next, the command never sent; the same daemon keeps serving
// (health, and HTTP to a good peer), the secret is in no reply, log line or
// journal entry, and `postern audit verify` passes.
import t, { Test } from 'tap';
import { join } from 'node:path';
import { PASSPHRASE, agentRequest, cli } from '../helpers/postern';
import { approveSessions } from '../helpers/admin';
import { makeCanary, journalBytes, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { sshDefinition } from '../helpers/ssh-credential';
import { OfflineNetwork, startOfflineNetwork, unlockedDaemonInNetns } from '../helpers/netns';

const PER_CASE = 20;
const CONCURRENCY = 10;
// Any valid fingerprint: no peer here ever shows a host key.
const HOST_KEY = 'SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU';
const NEXT_STEP = /\b(check|retry)\b/i;

interface Reply {
  status: number;
  text: string;
  json: unknown;
}

async function call(sock: string, method: string, path: string, body?: unknown): Promise<Reply> {
  try {
    return await agentRequest(sock, method, path, body);
  } catch (e) {
    return { status: 0, text: `agent socket: ${String((e as { code?: string }).code ?? e)}`, json: null };
  }
}

async function inTurn<T>(jobs: (() => Promise<T>)[], n: number): Promise<T[]> {
  const out: T[] = new Array<T>(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

t.test('SSH over broken networks: one clear refusal each, the daemon keeps serving', async (t) => {
  const secret = makeCanary('SSHNET');
  const n: OfflineNetwork = await startOfflineNetwork({
    peers: [
      { name: 'ok-http', behaviour: 'echo' },
      { name: 'closed', behaviour: 'closed' },
      { name: 'close', behaviour: 'close' },
    ],
    records: {
      'ok.example.test': { A: ['127.0.0.1'] },
      'offline.example.test': { A: ['8.8.8.8'] },
      'unreachable.example.test': { A: ['1.1.1.1'] },
      'refused.example.test': { A: ['127.0.0.1'] },
      'close.example.test': { A: ['127.0.0.1'] },
    },
    routes: [['unreachable', '1.1.1.0/24']],
  });
  t.teardown(() => n.close());
  const P = n.ports;

  const { h, d, sock, pubkey } = await unlockedDaemonInNetns(
    t,
    n,
    () => `[daemon]\n[http]\ndns_servers = ["127.0.0.1:${n.dnsPort}"]\n[ssh]\ntimeout = "20s"\n`,
  );
  const pid = d.proc.pid!;

  // One credential per target; an HTTP one to show the daemon still serves.
  interface Target {
    name: string;
    host: string;
    port: number;
    says: RegExp;
  }
  const kinds: { kind: string; targets: Target[] }[] = [
    {
      kind: 'ENETUNREACH (no route)',
      targets: [
        { name: 'offline-n', host: 'offline.example.test', port: 22, says: /unreachable \(ENETUNREACH/ },
        { name: 'offline-l', host: '8.8.8.8', port: 22, says: /unreachable \(ENETUNREACH/ },
      ],
    },
    {
      kind: 'EHOSTUNREACH (unreachable route)',
      targets: [
        { name: 'unreach-n', host: 'unreachable.example.test', port: 22, says: /unreachable \(EHOSTUNREACH/ },
        { name: 'unreach-l', host: '1.1.1.1', port: 22, says: /unreachable \(EHOSTUNREACH/ },
      ],
    },
    {
      kind: 'ECONNREFUSED (closed port)',
      targets: [
        { name: 'refused-n', host: 'refused.example.test', port: P['closed']!, says: /refused the SSH connection/ },
        { name: 'refused-l', host: '127.0.0.1', port: P['closed']!, says: /refused the SSH connection/ },
      ],
    },
    {
      kind: 'a peer that closes at once',
      targets: [
        { name: 'close-n', host: 'close.example.test', port: P['close']!, says: /SSH connection to .* failed/ },
        { name: 'close-l', host: '127.0.0.1', port: P['close']!, says: /SSH connection to .* failed/ },
      ],
    },
  ];
  for (const k of kinds) {
    for (const x of k.targets) {
      const def = sshDefinition({
        name: x.name,
        host: x.host,
        port: x.port,
        user: 'deploy',
        auth: 'password',
        hostKey: HOST_KEY,
        commands: ['uptime'],
        allow: ['127.0.0.0/8'],
      });
      const add = cli(h, [
        'cred',
        'add',
        '--file',
        h.file(`${x.name}.toml`, def),
        '--secret-file',
        h.file(`${x.name}.secret`, secret),
        '--passphrase-file',
        h.passFile,
      ]);
      if (add.code !== 0) throw new Error(`cred add ${x.name}: ${add.stderr}`);
    }
  }
  const web = `name = "web"\nkind = "http"\nallow_addresses = ["127.0.0.0/8"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "ok.example.test"\nschemes = ["http"]\nports = [${P['ok-http']}]\n`;
  const addWeb = cli(h, [
    'cred',
    'add',
    '--file',
    h.file('web.toml', web),
    '--secret-file',
    h.file('web.secret', secret),
    '--passphrase-file',
    h.passFile,
  ]);
  if (addWeb.code !== 0) throw new Error(`cred add web: ${addWeb.stderr}`);

  const admin = await approveSessions(join(h.home, 'admin.sock'), PASSPHRASE);
  t.teardown(() => admin.close());

  const texts: string[] = [];
  const run = async (credential: string): Promise<Reply> => {
    const r = await call(sock, 'POST', '/v1/ssh', { credential, command: 'uptime', timeout_ms: 15_000 });
    texts.push(r.text);
    return r;
  };
  const stillServing = async (t: Test, when: string): Promise<void> => {
    t.equal(d.proc.exitCode, null, `${when}: the daemon (pid ${pid}) has not exited`);
    t.equal(d.proc.signalCode, null, `${when}: nor been killed`);
    const health = await call(sock, 'GET', '/v1/health');
    t.same(health.json, { locked: false }, `${when}: /v1/health answers, unlocked`);
    const r = await call(sock, 'POST', '/v1/http', {
      credential: 'web',
      method: 'GET',
      url: `http://ok.example.test:${P['ok-http']}/ok`,
    });
    texts.push(r.text);
    t.match(r.json, { status: 200 }, `${when}: a good HTTP request succeeds: ${r.text.slice(0, 200)}`);
  };
  const expectRefusals = (t: Test, x: Target, replies: Reply[], what: string): void => {
    t.same(
      [...new Set(replies.map((r) => r.status))],
      [502],
      `${what}: every one 502 (first: ${replies[0]!.text.slice(0, 300)})`,
    );
    const errors = replies.map(
      (r) =>
        (
          r.json as {
            error?: { code?: string; message?: string; audit_seq?: unknown; maybe_executed?: unknown };
          } | null
        )?.error,
    );
    t.same([...new Set(errors.map((e) => e?.code))], ['upstream_error'], `${what}: upstream_error`);
    t.ok(
      errors.every((e) => typeof e?.audit_seq === 'number'),
      `${what}: each journaled`,
    );
    t.notOk(
      errors.some((e) => e?.maybe_executed === true),
      `${what}: the command was never sent`,
    );
    for (const m of new Set(errors.map((e) => e?.message ?? ''))) {
      t.ok(m.includes(x.host), `${what}: names the host: ${m}`);
      t.match(m, x.says, `${what}: says what happened: ${m}`);
      t.match(m, /the command was not sent/, `${what}: says nothing was sent: ${m}`);
      t.match(m, NEXT_STEP, `${what}: says what to do next: ${m}`);
    }
  };

  await stillServing(t, 'before the faults');
  for (const k of kinds) {
    await t.test(k.kind, async (t) => {
      for (const x of k.targets) {
        const replies = await inTurn(
          Array.from({ length: PER_CASE }, () => () => run(x.name)),
          CONCURRENCY,
        );
        expectRefusals(t, x, replies, `${k.kind} to ${x.host}`);
      }
      await stillServing(t, `after ${k.kind}`);
    });
  }

  await t.test('all the kinds at once', async (t) => {
    const all = kinds.flatMap((k) => k.targets);
    const jobs = Array.from({ length: 5 }, () => all).flat();
    const replies = await inTurn(
      jobs.map((x) => () => run(x.name)),
      32,
    );
    for (const x of all)
      expectRefusals(
        t,
        x,
        replies.filter((_r, i) => jobs[i] === x),
        `burst: ${x.host}:${x.port}`,
      );
    await stillServing(t, 'after the burst');
  });

  await t.test('the secret is nowhere; the journal verifies', async (t) => {
    t.same(exposures(texts.join('\n'), secret), [], 'no form of the secret in any reply');
    t.same(exposures(d.logs(), secret), [], 'nor in the daemon log');
    t.same(exposures(journalBytes(h.home), secret), [], 'nor in the journal files');
    t.same(exposures(await journalText(h), secret), [], 'nor in the decrypted journal');
    await d.stop();
    const v = cli(h, ['audit', 'verify', '--json', '--pubkey', pubkey]);
    t.equal(v.code, 0, `audit verify passes: ${v.stdout}${v.stderr}`);
  });
});
