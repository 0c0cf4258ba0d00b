// a hostile HTTPS origin behind the proxy front door (SPEC §6.2–6.4,
// §11), rows not covered by test/proxy/{response-echoes,hostile-origin,
// canary-echo,covering-redaction,truncation}.test.ts. The origin knows the
// injected `Bearer <secret>` (it reads it from the request) and tries to get
// it, or confusion, back to the proxied client. Every byte the client
// receives, the daemon log and the journal are searched for the secret.
import t, { type Test } from 'tap';
import zlib from 'node:zlib';
import { startStack, type Stack } from '../helpers/stack';
import { journalText, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseRaw, sendRaw, sendKeptAlive, type Wire } from '../helpers/proxy-raw-client';
import { chunked, header, rawResponse, startRawOrigin, type RawOrigin, type RouteAnswer } from '../helpers/raw-origin';

const HOST = 'api.example.test';
const CAP = 64 * 1024;
const MARK = '[REDACTED:up]';

let s: Stack;
let origin: RawOrigin;
const secret = makeCanary('UPSTRM');
const received: Buffer[] = [];

const echo = (auth: string): Buffer => Buffer.from(JSON.stringify({ 'you sent': auth }));

function route(target: string, auth: string): RouteAnswer {
  const e = echo(auth);
  const plain = (b: Buffer, extra: [string, string][] = []): Buffer =>
    rawResponse(200, [['content-type', 'application/json'], ['content-length', String(b.length)], ...extra], b);
  // A 200 of `b` with its length, read once the request is.
  const declared = (b: Buffer, type: string, extra: [string, string][] = []): RouteAnswer => ({
    read: 'declared',
    respond: () => rawResponse(200, [['content-type', type], ...extra, ['content-length', String(b.length)]], b),
  });
  switch (target) {
    case '/ce-proto':
      // a content-coding name that is a property of every JS object
      return { read: 'declared', respond: () => plain(e, [['content-encoding', 'constructor']]) };
    case '/te-proto':
      return {
        read: 'declared',
        respond: () =>
          rawResponse(
            200,
            [
              ['content-type', 'application/json'],
              ['transfer-encoding', 'constructor, chunked'],
            ],
            chunked(e, [7]),
          ),
      };
    case '/ce-two-lines':
      return declared(zlib.brotliCompressSync(zlib.gzipSync(e)), 'application/json', [
        ['content-encoding', 'gzip'],
        ['content-encoding', 'br'],
      ]);
    case '/gzip-members':
      return declared(Buffer.concat([zlib.gzipSync(Buffer.from('{"a":1}')), zlib.gzipSync(e)]), 'application/json', [
        ['content-encoding', 'gzip'],
      ]);
    case '/xpe-spoof':
      return {
        read: 'declared',
        respond: () =>
          rawResponse(
            403,
            [
              ['x-postern-error', 'denied_by_user'],
              ['content-length', '2'],
            ],
            '{}',
          ),
      };
    case '/102':
      return {
        read: 'declared',
        respond: () =>
          Buffer.concat([
            Buffer.from(`HTTP/1.1 102 Processing\r\nX-Echo: ${auth}\r\n\r\n`),
            plain(Buffer.from('{"final":true}'), [['x-final', 'yes']]),
          ]),
      };
    case '/cap-raw':
      return declared(
        Buffer.concat([Buffer.alloc(CAP - 10, 'a'), Buffer.from(auth), Buffer.alloc(2000, 'z')]),
        'text/plain',
      );
    case '/cap-b64':
      return declared(
        Buffer.concat([
          Buffer.alloc(CAP - 24, '-'),
          Buffer.from(Buffer.from(auth).toString('base64')),
          Buffer.alloc(2000, '-'),
        ]),
        'text/plain',
      );
    case '/early':
      // answers before reading the request body, and closes
      return { read: 'none', close: true, respond: () => plain(e) };
    case '/bad-header-char':
      return {
        read: 'declared',
        respond: () =>
          Buffer.from(`HTTP/1.1 200 OK\r\nX-Bad: \x01 ${auth} ${secret}\r\ncontent-length: 2\r\n\r\n{}`, 'latin1'),
      };
    case '/bad-status':
      return { read: 'declared', respond: () => Buffer.from(`HTTP/1.1 2x0 ${auth}\r\ncontent-length: 2\r\n\r\n{}`) };
    case '/header-overflow':
      return {
        read: 'declared',
        respond: () =>
          Buffer.from(
            `HTTP/1.1 200 OK\r\nX-Big: ${auth} ${'x'.repeat(80 * 1024)} ${auth}\r\ncontent-length: 2\r\n\r\n{}`,
          ),
      };
    case '/trailer-cookie':
      return {
        read: 'declared',
        respond: () =>
          rawResponse(
            200,
            [
              ['content-type', 'application/json'],
              ['transfer-encoding', 'chunked'],
              ['trailer', 'set-cookie'],
            ],
            Buffer.concat([
              chunked(Buffer.from('{"ok":true}'), [100]).subarray(0, -2),
              Buffer.from('Set-Cookie: sid=TRAILERCOOKIE\r\n\r\n'),
            ]),
          ),
      };
    case '/head-te': {
      // a HEAD answered with a chunked body holding a whole forged response
      const forged = plain(Buffer.from(JSON.stringify({ own: false, 'you sent': auth })));
      return {
        read: 'declared',
        respond: () =>
          Buffer.concat([
            Buffer.from('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n'),
            chunked(forged, [forged.length]),
          ]),
      };
    }
    case '/own':
      return { read: 'declared', respond: () => plain(Buffer.from('{"own":true}')) };
  }
  return { read: 'declared', respond: () => rawResponse(404, [['content-length', '0']]) };
}

