// JSON object keys of POST /v1/http through the real daemon (SPEC §6.1,
// §6.2): what is judged is what is sent.
// - A key given twice in the request object (`url`, `headers`) or inside
//   `headers`: one of the values is used for validation, policy and the
//   request alike (JSON.parse keeps the last), never one for the check and
//   the other for the send.
// - A header named `__proto__` (a valid RFC 9110 token no rule forbids) is
//   sent as given: SPEC §6.2 refuses what it will not send and never removes
//   a header silently, and the upstream must see the header line.
// - Response headers whose (lower-case) names are also names of
//   Object.prototype members (`constructor`, `__proto__`) come back in the reply's
//   `headers` with the values the upstream sent, like any other header.
import t from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { echo, Handler } from '../helpers/https-upstream';
import { rawRequest } from '../helpers/request-rows';
import { findCanary, makeCanary } from '../helpers/canary';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown; part?: string };
}

const HOST = 'json.example.test';

t.test('duplicate keys and __proto__ in the request JSON', async (t) => {
  // The raw header lines of each request, in order as received.
  const rawHeaders: string[][] = [];
  const handler: Handler = (req, body, res) => {
    rawHeaders.push(req.rawHeaders);
    if (req.url === '/v1/odd-response-headers') {
      res.setHeader('content-type', 'text/plain');
      res.setHeader('constructor', 'c-value');
      res.setHeader('__proto__', 'p-value');
      res.setHeader('x-plain', 'x-value');
      res.end('ok');
      return;
    }
    return echo(req, body, res);
  };
  const s: Stack = await startStack({ names: [HOST], records: { [HOST]: { A: ['127.0.0.1'] } }, handler });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "X-Api-Key"\ntemplate = "Key {secret}"\n` +
      `[[allow]]\nhost = "${HOST}"\nports = [${P}]\npaths = ["/v1/*"]\n`,
    secret,
  );
  await s.approver();
  const texts: string[] = [];
  const send = async (json: string) => {
    const r = await rawRequest(s.sock, Buffer.from(json));
    texts.push(r.text);
    return r;
  };
  const allowed = `https://${HOST}:${P}/v1/ok`;
  const denied = `https://${HOST}:${P}/admin`;

  await t.test('url twice, the last outside the rules: denied_policy, nothing sent', async (t) => {
    const before = s.up.requests.length;
    const r = await send(`{"credential":"api","method":"GET","url":"${allowed}","url":"${denied}"}`);
    t.equal(r.status, 403, r.text);
    const err = (r.json as ErrorBody).error;
    t.equal(err.code, 'denied_policy');
    t.equal(err.part, 'path');
    t.type(err.audit_seq, 'number');
    t.equal(s.up.requests.length, before, 'the upstream saw no request');
  });

  await t.test('url twice, the last inside the rules: the last is the one sent', async (t) => {
    const r = await send(`{"credential":"api","method":"GET","url":"${denied}","url":"${allowed}"}`);
    t.equal(r.status, 200, r.text);
    t.equal(s.up.requests.at(-1)!.url, '/v1/ok');
  });

  await t.test('headers twice, the first with a forbidden header: the last is checked and sent', async (t) => {
    const r = await send(
      `{"credential":"api","method":"GET","url":"${allowed}","headers":{"host":"evil.test"},"headers":{"x-a":"1"}}`,
    );
    t.equal(r.status, 200, r.text);
    const seen = s.up.requests.at(-1)!;
    t.equal(seen.headers['host'], `${HOST}:${P}`, 'Host is the URL host');
    t.equal(seen.headers['x-a'], '1');
  });

  await t.test('headers twice, the last with the injected header: refused', async (t) => {
    const before = s.up.requests.length;
    const r = await send(
      `{"credential":"api","method":"GET","url":"${allowed}","headers":{"x-a":"1"},"headers":{"X-Api-Key":"mine"}}`,
    );
    t.equal(r.status, 400, r.text);
    t.equal((r.json as ErrorBody).error.code, 'bad_request');
    t.equal(s.up.requests.length, before, 'the upstream saw no request');
  });

  await t.test('a header name twice inside headers: one value, the last, sent once', async (t) => {
    const r = await send(`{"credential":"api","method":"GET","url":"${allowed}","headers":{"x-a":"1","x-a":"2"}}`);
    t.equal(r.status, 200, r.text);
    const lines = rawHeaders.at(-1)!;
    const values = lines.filter((_, i) => i % 2 === 1 && lines[i - 1]!.toLowerCase() === 'x-a');
    t.same(values, ['2']);
  });

  await t.test('a header named __proto__ is sent, not dropped', async (t) => {
    const before = s.up.requests.length;
    const r = await send(
      `{"credential":"api","method":"GET","url":"${allowed}","headers":{"__proto__":"seen","x-b":"1"}}`,
    );
    t.equal(r.status, 200, r.text);
    t.equal(s.up.requests.length, before + 1);
    const lines = rawHeaders.at(-1)!;
    const names = lines.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    t.ok(names.includes('x-b'), 'the other header arrived');
    t.ok(names.includes('__proto__'), `the __proto__ header arrived (got ${names.join(', ')})`);
  });

  await t.test('response headers named like Object.prototype members keep their values', async (t) => {
    const r = await send(`{"credential":"api","method":"GET","url":"https://${HOST}:${P}/v1/odd-response-headers"}`);
    t.equal(r.status, 200, r.text);
    const headers = (r.json as { headers: Record<string, unknown> }).headers;
    t.equal(headers['x-plain'], 'x-value', 'an ordinary header');
    t.same(Object.getOwnPropertyDescriptor(headers, 'constructor')?.value, 'c-value', 'constructor');
    t.same(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value, 'p-value', '__proto__');
  });

  await s.d.stop();
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
});
