// A placeholder outside its credential's inject slot (Authorization:
// Bearer {secret}), through a real `postern run`. Each must be refused 400
// bad_request with x-postern-error, and never reach the upstream.
import t from 'tap';
import { startProxyStack } from '../helpers/proxy-stack';
import { sendRaw, parseRaw, type Wire } from '../helpers/proxy-raw-client';

t.test('placeholder slots', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  const c = `api.example.test:${P}`;
  const H = `Host: ${c}\r\n`;
  const rows: [string, string][] = [
    [
      'two Authorization headers',
      `GET /a1 HTTP/1.1\r\n${H}Authorization: Bearer @@PH:GH_TOKEN@@\r\nAuthorization: Bearer @@PH:GH_TOKEN@@\r\n\r\n`,
    ],
    [
      'slot plus cookie',
      `GET /a2 HTTP/1.1\r\n${H}Authorization: Bearer @@PH:GH_TOKEN@@\r\nCookie: t=@@PH:GH_TOKEN@@\r\n\r\n`,
    ],
    ['Basic password, header credential', `GET /a5 HTTP/1.1\r\n${H}Authorization: Basic @@B64:x:GH_TOKEN@@\r\n\r\n`],
    ['header name', `GET /a6 HTTP/1.1\r\n${H}@@PH:GH_TOKEN@@: 1\r\n\r\n`],
    ['lower-case bearer', `GET /a7 HTTP/1.1\r\n${H}authorization: bearer @@PH:GH_TOKEN@@\r\n\r\n`],
  ];
  const reqs: Wire[] = rows.map(([id, head]) => ({ id, connect: c, head }));
  const before = s.up.requests.length;
  const { answers } = await sendRaw(s.h, reqs, ['--credential', 'github']);
  for (const [id] of rows) {
    const a = answers.get(id);
    const raw = a?.raw ? Buffer.from(a.raw, 'base64') : Buffer.alloc(0);
    const p = raw.length ? parseRaw(raw) : null;
    t.comment(`${id}: ${p ? p.head.split('\r\n')[0] + ' ' + p.body.slice(0, 220) : JSON.stringify(a)}`);
    t.equal(p?.status, 400, `${id}: 400`);
    t.equal(p?.headers['x-postern-error'], 'bad_request', `${id}: bad_request`);
  }
  t.same(
    s.up.requests.slice(before).map((r) => r.url),
    [],
    'no refused request reached the upstream',
  );
  t.same(await s.exposed(), [], 'secret exposed nowhere');
});
