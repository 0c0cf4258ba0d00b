// Adversarial rows for what an upstream sends back through the proxy front door
// (SPEC §11 with §6.4), each a rule no other test checks end to end:
// - the upstream's status-line reason phrase never reaches the client (the
//   front door writes its own), so a secret echoed there is not passed on;
// - an interim 103 whose reason phrase and header echo the injected value is
//   not passed on, and the final response that follows is the client's;
// - a secret the upstream reflects later, to a request of the same run that
//   carries no placeholder (an origin that keeps what it received and shows
//   it at another path, as request-inspection and logging APIs do): the
//   response comes from a host the credential covers and is the answer to
//   the same agent, so it must be redacted like any other (SPEC §6.4, §1:
//   leaks through the agent's context). Through POST /v1/http the same read
//   is refused by the credential's path rule, and had it been allowed, the
//   credential's redactor would have scanned it.
// - a response header folded onto a continuation line (obs-fold) that
//   carries the injected value reaches the client in no form.
// - the same for a second credential covering the host that no request has
//   used since the unlock (its redactor is built at the read), the mark
//   naming both credentials.
// Before 2026-12-05 a request with no placeholder had no redactor, so the
// secret the origin kept came back whole.
// A real daemon, a real `postern run` with a raw HTTP/1.1 client under it
// (test/helpers/proxy-raw-client.ts); the secret searched in every byte the
// client received, the daemon log and the journal.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { keepingHost } from '../helpers/keeping-host';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseRaw, sendRaw } from '../helpers/proxy-raw-client';
import { rawResponse, startRawOrigin } from '../helpers/raw-origin';

const HOST = 'api.example.test';

