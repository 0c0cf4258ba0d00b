// A daemon stopped (SIGTERM) or killed (-9) and started again, with
// work under way: a request in flight upstream, a session, a `postern run`.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, startDaemon, openRequest, eventually, Daemon } from '../helpers/postern';
import { startStack, auditList, Stack } from '../helpers/stack';
import { startProxyStack, sh } from '../helpers/proxy-stack';

const def = (name: string, port: number): string =>
  `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\npaths = ["/*"]\n`;

type E = Record<string, any>;

// An upstream that answers /slow never (until released), everything else at once.
function holdingHandler(): { handler: any; seen: () => number; release: () => void } {
  const held: any[] = [];
  let seen = 0;
  return {
    handler: (req: any, _body: Buffer, res: any) => {
      if (req.url.startsWith('/slow')) {
        seen += 1;
        held.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    },
    seen: () => seen,
    release: () => {
      for (const r of held) r.destroy();
    },
  };
}

async function inFlight(t: Test, sig: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  const hold = holdingHandler();
  const s: Stack = await startStack({ handler: hold.handler });
  let d: Daemon = s.d;
  t.teardown(async () => {
    hold.release();
    if (d !== s.d) await d.stop();
    await s.close();
  });
  s.addCredential('api', def('api', s.up.port), 'tok_restart_0001');
  await s.approver();
  t.equal((await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/fast') })).status, 200);
  const pending = openRequest(s.sock, { credential: 'api', method: 'GET', url: s.url('api.example.test', '/slow') });
  t.ok(await eventually(() => hold.seen() === 1, 10_000), 'the request reached the upstream');
  s.d.proc.kill(sig);
  await s.d.exited;
  const reply = await Promise.race([
    pending.reply,
    new Promise<string>((r) => setTimeout(() => r('(no close)'), 5000)),
  ]);
  t.comment(`the agent's connection got: ${JSON.stringify(reply.slice(0, 300))}`);

  const before = cli(s.h, ['audit', 'verify']);
  t.comment(
    `verify right after ${sig} (no restart): exit ${before.code} ${before.stdout
      .split('\n')
      .filter((l) => /result|unsigned|problem/i.test(l))
      .join(' | ')}`,
  );

  d = await startDaemon(s.h);
  const locked = cli(s.h, ['audit', 'verify', '--allow-unsigned-tail']);
  t.equal(locked.code, 0, `restarted (locked): verify --allow-unsigned-tail passes\n${locked.stdout}${locked.stderr}`);
  t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0, 'unlock after restart');
  await d.stop();
  const v = cli(s.h, ['audit', 'verify']);
  t.equal(v.code, 0, `after restart, unlock and stop: verify passes without allowances\n${v.stdout}${v.stderr}`);

  const entries = auditList<E>(s);
  const intents = entries.filter(
    (e) => e['type'] === 'http_intent' || e['event']?.kind === 'http_intent' || e['kind'] === 'http_intent',
  );
  const outcomes = entries.filter(
    (e) => e['type'] === 'http_outcome' || e['event']?.kind === 'http_outcome' || e['kind'] === 'http_outcome',
  );
  t.comment(`entry shapes: ${JSON.stringify(entries.slice(-1)[0]).slice(0, 300)}`);
  const kinds = entries
    .map((e) => `${e['seq']}:${e['kind'] ?? e['type']}${e['reason'] ? '(' + e['reason'] + ')' : ''}`)
    .join(' ');
  t.comment(`journal kinds: ${kinds}`);
  const lastIntent = intents[intents.length - 1];
  t.ok(lastIntent, 'the in-flight request has its intent in the journal');
  const outcomeOfLast = outcomes.find((o) => JSON.stringify(o).includes(`"intent_seq":${lastIntent?.seq}`));
  t.comment(
    `outcome of the in-flight intent (seq ${lastIntent?.seq}): ${JSON.stringify(outcomeOfLast ?? null).slice(0, 300)}`,
  );
  const sessionEnds = entries.filter((e) => /session_end/.test(JSON.stringify(e)));
  t.comment(`session_end entries: ${sessionEnds.map((e) => JSON.stringify(e).slice(0, 200)).join(' || ') || 'none'}`);
  if (sig === 'SIGTERM') {
    t.ok(outcomeOfLast, 'a clean stop journals an outcome for the request it cut (or finishes it)');
    t.ok(sessionEnds.length >= 1, 'a clean stop ends the session in the journal');
  }
}

t.test('SIGTERM with a request in flight upstream', (t) => inFlight(t, 'SIGTERM'));
t.test('kill -9 with a request in flight upstream', (t) => inFlight(t, 'SIGKILL'));

t.test('a `postern run` started before a daemon restart', async (t) => {
  const s = await startProxyStack();
  let d: Daemon = s.d;
  t.teardown(async () => {
    if (d !== s.d) await d.stop();
    await s.close();
  });
  const go = join(s.h.dir, 'restarted');
  const url = s.url('api.example.test', '/after');
  const script = [
    `curl -sS --max-time 20 -o /dev/null -w 'before=%{http_code}\\n' -H "Authorization: Bearer $GH_TOKEN" ${s.url('api.example.test', '/before')}`,
    `touch ${join(s.h.dir, 'first-done')}`,
    `i=0; while [ ! -e ${go} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`,
    `curl -sS --max-time 20 -D - -H "Authorization: Bearer $GH_TOKEN" ${url}; echo`,
    `curl -sS --max-time 20 -o /dev/null -w 'noplaceholder=%{http_code}\\n' ${s.url('api.example.test', '/plain')}`,
  ].join('; ');
  const running = s.run(sh(script));
  t.ok(await eventually(() => existsSync(join(s.h.dir, 'first-done')), 30_000), 'first request through the run');
  await s.d.stop();
  d = await startDaemon(s.h);
  t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
  await s.approver();
  writeFileSync(go, '');
  const r = await running;
  t.comment(`run exit ${r.code}\nstdout:\n${r.stdout.toString()}\nstderr:\n${r.stderr}`);
  const out = r.stdout.toString();
  t.match(out, /before=200/, 'before the restart the placeholder worked');
  t.match(
    out,
    /x-postern-error: bad_request/,
    'after the restart the old placeholder is void (the run ended at the restart, as at lock)',
  );
  t.match(out, /noplaceholder=200/, 'the run itself keeps working for requests that use no credential');
  t.comment(`upstream saw: ${JSON.stringify(s.up.requests.map((q: any) => [q.url, q.headers?.authorization]))}`);
});
