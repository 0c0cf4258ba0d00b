// Two credentials cover one host, and the host keeps what an earlier
// request injected (/store) and shows it at /last. Without a placeholder,
// /last is redacted for both credentials (response-echoes.test.ts). The same
// read through the OTHER credential (its placeholder through the proxy, or
// its name on POST /v1/http) was redacted for that credential only, so the
// first one's secret reached the client in clear: every response from a
// covered host is searched for the values of every credential covering it.
// Each row failed before.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { keepingHost } from '../helpers/keeping-host';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseRaw, sendRaw } from '../helpers/proxy-raw-client';

const HOST = 'api.example.test';

t.test("a placeholder of one covering credential unmasks another's secret the host kept", async (t) => {
  const keeper = keepingHost();
  const s = await startStack({ handler: keeper.handler });
  t.teardown(() => s.close());
  const P = s.up.port;
  const adminSecret = makeCanary('XADMIN');
  const readerSecret = makeCanary('XREADER');
  const def = (name: string, paths: string): string =>
    `name = "${name}"\nkind = "http"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET"]\npaths = [${paths}]\n`;
  s.addCredential('admin', def('admin', '"/store"'), adminSecret);
  s.addCredential('reader', def('reader', '"/last"'), readerSecret);
  await s.approver();

  const head = (path: string, env: string | null): string =>
    `GET ${path} HTTP/1.1\r\nHost: ${HOST}:${P}\r\n${env ? `Authorization: Bearer @@PH:${env}@@\r\n` : ''}\r\n`;
  const run = await sendRaw(s.h, [
    { id: 1, connect: `${HOST}:${P}`, head: head('/store', 'ADMIN_TOKEN') },
    { id: 2, connect: `${HOST}:${P}`, head: head('/last', null) },
    { id: 3, connect: `${HOST}:${P}`, head: head('/last', 'READER_TOKEN') },
  ]);
  t.equal(run.code, 0, run.stderr);
  t.equal(keeper.kept, `Bearer ${adminSecret}`, "the host kept admin's injected value");
  const noPh = Buffer.from(run.answers.get(2)?.raw ?? '', 'base64');
  t.equal(parseRaw(noPh).status, 200);
  t.same(exposures(noPh, adminSecret), [], 'without a placeholder: redacted (as documented)');
  const withReader = Buffer.from(run.answers.get(3)?.raw ?? '', 'base64');
  t.equal(parseRaw(withReader).status, 200, parseRaw(withReader).head);
  t.same(
    exposures(withReader, adminSecret),
    [],
    "with reader's placeholder: admin's secret must not reach the client either",
  );
  t.same(exposures(run.stdout, adminSecret), [], "nothing the run printed holds admin's secret");
  t.match(parseRaw(withReader).body, /\[REDACTED:admin\]/, 'marked with the name of the credential whose value it is');

  // The JSON front door: the same read through reader's name.
  const json = await s.request({
    credential: 'reader',
    method: 'GET',
    url: `https://${HOST}:${P}/last`,
  });
  t.equal(json.status, 200, json.text.slice(0, 300));
  t.same(exposures(json.text, adminSecret), [], "POST /v1/http through reader: admin's secret is not in the reply");
  t.match(json.json, { status: 200, body: /\[REDACTED:admin\]/ });
  t.same(exposures(s.d.logs(), adminSecret), [], 'nor in the daemon log');
});
