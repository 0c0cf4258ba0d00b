// A host keeps what a request injected (/store) and shows it at /last. The
// value may be one postern no longer holds as the credential's secret: a
// `cred update` replaced it, or a `cred rm` removed the credential. Such a
// value may still be valid at the service until someone revokes it there,
// so until the lock it is searched for too, in what the hosts its version
// covered answer, through either front door, marked with its credential's
// name (docs/responses.md, "Former values"). Each row failed before: the
// former value reached the agent in clear.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { keepingHost } from '../helpers/keeping-host';
import { makeCanary, journalBytes } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseRaw, sendRaw } from '../helpers/proxy-raw-client';
import { cli } from '../helpers/postern';

const HOST = 'api.example.test';

t.test('values a rotation or a removal replaced are still redacted until the lock', async (t) => {
  const keeper = keepingHost();
  const s = await startStack({ handler: keeper.handler });
  t.teardown(() => s.close());
  const P = s.up.port;
  const def = (name: string): string =>
    `name = "${name}"\nkind = "http"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET"]\npaths = ["/store", "/last"]\n`;
  const printed: string[] = [];
  const run = (args: string[]): void => {
    const r = cli(s.h, [...args, '--passphrase-file', s.h.passFile]);
    printed.push(r.stdout, r.stderr);
    t.equal(r.code, 0, `${args.slice(0, 3).join(' ')}: ${r.stderr}`);
  };
  const rotate = (name: string, secret: string): void =>
    run([
      'cred',
      'update',
      name,
      '--file',
      s.h.file(`${name}-next.toml`, def(name)),
      '--secret-file',
      s.h.file(`${name}-next.secret`, secret),
    ]);
  const first = makeCanary('XFIRST');
  const gone = makeCanary('XGONE');
  s.addCredential('api', def('api'), first);
  s.addCredential('old', def('old'), gone);
  await s.approver();
  const json = async (name: string, path: string): Promise<string> => {
    const r = await s.request({ credential: name, method: 'GET', url: `https://${HOST}:${P}${path}` });
    t.equal(r.status, 200, r.text.slice(0, 300));
    printed.push(r.text);
    return r.text;
  };
  const head = (path: string, env: string | null): string =>
    `GET ${path} HTTP/1.1\r\nHost: ${HOST}:${P}\r\n${env ? `Authorization: Bearer @@PH:${env}@@\r\n` : ''}\r\n`;
  const proxied = async (): Promise<Buffer[]> => {
    const r = await sendRaw(s.h, [
      { id: 1, connect: `${HOST}:${P}`, head: head('/last', 'API_TOKEN') },
      { id: 2, connect: `${HOST}:${P}`, head: head('/last', null) },
    ]);
    t.equal(r.code, 0, r.stderr);
    printed.push(r.stdout.toString('latin1'));
    return [1, 2].map((id) => Buffer.from(r.answers.get(id)?.raw ?? '', 'base64'));
  };

  await t.test('a rotated secret', async (t) => {
    await json('api', '/store');
    t.equal(keeper.kept, `Bearer ${first}`, 'the host kept the value injected');
    rotate('api', makeCanary('XSECOND'));
    const text = await json('api', '/last');
    t.same(exposures(text, first), [], 'POST /v1/http: the replaced value is not in the reply');
    t.match(text, /\[REDACTED:api\]/, "marked with the credential's name");
    const [withPh, withoutPh] = await proxied();
    for (const [what, answer] of [
      ['with a placeholder', withPh],
      ['without a placeholder', withoutPh],
    ] as const) {
      t.equal(parseRaw(answer!).status, 200, `${what}: ${parseRaw(answer!).head}`);
      t.same(exposures(answer!, first), [], `through the proxy ${what}: redacted`);
      t.match(parseRaw(answer!).body, /\[REDACTED:api\]/);
    }
  });

  await t.test('four rotations later, the first value is still searched for', async (t) => {
    for (const n of ['3', '4', '5']) rotate('api', makeCanary(`XROT${n}`));
    const text = await json('api', '/last');
    t.same(exposures(text, first), [], 'the last four replaced values are kept');
    t.match(text, /\[REDACTED:api\]/);
  });

  await t.test("a removed credential's value, through another covering the host", async (t) => {
    await json('old', '/store');
    t.equal(keeper.kept, `Bearer ${gone}`);
    run(['cred', 'rm', 'old']);
    const text = await json('api', '/last');
    t.same(exposures(text, gone), [], 'POST /v1/http: the removed value is not in the reply');
    t.match(text, /\[REDACTED:old\]/, 'marked with the removed credential’s name');
    const [withPh, withoutPh] = await proxied();
    t.same(exposures(withPh!, gone), [], 'through the proxy with a placeholder');
    t.same(exposures(withoutPh!, gone), [], 'through the proxy without one');
  });

  for (const secret of [first, gone]) {
    t.same(exposures(printed.join('\n'), secret), [], 'nothing any client or command printed holds it');
    t.same(exposures(s.d.logs(), secret), [], 'nor the daemon log');
    t.same(exposures(journalBytes(s.h.home), secret), [], 'nor the journal');
  }
});