t.before(async () => {
  s = await startStack({ httpConfig: `max_response_body = "${CAP / 1024}KiB"\ntimeout = "10s"` });
  origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, (head) =>
    route(head.target, header(head, 'authorization') ?? ''),
  );
  s.addCredential(
    'up',
    `name = "up"\nkind = "http"\nenv = ["UP_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${origin.port}]\nmethods = ["GET", "POST", "HEAD"]\npaths = ["/*"]\n`,
    secret,
  );
  await s.approver();
});
t.teardown(async () => {
  await origin.close();
  await s.close();
});

const get = (id: number, path: string): Wire => ({
  id,
  connect: `${HOST}:${origin.port}`,
  head: `GET ${path} HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\nAuthorization: Bearer @@PH:UP_TOKEN@@\r\n\r\n`,
});

const PATHS = [
  '/ce-proto',
  '/te-proto',
  '/ce-two-lines',
  '/gzip-members',
  '/xpe-spoof',
  '/102',
  '/cap-raw',
  '/cap-b64',
  '/bad-header-char',
  '/bad-status',
  '/header-overflow',
  '/trailer-cookie',
];

t.test('hostile answers, each on its own tunnel', async (t) => {
  const body = Buffer.alloc(200 * 1024, 'b');
  const wires = PATHS.map((p, i) => get(i + 1, p));
  wires.push({
    id: 100,
    connect: `${HOST}:${origin.port}`,
    head: `POST /early HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\nAuthorization: Bearer @@PH:UP_TOKEN@@\r\nContent-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n`,
    body: body.toString('base64'),
  });
  const run = await sendRaw(s.h, wires);
  received.push(run.stdout, Buffer.from(run.stderr));
  t.equal(run.code, 0, run.stderr);
  const ans = (path: string) => {
    const id = path === '/early' ? 100 : PATHS.indexOf(path) + 1;
    const a = run.answers.get(id);
    const raw = Buffer.from(a?.raw ?? '', 'base64');
    received.push(raw);
    return { a, raw, p: raw.length > 0 && raw.includes('\r\n\r\n') ? parseRaw(raw) : null };
  };
  const refusal = (t: Test, path: string, code: string): void => {
    const { a, raw, p } = ans(path);
    t.same(exposures(raw, secret), [], `${path}: no form of the secret`);
    t.equal(
      p?.status,
      502,
      `${path}: 502 refusal before the head (got ${raw.subarray(0, 200).toString('latin1')}; closed=${a?.closed})`,
    );
    t.equal(p?.headers['x-postern-error'], code, `${path}: x-postern-error ${code}`);
  };

  await t.test(
    'Content-Encoding "constructor": an unknown coding is refused before the head (SPEC §6.2/docs step 3)',
    async (t) => refusal(t, '/ce-proto', 'upstream_error'),
  );
  await t.test('Transfer-Encoding "constructor, chunked": refused before the head', async (t) =>
    refusal(t, '/te-proto', 'upstream_error'),
  );

  await t.test('Content-Encoding on two header lines (gzip then br): both undone, then redacted', async (t) => {
    const { raw, p } = ans('/ce-two-lines');
    t.same(exposures(raw, secret), [], 'no form of the secret');
    t.equal(p?.status, 200);
    t.equal(p?.body, JSON.stringify({ 'you sent': MARK }), 'decoded and redacted');
    t.notOk(p?.headers['content-encoding'], 'no content-encoding left');
  });

  await t.test('two gzip members, the second carrying the echo', async (t) => {
    const { raw, p } = ans('/gzip-members');
    t.same(exposures(raw, secret), [], 'no form of the secret');
    t.equal(p?.status, 200);
    t.notOk(p?.bodyBytes.includes(Buffer.from([0x1f, 0x8b])), 'no undecoded gzip member passed on');
  });

  await t.test("an upstream's x-postern-error is not passed on", async (t) => {
    const { p } = ans('/xpe-spoof');
    t.equal(p?.status, 403);
    t.notOk(p?.headers['x-postern-error'], 'no spoofed refusal header');
  });

  await t.test('a 102 whose header echoes the secret, then the final 200', async (t) => {
    const { raw, p } = ans('/102');
    t.same(exposures(raw, secret), [], 'no form of the secret');
    t.ok(p?.status === 200 || p?.status === 502, `final or refusal: ${raw.subarray(0, 120).toString('latin1')}`);
    if (p?.status === 502) t.equal(p.headers['x-postern-error'], 'upstream_error');
    else t.notMatch(raw.toString('latin1'), /\b102\b|x-echo/i, 'nothing of the 102');
  });

  await t.test('Bearer <secret> straddling max_response_body: replaced whole, no prefix kept', async (t) => {
    const { raw, p } = ans('/cap-raw');
    t.same(exposures(raw, secret), [], 'no form of the secret');
    t.ok((p?.bodyBytes.length ?? 0) <= CAP, 'at most the cap');
    t.notOk(raw.includes(Buffer.from('Bearer ' + secret.slice(0, 3))), 'no byte of the secret before the cut');
  });

  await t.test('base64(Bearer <secret>) straddling max_response_body: no decodable secret bytes kept', async (t) => {
    const { raw, p } = ans('/cap-b64');
    const b64 = Buffer.from('Bearer ' + secret).toString('base64');
    t.same(exposures(raw, secret), [], 'no form of the secret');
    t.ok((p?.bodyBytes.length ?? 0) <= CAP, 'at most the cap');
    t.notOk(
      raw.includes(Buffer.from(b64.slice(0, 20))),
      'the 20 base64 chars before the cut (15 bytes, 8 of the secret) are not passed on',
    );
  });

  for (const path of ['/bad-header-char', '/bad-status', '/header-overflow'])
    await t.test(`${path}: a parser error on a head carrying the secret`, async (t) =>
      refusal(t, path, 'upstream_error'),
    );

  await t.test('Set-Cookie as a chunked trailer (pass_set_cookie off) is not passed on', async (t) => {
    const { raw, p } = ans('/trailer-cookie');
    t.equal(p?.status, 200);
    t.notOk(raw.includes(Buffer.from('TRAILERCOOKIE')), 'no cookie in any byte');
  });

  await t.test('an origin that answers before reading the request body', async (t) => {
    const { raw, p, a } = ans('/early');
    t.same(exposures(raw, secret), [], 'no form of the secret');
    t.ok(p !== null, `an HTTP answer (${a?.error ?? ''})`);
    if (p?.status === 200) t.equal(p.body, JSON.stringify({ 'you sent': MARK }));
    else t.equal(p?.headers['x-postern-error'], 'upstream_error', `refusal: ${p?.head}`);
  });
});

