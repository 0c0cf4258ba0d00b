// The proxy front door (SPEC §11) through a real daemon and a real
// `postern run -- curl`: a CONNECT to a host the credential covers is
// terminated with the local CA's leaf, its request runs through the
// pipeline with the placeholder swapped for the secret where the credential
// injects it, and the answer comes back to curl. The client's environment
// holds only the placeholder; the secret is in no byte curl received, nor
// the journal, nor the daemon's log.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, type Card } from '../helpers/stack';
import { renderCard } from '../../cli/approver/render';
import type { Card as FullCard } from '../../shared/admin-protocol';
import { cliBytes } from '../helpers/cli-bytes';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

t.test('CONNECT, TLS, the pipeline: the secret reaches the upstream only', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('DOORSECRET');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nenv = ["API_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\n`,
    secret,
  );
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'session', root_key: card.process.key };
  });
  const envFile = join(s.h.dir, 'child-env');
  const pidFile = join(s.h.dir, 'curl-pid');
  const r = await cliBytes(s.h.env, [
    'run',
    '--',
    'sh',
    '-c',
    `env > ${envFile}; curl -sS --max-time 20 -D - -H "Authorization: Bearer $API_TOKEN" ${s.url('api.example.test', '/v1/thing?x=1')} & echo $! > ${pidFile}; wait $!`,
  ]);
  t.equal(r.code, 0, r.stderr);
  const out = r.stdout.toString();
  t.match(out, /^HTTP\/1\.1 200 /, out);
  const seen = s.up.requests.at(-1)!;
  t.equal(seen.headers['authorization'], `Bearer ${secret}`, 'the upstream received the real secret');
  t.equal(seen.url, '/v1/thing?x=1');
  t.notOk('postern-run-client' in seen.headers, "postern run's header does not go upstream");

  // The card: through the proxy, for postern run (the kernel's peer), and
  // the connecting descendant as postern run reported it.
  t.equal(cards.length, 1, 'one card');
  const card = cards[0]!;
  t.equal(card.action['via'], 'proxy');
  t.equal(card.action['proxy_client_pid'], Number(readFileSync(pidFile, 'utf8').trim()), "curl's pid");
  t.match((card as unknown as FullCard).process.cmdline.join(' '), /main\.js run -- sh -c/, 'the peer is postern run');
  const text = renderCard(card as unknown as FullCard).join('\n');
  t.match(text, /via +the proxy front door\n/);
  t.match(
    text,
    /connection +pid \d+  <- reported by the requester \(the run's root, normally postern run\), not checked by the kernel/,
  );

  const env = readFileSync(envFile, 'utf8');
  t.match(env, /^API_TOKEN=postern-api-[0-9a-f]{16}$/m, "the client's env holds the placeholder");
  t.same(exposures(env, secret), [], 'the secret is not in the env');
  t.same(exposures(r.stdout, secret), [], 'the secret is in no byte curl received');
  // Keep-alive: two requests in one CONNECT, each served.
  const before = s.up.requests.length;
  const two = await cliBytes(s.h.env, [
    'run',
    '--',
    'sh',
    '-c',
    `curl -sSv --max-time 20 -o /dev/null -o /dev/null -w '%{http_code}\\n' ${s.url('api.example.test', '/a')} ${s.url('api.example.test', '/b')}`,
  ]);
  t.equal(two.code, 0, two.stderr.toString());
  t.equal(two.stdout.toString(), '200\n200\n', 'both requests answered');
  t.equal(two.stderr.toString().match(/> CONNECT /g)?.length, 1, 'over one CONNECT');
  t.same(
    s.up.requests.slice(before).map((q) => q.url),
    ['/a', '/b'],
  );

  // A body over http.max_request_body: 413, before anything is sent.
  const big = join(s.h.dir, 'big');
  writeFileSync(big, Buffer.alloc(1024 * 1024 + 1, 'a'));
  const large = await cliBytes(s.h.env, [
    'run',
    '--',
    'sh',
    '-c',
    `curl -sS --max-time 20 -D - -H "Authorization: Bearer $API_TOKEN" --data-binary @${big} ${s.url('api.example.test', '/up')}`,
  ]);
  const answer = large.stdout.toString();
  t.match(answer, /\r\nHTTP\/1\.1 413 /, answer.slice(0, 300));
  t.match(answer, /\r\nx-postern-error: body_too_large\r\n/i);
  t.match(answer, /"code":"body_too_large"/);
  t.equal(s.up.requests.length, before + 2, 'the large request was not sent');

  await s.d.stop();
  t.same(exposures(s.d.logs(), secret), [], "the secret is not in the daemon's log");
  const journal = await journalText(s.h);
  t.match(journal, /"via":"proxy"/);
  t.same(exposures(journal, secret), [], 'the secret is not in the journal');
});
