// A kept-alive CONNECT tunnel under `postern run`: a first request with the
// placeholder is answered, then a lifecycle event (lock, revoke, cred rm),
// then the next request on the same tunnel. And SIGTERM with a proxied and a
// JSON request waiting on the upstream.
import t from 'tap';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { cli, openRequest, eventually } from '../helpers/postern';
import { cliBytes } from '../helpers/cli-bytes';
import { findCanary, makeCanary } from '../helpers/canary';
import { credRm, httpDef, manualApprover, startStack, Stack } from '../helpers/lifecycle';
import { testSource } from '../helpers/repo-root';

const CLIENT = testSource('helpers', 'tunnel-client.js');
type Got = { raw?: string; ended?: string; partial?: string };

function statusOf(g: Got | undefined): { status: number | null; error: string | null } {
  const raw = g?.raw ?? '';
  const m = /^HTTP\/1\.1 (\d+)/.exec(raw);
  const e = /\r\nx-postern-error:\s*([a-z_]+)/i.exec(raw);
  return { status: m ? Number(m[1]) : null, error: e ? e[1]! : null };
}

const held: ServerResponse[] = [];
let seenSlow = 0;
const handler = (req: IncomingMessage, _body: Buffer, res: ServerResponse): void => {
  if (req.url?.startsWith('/slow')) {
    seenSlow += 1;
    held.push(res);
    return;
  }
  const text = JSON.stringify({ url: req.url });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

async function setup(t: { teardown(f: () => unknown): void }): Promise<{
  s: Stack;
  secret: string;
  m: Awaited<ReturnType<typeof manualApprover>>;
  mode: { v: 'session' | 'deny' | 'none' };
}> {
  const s = await startStack({ handler });
  t.teardown(async () => {
    for (const r of held.splice(0)) r.destroy();
    await s.close();
  });
  const secret = makeCanary('TUNNEL');
  s.addCredential('github', httpDef('github', s.up.port, { extra: 'env = ["GH_TOKEN"]\n' }), secret);
  const m = await manualApprover(s);
  const mode = { v: 'session' as 'session' | 'deny' | 'none' };
  // decide each card as `mode` says, as it arrives
  const seen = new Set<string>();
  const timer = setInterval(() => {
    for (const c of m.cards)
      if (!seen.has(c.id) && mode.v !== 'none') {
        seen.add(c.id);
        void m.decide(c, mode.v);
      }
  }, 20);
  t.teardown(() => clearInterval(timer));
  return { s, secret, m, mode };
}

// The tunnel client under `postern run`, for `count` requests.
function tunnelClient(s: Stack, dir: string, count: number): ReturnType<typeof cliBytes> {
  const argv = [process.execPath, CLIENT, 'api.example.test', String(s.up.port), dir, String(count)];
  return cliBytes(s.h.env, ['run', '--credential', 'github', '--', ...argv]);
}

// Runs the client for `count` requests; `between(n)` runs before request n.
async function tunnel(
  s: Stack,
  count: number,
  between: (n: number) => Promise<void>,
): Promise<{ got: Got[]; code: number | null; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'pl-tun-'));
  const run = tunnelClient(s, dir, count);
  for (let n = 2; n <= count; n++) {
    const ok = await eventually(() => existsSync(join(dir, `done-${n - 1}`)), 30_000);
    if (!ok) break;
    await between(n);
    writeFileSync(join(dir, `go-${n}`), '');
  }
  const r = await run;
  let got: Got[] = [];
  try {
    got = JSON.parse(r.stdout.toString().trim().split('\n').pop() ?? '[]') as Got[];
  } catch {
    got = [];
  }
  return { got, code: r.code, stderr: r.stderr };
}

const withSecret = (s: Stack, secret: string): number =>
  s.up.requests.filter((r) => JSON.stringify(r.headers).includes(secret)).length;

