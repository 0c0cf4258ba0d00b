// A card as the human sees it: the concrete action, the process chain with
// every string escaped, deleted/memfd executables marked, the keys offered.
import t from 'tap';
import { renderCard } from '../../cli/approver/render';
import { readCard, Card, CardProcess } from '../../cli/approver/card';
import { DELETED_MARK, MEMFD_MARK } from '../../cli/approver/escape';

const RAW_DANGER = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

function proc(pid: number, over: Partial<CardProcess> = {}): CardProcess {
  return {
    key: `${pid}:100:2049:${pid * 7}`,
    pid,
    uid: 1000,
    exe: '/usr/bin/node',
    exe_deleted: false,
    exe_memfd: false,
    cwd: '/home/dev/app',
    cmdline: ['node', 'agent.js'],
    ...over,
  };
}

function card(over: Partial<Card> = {}): Card {
  return {
    id: 'a1b2c3d4e5f6',
    credential: 'github',
    approve: 'session',
    created_at: '2026-01-01T10:00:00.000Z',
    expires_at: '2026-01-01T10:02:00.000Z',
    process: proc(4242, { exe: '/usr/bin/curl', cmdline: ['curl', '-s', 'https://api.github.com/x'] }),
    ancestors: [proc(4200), proc(4100, { exe: '/usr/bin/bash', cmdline: ['bash'] })],
    action: {
      kind: 'http',
      method: 'POST',
      scheme: 'https',
      host: 'api.github.com',
      address: '140.82.112.6',
      port: 443,
      path: '/repos/acme/app/issues',
      query: '?page=2',
      body_bytes: 13,
      body_sha256: 'ab'.repeat(32),
    },
    ...over,
  };
}

const text = (c: Card, waiting = 0): string => renderCard(c, { waiting }).join('\n');

