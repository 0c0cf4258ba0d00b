// DNS over broken networks (SPEC §6.2, §6.3): the daemon in a network
// namespace with only `lo` up (test/helpers/netns.ts), its DNS servers
// unreachable: a public server (no route: ENETUNREACH), one behind an
// `unreachable` route (EHOSTUNREACH), IPv6, and a closed loopback port; then
// the system's servers from /etc/resolv.conf, which the namespace cannot
// reach either. HTTP and SSH requests to names are each 502 dns_error
// naming the host and what to check, nothing is sent, the same daemon keeps
// serving (health, and a request to an IP literal), the secret is nowhere,
// and `postern audit verify` passes.
import t, { Test } from 'tap';
import { join } from 'node:path';
import { PASSPHRASE, agentRequest, cli } from '../helpers/postern';
import { approveSessions } from '../helpers/admin';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { sshDefinition } from '../helpers/ssh-credential';
import { OfflineNetwork, startOfflineNetwork, unlockedDaemonInNetns } from '../helpers/netns';

const PER_CASE = 20;
const HOST_KEY = 'SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU';

interface Reply {
  status: number;
  text: string;
  json: unknown;
}

async function call(sock: string, path: string, body?: unknown): Promise<Reply> {
  try {
    return await agentRequest(sock, body === undefined ? 'GET' : 'POST', path, body);
  } catch (e) {
    return { status: 0, text: `agent socket: ${String((e as { code?: string }).code ?? e)}`, json: null };
  }
}

t.test('unreachable DNS servers: dns_error, and the daemon keeps serving', async (t) => {
  const n: OfflineNetwork = await startOfflineNetwork({
    peers: [
      { name: 'ok-http', behaviour: 'echo' },
      { name: 'closed', behaviour: 'closed' },
    ],
    records: {},
    routes: [['unreachable', '1.1.1.0/24']],
  });
  t.teardown(() => n.close());
  const P = n.ports;
  const secret = makeCanary('DNSNET');

  const servers = [
    [
      'configured servers unreachable (no route, unreachable route, IPv6, closed port)',
      `["8.8.8.8:53", "1.1.1.1:53", "[2001:4860:4860::8888]:53", "127.0.0.1:${P['closed']}"]`,
    ],
    ["the system's servers (/etc/resolv.conf), unreachable from the namespace", '[]'],
  ] as const;
  for (const [what, list] of servers) {
    await t.test(what, async (t) => {
      const { h, d, sock, pubkey } = await unlockedDaemonInNetns(
        t,
        n,
        () => `[daemon]\n[http]\ndns_servers = ${list}\ntimeout = "20s"\n`,
      );
      const http = `name = "web"\nkind = "http"\nallow_addresses = ["127.0.0.0/8"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\n[[allow]]\nhost = "127.0.0.1"\nschemes = ["http"]\nports = [${P['ok-http']}]\n`;
      const ssh = sshDefinition({
        name: 'box',
        host: 'box.example.test',
        port: 22,
        user: 'deploy',
        auth: 'password',
        hostKey: HOST_KEY,
        commands: ['uptime'],
      });
      for (const [name, def] of [
        ['web', http],
        ['box', ssh],
      ] as const) {
        const add = cli(h, [
          'cred',
          'add',
          '--file',
          h.file(`${name}.toml`, def),
          '--secret-file',
          h.file(`${name}.secret`, secret),
          '--passphrase-file',
          h.passFile,
        ]);
        if (add.code !== 0) throw new Error(`cred add ${name}: ${add.stderr}`);
      }
      const admin = await approveSessions(join(h.home, 'admin.sock'), PASSPHRASE);
      t.teardown(() => admin.close());

      const texts: string[] = [];
      const expectDnsErrors = async (
        t: Test,
        path: string,
        body: Record<string, unknown>,
        host: string,
      ): Promise<void> => {
        const started = Date.now();
        const replies = await Promise.all(Array.from({ length: PER_CASE }, () => call(sock, path, body)));
        texts.push(...replies.map((r) => r.text));
        t.same(
          [...new Set(replies.map((r) => r.status))],
          [502],
          `${path}: every one 502 (first: ${replies[0]!.text.slice(0, 300)})`,
        );
        const errors = replies.map(
          (r) =>
            (
              r.json as {
                error?: { code?: string; message?: string; audit_seq?: unknown; maybe_executed?: unknown };
              } | null
            )?.error,
        );
        t.same([...new Set(errors.map((e) => e?.code))], ['dns_error'], `${path}: dns_error`);
        t.ok(
          errors.every((e) => typeof e?.audit_seq === 'number'),
          `${path}: each journaled`,
        );
        t.notOk(
          errors.some((e) => e?.maybe_executed === true),
          `${path}: nothing was sent`,
        );
        for (const m of new Set(errors.map((e) => e?.message ?? ''))) {
          t.ok(m.includes(host), `${path}: names the host: ${m}`);
          t.match(m, /\b(check|retry)\b/i, `${path}: says what to do next: ${m}`);
        }
        t.ok(
          Date.now() - started < 15_000,
          `${path}: answered within the resolver's time (${Date.now() - started} ms)`,
        );
      };
      const stillServing = async (t: Test): Promise<void> => {
        t.equal(d.proc.exitCode, null, 'the daemon has not exited');
        t.equal(d.proc.signalCode, null, 'nor been killed');
        t.same((await call(sock, '/v1/health')).json, { locked: false }, '/v1/health answers, unlocked');
        const r = await call(sock, '/v1/http', {
          credential: 'web',
          method: 'GET',
          url: `http://127.0.0.1:${P['ok-http']}/ok`,
        });
        texts.push(r.text);
        t.match(r.json, { status: 200 }, `a request to a literal still succeeds: ${r.text.slice(0, 200)}`);
      };

      await stillServing(t);
      await expectDnsErrors(
        t,
        '/v1/http',
        { credential: 'web', method: 'GET', url: 'https://api.example.test/x' },
        'api.example.test',
      );
      await expectDnsErrors(t, '/v1/ssh', { credential: 'box', command: 'uptime' }, 'box.example.test');
      await stillServing(t);

      t.same(exposures(texts.join('\n'), secret), [], 'no form of the secret in any reply');
      t.same(exposures(d.logs(), secret), [], 'nor in the daemon log');
      t.same(exposures(await journalText(h), secret), [], 'nor in the decrypted journal');
      await d.stop();
      const v = cli(h, ['audit', 'verify', '--json', '--pubkey', pubkey]);
      t.equal(v.code, 0, `audit verify passes: ${v.stdout}${v.stderr}`);
    });
  }
});
