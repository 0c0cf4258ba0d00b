// Broken networks against the real daemon (SPEC §6.3: no failure of DNS,
// connect, TLS or protocol ever stops the daemon). The daemon runs in a
// network namespace with only `lo` up (test/helpers/netns.ts), so its
// connects fail with the kernel's real errno and nothing leaves the
// machine: ENETUNREACH (a public address, no route), EHOSTUNREACH (an
// `unreachable` route), ECONNREFUSED (a closed loopback port), a reset
// (RST) while the response head arrives and while its body does, TLS
// alerts (no cipher in common; a client certificate required; over http,
// bytes that are not HTTP), a certificate for another name (over http,
// plain HTTP to that TLS port), and a peer that closes at once. Each over
// http and https, to a name (the namespace's DNS server answers it) and to
// a literal IP (IPv4 and IPv6 for the unreachable kinds), 20 requests each,
// GETs and POSTs with a body; then all of them at once, interleaved. Each
// is 502 upstream_error whose message names the host, says what happened
// and what to do next; `maybe_executed` is true exactly when the request
// may have reached the peer (a failed connect or TLS handshake sent
// nothing). After every kind the same daemon process answers /v1/health
// and serves a good request; at the end the secret is in no reply, log
// line or journal entry, every refusal's outcome is journaled, and
// `postern audit verify` passes pinned to the key `init` printed.
import t, { Test } from 'tap';
import { join } from 'node:path';
import { PASSPHRASE, agentRequest, cli } from '../helpers/postern';
import { makeTestCa } from '../helpers/https-upstream';
import { approveSessions } from '../helpers/admin';
import { makeCanary, journalBytes, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { OfflineNetwork, netnsOf, startOfflineNetwork, unlockedDaemonInNetns } from '../helpers/netns';

const PER_CASE = 20;
const CONCURRENCY = 10;
// Then every kind at once: BURST requests to each target, interleaved.
const BURST = 5;
const BURST_CONCURRENCY = 32;

type Scheme = 'http' | 'https';

interface Reply {
  status: number;
  text: string;
  json: unknown;
}

interface ErrorBody {
  error?: { code?: string; message?: string; audit_seq?: unknown; maybe_executed?: unknown };
}

interface Target {
  form: string; // "name", "literal", "name (IPv6)", "literal (IPv6)"
  host: string; // as written in the URL
  port: number;
}

interface Kind {
  kind: string;
  scheme: Scheme;
  targets: Target[];
  // What the peer may have seen: true when the request was sent (or may
  // have been); false when the connection or the TLS handshake failed first.
  mayHaveRun: boolean;
  // What the message must say happened.
  says: RegExp;
  // What it must not say (advice that would not help).
  mustNotSay?: RegExp;
}

// Words that tell the agent what to do next.
const NEXT_STEP = /\b(check|retry|try again|ask|do not repeat|a human)\b/i;

// A pool of `n` workers over `jobs`.
async function pooled<T>(jobs: (() => Promise<T>)[], n: number): Promise<T[]> {
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

// A request on the agent socket that never throws: a daemon that died shows
// as status 0 with the socket error.
async function call(sock: string, method: string, path: string, body?: unknown): Promise<Reply> {
  try {
    return await agentRequest(sock, method, path, body);
  } catch (e) {
    return { status: 0, text: `agent socket: ${String((e as { code?: string }).code ?? e)}`, json: null };
  }
}

function histogram(values: unknown[]): Record<string, number> {
  const h: Record<string, number> = {};
  for (const v of values) h[String(v)] = (h[String(v)] ?? 0) + 1;
  return h;
}

t.test('broken networks: one clear refusal each, the daemon keeps serving', async (t) => {
  const secret = makeCanary('NETFAULT');
  const ca = makeTestCa(['*.example.test', '127.0.0.1']);
  const other = makeTestCa(['elsewhere.example.org']); // trusted, but for another name
  t.teardown(() => (ca.cleanup(), other.cleanup()));
  const good = { key: ca.key, cert: ca.cert };
  const loop = { A: ['127.0.0.1'] };

  const n: OfflineNetwork = await startOfflineNetwork({
    peers: [
      { name: 'ok-http', behaviour: 'echo' },
      { name: 'ok-https', behaviour: 'echo', tls: good },
      { name: 'closed', behaviour: 'closed' },
      { name: 'reset-headers-http', behaviour: 'reset-headers' },
      { name: 'reset-headers-https', behaviour: 'reset-headers', tls: good },
      { name: 'reset-body-http', behaviour: 'reset-body' },
      { name: 'reset-body-https', behaviour: 'reset-body', tls: good },
      { name: 'garbage', behaviour: 'garbage' },
      // TLS 1.3 with only a suite Node's client does not offer: the server
      // answers the ClientHello with a handshake_failure alert.
      {
        name: 'alert',
        behaviour: 'echo',
        tls: { ...good, minVersion: 'TLSv1.3', ciphers: 'TLS_AES_128_CCM_8_SHA256' },
      },
      // TLS 1.3: the client's handshake ends first; the server then asks for
      // a certificate the client does not have and answers certificate_required.
      { name: 'client-cert', behaviour: 'echo', tls: { ...good, requestCert: true } },
      { name: 'mismatch', behaviour: 'echo', tls: { key: other.key, cert: other.cert } },
      { name: 'close', behaviour: 'close' },
    ],
    records: {
      'ok.example.test': loop,
      'offline.example.test': { A: ['8.8.8.8'] },
      'offline6.example.test': { AAAA: ['2001:4860:4860::8888'] },
      'unreachable.example.test': { A: ['1.1.1.1'] },
      'unreachable6.example.test': { AAAA: ['2606:4700::1111'] },
      'refused.example.test': loop,
      'reset-headers.example.test': loop,
      'reset-body.example.test': loop,
      'alert.example.test': loop,
      'garbage.example.test': loop,
      'mismatch.example.test': loop,
      'client-cert.example.test': loop,
      'close.example.test': loop,
    },
    routes: [
      ['unreachable', '1.1.1.0/24'],
      ['unreachable', '2606:4700::/32'],
    ],
  });
  t.teardown(() => n.close());
  const P = n.ports;

  await t.test('the namespace gives the real errno for each unreachable kind', async (t) => {
    t.equal(await n.probe('8.8.8.8', 443), 'ENETUNREACH');
    t.equal(await n.probe('2001:4860:4860::8888', 443), 'ENETUNREACH');
    t.equal(await n.probe('1.1.1.1', 443), 'EHOSTUNREACH');
    t.equal(await n.probe('2606:4700::1111', 443), 'EHOSTUNREACH');
    t.equal(await n.probe('127.0.0.1', P['closed']!), 'ECONNREFUSED');
    t.equal(await n.probe('127.0.0.1', P['ok-https']!), 'connected');
  });

  const { h, d, sock, pubkey } = await unlockedDaemonInNetns(
    t,
    n,
    (h) =>
      `[daemon]\n[http]\ndns_servers = ["127.0.0.1:${n.dnsPort}"]\nca_file = "${h.file('ca.pem', ca.caCert + other.caCert)}"\ntimeout = "20s"\n`,
  );
  const pid = d.proc.pid!;
  t.equal(netnsOf(pid), netnsOf(n.pid), 'the daemon is in the namespace');
  t.not(netnsOf(pid), netnsOf('self'), "the namespace is not the test's");

  const loopPorts = Object.values(P);
  const rule = (host: string, ports: number[]): string =>
    `[[allow]]\nhost = "${host}"\nschemes = ["http", "https"]\nports = [${ports.join(', ')}]\nmethods = ["GET", "POST"]\n`;
  const far = [
    'offline.example.test',
    '8.8.8.8',
    'offline6.example.test',
    '[2001:4860:4860::8888]',
    'unreachable.example.test',
    '1.1.1.1',
    'unreachable6.example.test',
    '[2606:4700::1111]',
  ];
  const near = [
    '127.0.0.1',
    ...['ok', 'refused', 'reset-headers', 'reset-body', 'alert', 'client-cert', 'garbage', 'mismatch', 'close'].map(
      (k) => `${k}.example.test`,
    ),
  ];
  const definition =
    `name = "net"\nkind = "http"\nallow_addresses = ["127.0.0.0/8"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
    far.map((host) => rule(host, [80, 443])).join('') +
    near.map((host) => rule(host, loopPorts)).join('');
  const add = cli(h, [
    'cred',
    'add',
    '--file',
    h.file('net.toml', definition),
    '--secret-file',
    h.file('net.secret', secret),
    '--passphrase-file',
    h.passFile,
  ]);
  if (add.code !== 0) throw new Error(`cred add: ${add.stderr}`);

  const admin = await approveSessions(join(h.home, 'admin.sock'), PASSPHRASE);
  t.teardown(() => admin.close());

  const texts: string[] = [];
  const refusals: { what: string; seq: unknown; maybe: unknown }[] = [];
  const send = async (scheme: Scheme, host: string, port: number, path: string, i: number): Promise<Reply> => {
    const url = `${scheme}://${host}:${port}${path}`;
    const body =
      i % 2 === 0
        ? { credential: 'net', method: 'GET', url, timeout_ms: 10_000 }
        : { credential: 'net', method: 'POST', url, body: `payload ${i}`, timeout_ms: 10_000 };
    const r = await call(sock, 'POST', '/v1/http', body);
    texts.push(r.text);
    return r;
  };

  let toldDeath = false;
  // The daemon still serves: same process, health, a good request by name
  // and by literal over both schemes.
  const stillServing = async (t: Test, when: string, all = false): Promise<void> => {
    t.equal(d.proc.exitCode, null, `${when}: the daemon process (pid ${pid}) has not exited`);
    t.equal(d.proc.signalCode, null, `${when}: nor been killed`);
    if ((d.proc.exitCode !== null || d.proc.signalCode !== null) && !toldDeath) {
      toldDeath = true;
      t.comment(`the daemon ended; its last words:\n${d.logs().slice(-3000)}`);
    }
    const health = await call(sock, 'GET', '/v1/health');
    t.equal(health.status, 200, `${when}: /v1/health ${health.text}`);
    t.same(health.json, { locked: false }, `${when}: still unlocked`);
    const checks: [Scheme, string][] = all
      ? [
          ['https', 'ok.example.test'],
          ['https', '127.0.0.1'],
          ['http', 'ok.example.test'],
          ['http', '127.0.0.1'],
        ]
      : [['https', 'ok.example.test']];
    for (const [scheme, host] of checks) {
      const r = await send(scheme, host, P[`ok-${scheme}`]!, '/ok', 1);
      t.equal(r.status, 200, `${when}: a good ${scheme} request to ${host} succeeds: ${r.text.slice(0, 300)}`);
      t.match(
        r.json,
        { status: 200, body: /"peer":"ok-https?","method":"POST","url":"\/ok","authorized":true/ },
        `${when}: it reached the peer with the credential`,
      );
    }
  };

  await stillServing(t, 'before the faults', true);

  const loopback = (port: number): Target[] => [
    { form: 'literal', host: '127.0.0.1', port },
    { form: 'name', host: '', port }, // the kind's name, filled in below
  ];
  const far4 = (name: string, v4: string, v6name: string, v6: string, port: number): Target[] => [
    { form: 'name', host: name, port },
    { form: 'literal', host: v4, port },
    { form: 'name (IPv6)', host: v6name, port },
    { form: 'literal (IPv6)', host: v6, port },
  ];
  const named = (name: string, targets: Target[]): Target[] =>
    targets.map((x) => (x.host === '' ? { ...x, host: `${name}.example.test` } : x));

  const kinds: Kind[] = [];
  for (const scheme of ['http', 'https'] as const) {
    const std = scheme === 'http' ? 80 : 443;
    kinds.push(
      {
        kind: 'ENETUNREACH (no route)',
        scheme,
        targets: far4('offline.example.test', '8.8.8.8', 'offline6.example.test', '[2001:4860:4860::8888]', std),
        mayHaveRun: false,
        says: /unreach|no route/i,
      },
      {
        kind: 'EHOSTUNREACH (unreachable route)',
        scheme,
        targets: far4('unreachable.example.test', '1.1.1.1', 'unreachable6.example.test', '[2606:4700::1111]', std),
        mayHaveRun: false,
        says: /unreach|no route/i,
      },
      {
        kind: 'ECONNREFUSED (closed port)',
        scheme,
        targets: named('refused', loopback(P['closed']!)),
        mayHaveRun: false,
        says: /refused/i,
      },
      {
        kind: 'ECONNRESET during the response head',
        scheme,
        targets: named('reset-headers', loopback(P[`reset-headers-${scheme}`]!)),
        mayHaveRun: true,
        says: /reset/i,
      },
      {
        kind: 'ECONNRESET during the body',
        scheme,
        targets: named('reset-body', loopback(P[`reset-body-${scheme}`]!)),
        mayHaveRun: true,
        says: /reset/i,
      },
      {
        kind: 'a server that closes at once',
        scheme,
        targets: named('close', loopback(P['close']!)),
        mayHaveRun: scheme === 'http',
        says: /clos|reset/i,
      },
    );
  }
  kinds.push(
    {
      kind: 'a TLS alert (no cipher in common)',
      scheme: 'https',
      targets: named('alert', loopback(P['alert']!)),
      mayHaveRun: false,
      says: /TLS|handshake|alert/i,
      mustNotSay: /ca_file|not trusted/i,
    },
    {
      kind: 'bytes that are not HTTP (a garbage server)',
      scheme: 'http',
      targets: named('garbage', loopback(P['garbage']!)),
      mayHaveRun: true,
      says: /invalid HTTP|not HTTP|protocol/i,
    },
    // In TLS 1.3 the client's side of the handshake ends before the server
    // judges it: the request is already written when the alert comes, and
    // undici reports only "other side closed", so postern cannot know the
    // peer refused it unread. "May have executed" is the honest answer.
    {
      kind: 'a TLS alert after the handshake (client certificate required)',
      scheme: 'https',
      targets: named('client-cert', loopback(P['client-cert']!)),
      mayHaveRun: true,
      says: /reset|clos|TLS|alert|certificate/i,
      mustNotSay: /ca_file/i,
    },
    // The certificate is signed by a CA in ca_file: adding a CA cannot help.
    {
      kind: 'a certificate for another name',
      scheme: 'https',
      targets: named('mismatch', loopback(P['mismatch']!)),
      mayHaveRun: false,
      says: /certificate|name/i,
      mustNotSay: /ca_file/i,
    },
    {
      kind: 'plain HTTP to a TLS port',
      scheme: 'http',
      targets: named('mismatch', loopback(P['mismatch']!)),
      mayHaveRun: true,
      says: /reset|clos|invalid HTTP|TLS/i,
    },
  );

  // The replies to `count` requests of kind `k` to `target`: each a 502
  // upstream_error journaled, with a message that names the host, says what
  // happened and what to do next, and maybe_executed as the kind implies.
  const expectRefusals = (t: Test, k: Kind, target: Target, replies: Reply[], what: string): void => {
    const count = replies.length;
    const errors = replies.map((r) => (r.json as ErrorBody | null)?.error);
    t.same(
      histogram(replies.map((r) => r.status)),
      { 502: count },
      `${what}: ${count} × 502 (first: ${replies[0]!.text.slice(0, 300)})`,
    );
    t.same(histogram(errors.map((e) => e?.code)), { upstream_error: count }, `${what}: upstream_error`);
    t.ok(
      errors.every((e) => typeof e?.audit_seq === 'number'),
      `${what}: every refusal has its audit_seq`,
    );
    const bare = target.host.replace(/^\[|\]$/g, '');
    for (const m of new Set(errors.map((e) => e?.message ?? ''))) {
      t.ok(m.includes(bare), `${what}: the message names the host: ${m}`);
      t.match(m.split(bare).join('<host>'), k.says, `${what}: the message says what happened: ${m}`);
      t.match(m, NEXT_STEP, `${what}: the message says what to do next: ${m}`);
      if (k.mustNotSay) t.notMatch(m, k.mustNotSay, `${what}: the message gives no advice that cannot help: ${m}`);
    }
    if (k.mayHaveRun)
      t.same(histogram(errors.map((e) => e?.maybe_executed)), { true: count }, `${what}: maybe_executed: true`);
    else
      t.notOk(
        errors.some((e) => e?.maybe_executed === true),
        `${what}: not maybe_executed, nothing was sent (got ${JSON.stringify(histogram(errors.map((e) => e?.maybe_executed)))})`,
      );
    for (const e of errors) if (e) refusals.push({ what, seq: e.audit_seq, maybe: e.maybe_executed });
  };

  for (const k of kinds) {
    await t.test(`${k.kind} over ${k.scheme}`, async (t) => {
      for (const target of k.targets) {
        const replies = await pooled(
          Array.from({ length: PER_CASE }, (_x, i) => () => send(k.scheme, target.host, target.port, `/fault/${i}`, i)),
          CONCURRENCY,
        );
        expectRefusals(t, k, target, replies, `${k.kind} over ${k.scheme} to the ${target.form} ${target.host}`);
      }
      await stillServing(t, `after ${k.kind} over ${k.scheme}`);
    });
  }

  await t.test('all the kinds at once, interleaved', async (t) => {
    const jobs = kinds.flatMap((k) =>
      k.targets.flatMap((target) => Array.from({ length: BURST }, (_x, i) => ({ k, target, i }))),
    );
    // Interleave: the j-th request of every target before the (j+1)-th of any.
    jobs.sort((a, b) => a.i - b.i);
    const replies = await pooled(
      jobs.map((j) => () => send(j.k.scheme, j.target.host, j.target.port, `/burst/${j.i}`, j.i)),
      BURST_CONCURRENCY,
    );
    for (const k of kinds) {
      for (const target of k.targets) {
        const mine = replies.filter((_r, idx) => jobs[idx]!.k === k && jobs[idx]!.target === target);
        expectRefusals(t, k, target, mine, `burst: ${k.kind} over ${k.scheme} to the ${target.form} ${target.host}`);
      }
    }
    await stillServing(t, 'after the burst');
  });

  await t.test('the peers saw what each kind implies', async (t) => {
    const st = await n.stats();
    for (const name of [
      'reset-headers-http',
      'reset-headers-https',
      'reset-body-http',
      'reset-body-https',
      'garbage',
    ]) {
      t.equal(st[name]?.requests, 2 * (PER_CASE + BURST), `${name} read every request sent to it`);
    }
    t.ok(
      (st['close']?.connections ?? 0) >= 4 * (PER_CASE + BURST),
      `the closing peer accepted each connection (${st['close']?.connections})`,
    );
    t.equal(st['alert']?.requests, 0, 'the TLS alert peer never read a request');
    t.equal(st['client-cert']?.requests, 0, 'the peer requiring a client certificate never read a request');
    t.equal(st['mismatch']?.requests, 0, 'the peer with a certificate for another name never read a request');
  });

  await t.test('the same daemon serves after all of them', async (t) => {
    await stillServing(t, 'after every fault', true);
    t.equal(netnsOf(pid), netnsOf(n.pid), 'the same process, still in the namespace');
  });

  await t.test('every refusal is journaled; the secret is nowhere; the journal verifies', async (t) => {
    const expected = kinds.reduce((sum, k) => sum + k.targets.length * (PER_CASE + BURST), 0);
    t.equal(refusals.length, expected, `${expected} refusals collected`);
    const journal = await journalText(h);
    const entries = new Map<unknown, Record<string, unknown>>();
    for (const line of journal.trim().split('\n')) {
      const e = JSON.parse(line) as Record<string, unknown>;
      entries.set(e['seq'], e);
    }
    const wrong = refusals.filter((f) => {
      const out = entries.get(f.seq);
      return (
        out?.['kind'] !== 'http_outcome' ||
        out['error'] !== 'upstream_error' ||
        (out['maybe_executed'] ?? null) !== (f.maybe ?? null) ||
        entries.get(out['intent_seq'])?.['kind'] !== 'http_intent'
      );
    });
    t.same(
      wrong.slice(0, 3).map((f) => ({ what: f.what, entry: entries.get(f.seq) })),
      [],
      "each refusal's audit_seq is its outcome (upstream_error, the same maybe_executed), after its intent",
    );
    t.same(exposures(texts.join('\n'), secret), [], 'no form of the secret in any reply');
    t.same(exposures(d.logs(), secret), [], 'nor in the daemon log');
    t.same(exposures(journalBytes(h.home), secret), [], 'nor in the journal files');
    t.same(exposures(journal, secret), [], 'nor in the decrypted journal entries');
    t.equal(await d.stop(), 0, 'the daemon stops cleanly');
    const v = cli(h, ['audit', 'verify', '--json', '--pubkey', pubkey]);
    t.equal(v.code, 0, `audit verify: ${v.stdout}${v.stderr}`);
  });
});