t.test('an HTTP card: credential, mode, the concrete action, the chain, the keys', async (t) => {
  const out = text(card(), 2);
  t.match(out, /^Approval request a1b2c3d4e5f6 {3}\(2 more waiting\)$/m);
  t.match(out, /^ {2}credential +github$/m);
  t.match(out, /^ {2}approve +session/m);
  t.match(out, /^ {4}method +POST$/m);
  t.match(out, /^ {4}scheme +https$/m);
  t.match(out, /^ {4}host +api\.github\.com$/m);
  t.match(out, /^ {4}address +140\.82\.112\.6 {2}\(checked/m);
  t.match(out, /^ {4}port +443$/m);
  t.match(out, /^ {4}path +\/repos\/acme\/app\/issues$/m);
  t.match(out, /^ {4}query +\?page=2$/m);
  t.match(out, /^ {4}body size +13 bytes$/m);
  t.match(out, new RegExp(`^ {4}body sha256 +${'ab'.repeat(32)}$`, 'm'));
  // Requester first, then ancestors, each with its key.
  const req = out.indexOf('[s] requester');
  const a1 = out.indexOf('[1] ancestor 1');
  const a2 = out.indexOf('[2] ancestor 2');
  t.ok(req > 0 && a1 > req && a2 > a1, 'requester, then ancestor 1, then ancestor 2');
  t.match(out, /\[s\] requester +pid 4242 {2}uid 1000 {2}exe \/usr\/bin\/curl$/m);
  t.match(out, /^ +argv +"curl" "-s" "https:\/\/api\.github\.com\/x"$/m);
  t.match(out, /^ +cwd +\/home\/dev\/app$/m);
  // Ancestors take one line each.
  t.match(
    out,
    /^ {2}\[1\] ancestor 1 +pid 4200 {2}uid 1000 {2}exe \/usr\/bin\/node {2}cwd \/home\/dev\/app {2}argv "node" "agent\.js"$/m,
  );
  t.match(
    out,
    /^ {2}\[2\] ancestor 2 +pid 4100 {2}uid 1000 {2}exe \/usr\/bin\/bash {2}cwd \/home\/dev\/app {2}argv "bash"$/m,
  );
  t.match(out, /^ {2}d {2}deny {6}o {2}allow once {6}q {2}quit the approver/m);
  t.match(
    out,
    /^ {2}s {2}session rooted at the requester \(pid 4242\) {6}1…2 {2}session rooted at that ancestor \(marked \[1\]…\[2\] above\)$/m,
  );
  const one = text(card({ ancestors: [proc(4200)] }));
  t.match(
    one,
    /^ {2}s {2}session rooted at the requester \(pid 4242\) {6}1 {2}session rooted at ancestor 1 \(pid 4200\)$/m,
    'a single ancestor is named',
  );
  t.notMatch(text(card()), /more waiting/, 'no count when nothing else waits');
});

t.test('each-use: only deny and allow once are offered', async (t) => {
  const out = text(card({ approve: 'each-use' }));
  t.match(out, /approve +each-use/);
  t.match(out, /^ {2}d {2}deny {6}o {2}allow once/m);
  t.match(out, /^ {2}\(each-use: no session can be approved for this credential\)$/m);
  t.notMatch(out, /session rooted/, 'no session keys');
  t.notMatch(out, /\[s\]|\[1\]/, 'no key marks on the chain');
});

t.test('a hostile process and request are escaped, flagged, and cannot drive the terminal', async (t) => {
  const hostile = card({
    credential: 'git\x1b[8mhub',
    process: proc(666, {
      exe: '/tmp/\u202egnp.sh',
      cwd: '/tmp/\x1b]0;owned\x07',
      cmdline: ['sh', '-c', 'curl evil\x1b[2J\x1b[H', 'ad\u200dmin', 'x\u2066y'],
    }),
    action: {
      kind: 'http',
      method: 'GET',
      scheme: 'https',
      host: 'xn--pple-43d.com',
      address: '1.2.3.4',
      port: 443,
      path: '/a',
      query: '?q=\u202e',
      body_bytes: 0,
      body_sha256: null,
      surprise: 'extra\x1b[2Jfield',
    },
  });
  const lines = renderCard(hostile);
  for (const l of lines) t.notOk(RAW_DANGER.test(l), `no raw control/format character in: ${JSON.stringify(l)}`);
  const out = lines.join('\n');
  t.match(out, /argv +"sh" "-c" "curl evil\\x1b\[2J\\x1b\[H" "ad\\u\{200D\}min" "x\\u\{2066\}y"/);
  t.match(out, /exe \/tmp\/\\u\{202E\}gnp\.sh/);
  t.match(out, /cwd +\/tmp\/\\x1b\]0;owned\\x07/);
  t.match(out, /credential +git\\x1b\[8mhub/);
  t.match(out, /pid 666 .*holds escaped characters: read carefully/);
  t.match(out, /host +xn--pple-43d\.com {2}\(internationalised name; in Unicode: аpple\.com\)/);
  t.match(out, /query +\?q=\\u\{202E\} {2}<- holds escaped characters/);
  t.match(out, /body sha256 +\(none\)/);
  t.match(out, /surprise +extra\\x1b\[2Jfield/, 'a field the approver does not know is still shown, escaped');
});

t.test('a Unicode host is shown with its punycode', async (t) => {
  const out = text(
    card({
      action: {
        kind: 'http',
        method: 'GET',
        scheme: 'https',
        host: 'аpple.com',
        address: '1.2.3.4',
        port: 443,
        path: '/',
        query: '',
      },
    }),
  );
  t.match(out, /host +аpple\.com {2}\(punycode: xn--pple-43d\.com\)/);
  t.match(out, /query +\(none\)/);
  t.match(out, /body size +\(not given by the daemon\)/, 'a missing field says so');
});

t.test('deleted and memfd executables are marked on the chain', async (t) => {
  const out = text(
    card({
      process: proc(10, { exe: '/memfd:x (deleted)', exe_memfd: true, exe_deleted: true }),
      ancestors: [proc(9, { exe: '/tmp/agent (deleted)', exe_deleted: true })],
    }),
  );
  t.match(
    out,
    new RegExp(
      `\\[s\\] requester +pid 10 .*exe /memfd:x \\(deleted\\) {2}${escapeRe(MEMFD_MARK)} {2}${escapeRe(DELETED_MARK)}`,
    ),
  );
  t.match(out, new RegExp(`\\[1\\] ancestor 1 +pid 9 .*exe /tmp/agent \\(deleted\\) {2}${escapeRe(DELETED_MARK)}`));
  t.notMatch(text(card()), /DELETED|MEMFD/, 'an ordinary executable carries no mark');
});

t.test('an SSH card shows host, address, port, user and command', async (t) => {
  const out = text(
    card({
      action: {
        kind: 'ssh',
        host: 'build.example.com',
        address: '10.0.0.5',
        port: 22,
        user: 'deploy',
        command: 'git -C /srv/app pull',
      },
    }),
  );
  t.match(out, /SSH command/);
  t.match(out, /host +build\.example\.com/);
  t.match(out, /address +10\.0\.0\.5/);
  t.match(out, /port +22$/m);
  t.match(out, /user +deploy$/m);
  t.match(out, /command +git -C \/srv\/app pull$/m);
});

t.test('an ssh-agent card says the client chooses what runs, and shows host, host key, user and key', async (t) => {
  const out = text(
    card({
      action: {
        kind: 'ssh-agent',
        host: 'git.example.com',
        port: 22,
        host_key: 'SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU',
        user: 'git',
        algorithm: 'ssh-ed25519',
      },
    }),
  );
  t.match(out, /SSH login through the ssh-agent \(the client chooses what runs once logged in\)/);
  t.match(out, /host +git\.example\.com/);
  t.match(out, /host key +SHA256:\+DiY3wvvV6TuJJhbpZisF\/zLDA0zPMSvHdkr4UvCOqU$/m);
  t.match(out, /user +git$/m);
  t.match(out, /key +ssh-ed25519$/m);
});

t.test("a computed credential's card says how the secret is used and where a token comes from", async (t) => {
  const http = (extra: Record<string, unknown>) =>
    text(
      card({
        action: {
          kind: 'http',
          method: 'GET',
          scheme: 'https',
          host: 'api.example.com',
          address: '1.2.3.4',
          port: 443,
          path: '/',
          query: '',
          body_bytes: 0,
          body_sha256: null,
          ...extra,
        },
      }),
    );
  t.match(http({ computed: 'aws_sigv4' }), /credential +AWS Signature V4: postern signs the request$/m);
  const oauth = http({ computed: 'oauth2', token_endpoint: 'https://auth.example.com/token' });
  t.match(oauth, /credential +OAuth 2\.0: postern obtains an access token$/m);
  t.match(oauth, /token from +https:\/\/auth\.example\.com\/token$/m);
  t.match(
    http({ computed: 'github_app', token_endpoint: 'https://api.github.com/app/installations/1/access_tokens' }),
    /GitHub App: postern obtains an installation token/,
  );
  t.notMatch(http({}), /token from|credential +AWS/, 'an ordinary credential shows neither');
});

t.test('many arguments and ancestors beyond the keys', async (t) => {
  const many = Array.from({ length: 100 }, (_, i) => `a${i}`);
  const ancestors = Array.from({ length: 11 }, (_, i) => proc(100 + i));
  const out = text(card({ process: proc(5, { cmdline: many }), ancestors }));
  t.match(out, /"a63" … \[36 more arguments not shown\]/);
  t.match(out, /\[9\] ancestor 9 /);
  t.match(out, /1…9 {2}session rooted at that ancestor \(marked \[1\]…\[9\] above\)$/m);
  t.notMatch(out, /ancestor 10 +pid/, 'ancestors past the keys get no line of their own');
  t.match(
    out,
    /^ {6}… 2 more ancestors up to pid 110 \(exe \/usr\/bin\/node\); no session can be rooted there from this card$/m,
    'they are summed up in one line',
  );
  t.notMatch(out, /^ {2}10 {2}/m);
  const hostile = [...ancestors.slice(0, 10), proc(110, { cmdline: ['x\u202ey'] })];
  t.match(
    text(card({ ancestors: hostile })),
    /^ {6}… 2 more ancestors .*<- holds escaped characters: read carefully$/m,
    'a hidden character among them is still flagged',
  );
});

t.test('in a terminal of known width, a deep chain of long command lines still fits', async (t) => {
  const long = (pid: number, extra: string[] = []): CardProcess =>
    proc(pid, {
      cmdline: [
        'node',
        ...Array.from({ length: 60 }, (_, i) => `--import=file:///very/long/path/number/${i}.mjs`),
        ...extra,
      ],
    });
  const ancestors = Array.from({ length: 40 }, (_, i) => long(300 + i, i === 2 ? ['zero\u200dwidth'] : []));
  const columns = 200;
  const lines = renderCard(card({ ancestors }), { columns });
  const chain = lines.filter((l) => /ancestor \d+ +pid/.test(l));
  t.equal(chain.length, 9, 'nine ancestor lines');
  for (const l of chain) t.ok([...l].length < columns, `one row each: ${l.length}`);
  t.match(chain[0]!, / … \[\+\d+ chars\]$/, 'the cut is said, with its size');
  t.match(
    chain[2]!,
    / … \[\+\d+ chars\]  <- holds escaped characters: read carefully$/,
    'the hidden-character flag survives the cut',
  );
  const first = lines.find((l) => /ancestor 1 +pid/.test(l))!;
  const cut = Number(/\[\+(\d+) chars\]$/.exec(first)![1]);
  const whole = renderCard(card({ ancestors }), {}).find((l) => /ancestor 1 +pid/.test(l))!;
  t.equal(
    [...first].length - ' … [+N chars]'.length - String(cut).length + 1 + cut,
    [...whole].length,
    'the count is exactly what was cut',
  );
  const rows = lines.reduce((n, l) => n + Math.max(1, Math.ceil([...l].length / columns)), 0);
  t.ok(rows < 48, `the card takes ${rows} rows`);
  t.equal(renderCard(card(), { columns }).join('\n'), renderCard(card(), {}).join('\n'), 'short lines are not touched');
});

t.test('readCard: defensive reading of what the daemon pushed', async (t) => {
  t.equal(readCard(null), null);
  t.equal(readCard({ credential: 'x' }), null, 'no id: nothing to decide');
  const c = readCard({
    id: 'abc',
    approve: 'something-new',
    process: { pid: 'x', cmdline: ['a', 7] },
    ancestors: 'no',
    action: { kind: 'http', method: 'GET' },
  })!;
  t.equal(c.approve, 'each-use', 'an unknown approve mode is the stricter one');
  t.equal(c.process.pid, -1);
  t.equal(c.process.key, '');
  t.same(c.process.cmdline, ['a', '7']);
  t.same(c.ancestors, []);
  t.equal(c.credential, '(not given)');
  const out = renderCard(c).join('\n');
  t.notMatch(out, /session rooted/, 'no session without a process key');
});

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