t.test('lock between two requests on one kept-alive tunnel: the second is refused 423 vault_locked', async (t) => {
  const { s, secret } = await setup(t);
  const r = await tunnel(s, 2, async () => {
    t.equal(cli(s.h, ['lock']).code, 0, 'lock');
  });
  t.comment(JSON.stringify(r.got).slice(0, 600));
  t.equal(statusOf(r.got[0]).status, 200, 'the first was answered');
  t.same(statusOf(r.got[1]), { status: 423, error: 'vault_locked' }, 'the second: 423 vault_locked');
  t.equal(withSecret(s, secret), 1, 'the secret went out once, before the lock');
  t.same(findCanary(s.d.logs(), secret), []);
});

t.test('revoke between two requests on one kept-alive tunnel: the second needs a new card (denied here)', async (t) => {
  const { s, secret, m, mode } = await setup(t);
  const r = await tunnel(s, 2, async () => {
    mode.v = 'deny';
    t.equal(cli(s.h, ['sessions', 'revoke', '--all']).code, 0, 'revoke');
  });
  t.comment(JSON.stringify(r.got).slice(0, 600));
  t.equal(statusOf(r.got[0]).status, 200);
  t.same(statusOf(r.got[1]), { status: 403, error: 'denied_by_user' }, 'the second was asked about and denied');
  t.equal(m.cards.length, 2, 'two cards');
  t.equal(withSecret(s, secret), 1, 'the secret went out once');
});

t.test('cred rm between two requests on one kept-alive tunnel: the placeholder is void, nothing sent', async (t) => {
  const { s, secret } = await setup(t);
  const before = s.up.requests.length;
  const r = await tunnel(s, 2, async () => {
    const rm = await credRm(s, 'github');
    t.equal(rm.code, 0, rm.stderr);
  });
  t.comment(JSON.stringify(r.got).slice(0, 800));
  t.equal(statusOf(r.got[0]).status, 200);
  const second = statusOf(r.got[1]);
  t.same(second, { status: 400, error: 'bad_request' }, 'the second: its placeholder no longer stands for anything');
  t.match(r.got[1]?.raw ?? '', /or its credential was removed \(postern cred rm\)/);
  t.equal(s.up.requests.length, before + 1, 'only the first request reached the upstream');
  t.equal(withSecret(s, secret), 1);
  t.equal(
    s.up.requests.filter((x) => /postern-github-/.test(JSON.stringify(x.headers))).length,
    0,
    'no placeholder was forwarded upstream',
  );
});

t.test(
  'SIGTERM with a proxied and a JSON request waiting on the upstream: each gets an answer with a code',
  async (t) => {
    const { s } = await setup(t);
    seenSlow = 0;
    const json = openRequest(s.sock, {
      credential: 'github',
      method: 'GET',
      url: s.url('api.example.test', '/slow-json'),
    });
    const dir = mkdtempSync(join(tmpdir(), 'pl-tun-'));
    writeFileSync(join(dir, 'path-1'), '/slow-proxy');
    const run = tunnelClient(s, dir, 1);
    t.ok(await eventually(() => seenSlow === 2, 20_000), `both reached the upstream (${seenSlow})`);
    s.d.proc.kill('SIGTERM');
    t.equal(await s.d.exited, 0, 'the daemon exits 0');
    const raw = await Promise.race([json.reply, new Promise<string>((r) => setTimeout(() => r('(no close)'), 5000))]);
    t.comment(`JSON door got: ${JSON.stringify(raw.slice(0, 300))}`);
    t.match(raw, /^HTTP\/1\.1 \d{3} /, 'the JSON request got an HTTP answer');
    t.match(raw, /"code":"[a-z_]+"/, 'with an error code');
    const r = await run;
    const got = (JSON.parse(r.stdout.toString().trim() || '[]') as Got[])[0];
    t.comment(`proxy client got: ${JSON.stringify(got).slice(0, 300)}; run exit ${r.code}`);
    t.ok(
      statusOf(got).error !== null,
      `the proxied request got an answer with x-postern-error (${JSON.stringify(got).slice(0, 200)})`,
    );
    const v = cli(s.h, ['audit', 'verify']);
    t.equal(v.code, 0, v.stdout.split('\n').slice(-3).join(' ') + v.stderr);
  },
);