t.test('what an upstream sends back', async (t) => {
  const keeper = keepingHost();
  const s = await startStack({ handler: keeper.handler });
  t.teardown(() => s.close());
  const secret = makeCanary('RTRESP');
  const P = s.up.port;

  // A raw origin on another port, same name and test CA, for status lines
  // and interim responses undici's own server would not write.
  const origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, (head) => {
    const auth = head.headers.find(([k]) => k.toLowerCase() === 'authorization')?.[1] ?? '';
    const body = '{"ok":true}';
    if (head.target === '/reason')
      return {
        read: 'declared',
        respond: () => Buffer.from(`HTTP/1.1 200 ${auth} ${secret}\r\ncontent-length: ${body.length}\r\n\r\n${body}`),
      };
    if (head.target === '/early')
      return {
        read: 'declared',
        respond: () =>
          Buffer.concat([
            Buffer.from(`HTTP/1.1 103 ${auth}\r\nLink: </${secret}>; rel=preload\r\nX-Echo: ${auth}\r\n\r\n`),
            rawResponse(
              200,
              [
                ['content-length', String(body.length)],
                ['x-final', 'yes'],
              ],
              body,
            ),
          ]),
      };
    if (head.target === '/fold')
      return {
        read: 'declared',
        respond: () =>
          Buffer.from(`HTTP/1.1 200 OK\r\nX-Echo: seen\r\n ${auth}\r\ncontent-length: ${body.length}\r\n\r\n${body}`),
      };
    return { read: 'declared', respond: () => rawResponse(404, [['content-length', '0']]) };
  });
  t.teardown(() => origin.close());

  const rules = (port: number, paths: string): string =>
    `[[allow]]\nhost = "${HOST}"\nports = [${port}]\nmethods = ["GET"]\npaths = [${paths}]\n`;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nenv = ["API_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n${rules(P, '"/store"')}${rules(origin.port, '"/*"')}`,
    secret,
  );
  await s.approver();
  const received: Buffer[] = [];

  const head = (port: number, path: string, placeholder: boolean): string =>
    `GET ${path} HTTP/1.1\r\nHost: ${HOST}:${port}\r\n${placeholder ? 'Authorization: Bearer @@PH:API_TOKEN@@\r\n' : ''}\r\n`;

  await t.test("the upstream's reason phrase and 1xx are not passed on", async (t) => {
    const run = await sendRaw(s.h, [
      { id: 1, connect: `${HOST}:${origin.port}`, head: head(origin.port, '/reason', true) },
      { id: 2, connect: `${HOST}:${origin.port}`, head: head(origin.port, '/early', true) },
      { id: 3, connect: `${HOST}:${origin.port}`, head: head(origin.port, '/fold', true) },
    ]);
    t.equal(run.code, 0, run.stderr);
    received.push(run.stdout, Buffer.from(run.stderr));
    const reason = parseRaw(Buffer.from(run.answers.get(1)?.raw ?? '', 'base64'));
    t.match(reason.head, /^HTTP\/1\.1 200 OK\r\n/, "the front door's own reason phrase");
    t.equal(reason.body, '{"ok":true}');
    const earlyRaw = Buffer.from(run.answers.get(2)?.raw ?? '', 'base64');
    const early = parseRaw(earlyRaw);
    t.match(early.head, /^HTTP\/1\.1 200 OK\r\n/, 'the first thing the client reads is the final response');
    t.notMatch(earlyRaw.toString('latin1'), /\b103\b|link:|x-echo/i, 'nothing of the 103');
    t.equal(early.headers['x-final'], 'yes');
    for (const [id, a] of run.answers) {
      const raw = Buffer.from(a.raw ?? '', 'base64');
      received.push(raw);
      t.same(exposures(raw, secret), [], `no form of the secret reached the client (${id})`);
    }
    // An obs-fold line carrying the injected value: refused before the
    // head (undici's parser rejects the fold), or the value redacted.
    const fold = parseRaw(Buffer.from(run.answers.get(3)?.raw ?? '', 'base64'));
    t.ok(fold.status === 502 || fold.status === 200, `the folded header: ${fold.head}`);
    if (fold.status === 502) t.equal(fold.headers['x-postern-error'], 'upstream_error');
    t.equal(origin.requests.length, 3, 'each reached the origin');
  });

  await t.test('a secret the upstream reflects to a later request without a placeholder is redacted', async (t) => {
    const run = await sendRaw(s.h, [
      { id: 1, connect: `${HOST}:${P}`, head: head(P, '/store', true) },
      { id: 2, connect: `${HOST}:${P}`, head: head(P, '/last', false) },
    ]);
    t.equal(run.code, 0, run.stderr);
    received.push(run.stdout, Buffer.from(run.stderr));
    t.equal(keeper.kept, `Bearer ${secret}`, 'the upstream kept what postern injected');
    const stored = parseRaw(Buffer.from(run.answers.get(1)?.raw ?? '', 'base64'));
    t.equal(stored.status, 200);
    const raw = Buffer.from(run.answers.get(2)?.raw ?? '', 'base64');
    received.push(raw);
    const reflected = parseRaw(raw);
    t.equal(reflected.status, 200, 'the read is served (a request without a placeholder needs no approval)');
    t.same(exposures(raw, secret), [], 'no form of the secret reached the client');

    // Through POST /v1/http the same read is the credential's, and refused.
    const direct = await s.request({ credential: 'api', method: 'GET', url: `https://${HOST}:${P}/last` });
    t.equal(direct.status, 403, direct.text);
    t.equal((direct.json as { error: { code: string } }).error.code, 'denied_policy');
  });

  // A second credential for the same host, never used since the unlock:
  // no shared redactor yet, so one is built from its secret for the read.
  const secret2 = makeCanary('RTADMIN');
  s.addCredential(
    'api-admin',
    `name = "api-admin"\nkind = "http"\nenv = ["API_ADMIN_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "token {secret}"\n${rules(P, '"/admin"')}`,
    secret2,
  );

  await t.test(
    "a covering credential's secret, kept by the host, is redacted with no request of its own",
    async (t) => {
      keeper.kept = `token ${secret2} and Bearer ${secret}`;
      const run = await sendRaw(s.h, [{ id: 1, connect: `${HOST}:${P}`, head: head(P, '/last', false) }]);
      t.equal(run.code, 0, run.stderr);
      received.push(run.stdout, Buffer.from(run.stderr));
      const raw = Buffer.from(run.answers.get(1)?.raw ?? '', 'base64');
      received.push(raw);
      const reflected = parseRaw(raw);
      t.equal(reflected.status, 200);
      t.same(exposures(raw, secret2), [], 'no form of the second secret reached the client');
      t.same(exposures(raw, secret), [], 'nor of the first');
      t.equal(
        reflected.body,
        JSON.stringify({ seen: '[REDACTED:api-admin] and [REDACTED:api]' }),
        'each occurrence marked with the name of the credential whose value it is',
      );
    },
  );

  await s.d.stop();
  received.forEach((bytes, i) => {
    t.same(exposures(bytes, secret), [], `the client received no form of the secret (${i})`);
    t.same(exposures(bytes, secret2), [], `the client received no form of the second secret (${i})`);
  });
  t.same(exposures(s.d.logs(), secret2), [], "the second secret is not in the daemon's log");
  t.same(exposures(await journalText(s.h), secret2), [], 'the second secret is not in the journal');
  t.same(exposures(s.d.logs(), secret), [], "the secret is not in the daemon's log");
  t.same(exposures(await journalText(s.h), secret), [], 'the secret is not in the journal');
});