t.test(
  'HEAD answered with a chunked body holding a forged response, then a GET on the same client connection',
  async (t) => {
    const ph = 'Authorization: Bearer @@PH:UP_TOKEN@@\r\n';
    const run = await sendKeptAlive(s.h, `${HOST}:${origin.port}`, [
      { id: 'head', head: `HEAD /head-te HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n${ph}\r\n` },
      { id: 'get', head: `GET /own HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n${ph}\r\n` },
      { id: 'get2', head: `GET /own HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n${ph}\r\n` },
    ]);
    received.push(run.stdout, Buffer.from(run.stderr));
    t.equal(run.code, 0, run.stderr);
    const [h, g, g2] = run.answers;
    t.equal(h?.status, 200, 'the HEAD answered');
    t.equal(Buffer.from(h?.stray ?? '', 'base64').length, 0, 'no bytes after the HEAD answer');
    for (const [name, a] of [
      ['get', g],
      ['get2', g2],
    ] as const) {
      t.equal(a?.status, 200, `${name}: 200`);
      t.equal(
        Buffer.from(a?.body ?? '', 'base64').toString(),
        '{"own":true}',
        `${name}: its own body, not the forgery`,
      );
    }
    for (const a of run.answers) received.push(Buffer.from(a.raw ?? '', 'base64'));
  },
);

t.test(
  'POST /v1/http: Content-Encoding "constructor" and Transfer-Encoding "constructor, chunked" are 502 upstream_error, executed',
  async (t) => {
    for (const path of ['/ce-proto', '/te-proto']) {
      const r = await s.request({ credential: 'up', method: 'GET', url: `https://${HOST}:${origin.port}${path}` });
      received.push(Buffer.from(r.text));
      t.same(exposures(r.text, secret), [], `${path}: no form of the secret`);
      t.equal(r.status, 502, `${path}: ${r.text.slice(0, 300)}`);
      const e = (r.json as { error?: { code?: string; maybe_executed?: boolean; message?: string } }).error;
      t.equal(e?.code, 'upstream_error', `${path}: code`);
      t.equal(e?.maybe_executed, true, `${path}: maybe_executed`);
      t.notMatch(
        e?.message ?? '',
        /TypeError/,
        `${path}: refused as a coding postern cannot undo, not an internal TypeError`,
      );
    }
    const log = s.d.logs();
    t.notMatch(
      log,
      /TypeError|ERR_INVALID_ARG/,
      `no internal error in the daemon log: ${log
        .split('\n')
        .filter((l) => /TypeError|ERR_INVALID|constructor/.test(l))
        .join('\n')
        .slice(0, 600)}`,
    );
  },
);

t.test('no form of the secret in what the client received, the daemon log or the journal', async (t) => {
  await s.d.stop();
  received.forEach((b, i) => t.same(exposures(b, secret), [], `client bytes ${i}`));
  t.same(exposures(s.d.logs(), secret), [], 'daemon log');
  t.same(exposures(await journalText(s.h), secret), [], 'journal');
});
