// Heads that the relay (cli/run/request-head.ts) and the daemon (node's
// llhttp on the agent socket) might read differently, sent from INSIDE CMD
// with the run's token. Each row FAILS when a defect is present.
import t from 'tap';
import { startRelayStack, cmdRaw, RelayStack } from '../helpers/relay-cmd';
import { auditList } from '../helpers/stack';

const journal = (p: RelayStack): string => JSON.stringify(auditList(p.s));

function statusOf(got: string): string {
  return got.split('\r\n')[0] ?? '';
}

t.test('relay head parsing', async (t) => {
  const p = await startRelayStack();
  t.teardown(() => p.close());
  const P = p.s.up.port;
  const abs = (path: string): string => `http://api.example.test:${P}${path}`;

  // Rows: a malformed head is refused by the relay itself with 400 (407 for
  // credentials), a JSON body and x-postern-error, and nothing reaches the
  // daemon (checked on the journal below by the marker paths).
  const refused: [string, string[], RegExp, number?][] = [
    [
      'bare LF line ends',
      [`GET ${abs('/m-barelf')} HTTP/1.1\nHost: a\nProxy-Authorization: @@AUTH@@\n\n`],
      /^HTTP\/1.1 400 /,
      15000,
    ],
    [
      'bare LF inside a header line',
      [
        `GET ${abs('/m-lfin')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\nX: a\nTransfer-Encoding: chunked\r\n\r\n`,
      ],
      /^HTTP\/1.1 400 /,
    ],
    [
      'bare CR inside a header line',
      [`GET ${abs('/m-crin')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\nX: a\rContent-Length: 5\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
    [
      'obs-fold',
      [
        `GET ${abs('/m-fold')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\nX: a\r\n Transfer-Encoding: chunked\r\n\r\n`,
      ],
      /^HTTP\/1.1 400 /,
    ],
    [
      'space before colon',
      [`GET ${abs('/m-spc')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization : @@AUTH@@\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
    [
      'NUL in a value',
      [`GET ${abs('/m-nul')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\nX: a\0b\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
    [
      'duplicate Proxy-Authorization',
      [
        `GET ${abs('/m-dup')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`,
      ],
      /^HTTP\/1.1 407 /,
    ],
    [
      'head over 16 KiB',
      [`GET ${abs('/m-big')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\nX: ${'a'.repeat(17000)}\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
    [
      'lower-case method',
      [`get ${abs('/m-lower')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
    [
      'HTTP/2.0 version',
      [`GET ${abs('/m-v2')} HTTP/2.0\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
    [
      'two spaces in request line',
      [`GET  ${abs('/m-2sp')} HTTP/1.1\r\nHost: a\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`],
      /^HTTP\/1.1 400 /,
    ],
  ];
  for (const [name, chunks, want, ms] of refused) {
    const r = await cmdRaw(p, chunks, { ms: ms ?? 5000 });
    t.match(statusOf(r.got), want, `${name}: refused (${JSON.stringify(r.got.slice(0, 200))})`);
    t.match(r.got, /\r\nx-postern-error: [a-z_]+\r\n/, `${name}: x-postern-error given`);
  }

  // Row "1-byte writes": a valid CONNECT head split into single bytes is
  // served like a whole one.
  const connectHead = `CONNECT api.example.test:${P} HTTP/1.1\r\nHost: api.example.test:${P}\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`;
  const oneByte = await p.inCmd<string>(`
    const proxy = new URL(env.HTTPS_PROXY);
    const auth = 'Basic ' + Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
    const head = ${JSON.stringify(connectHead)}.split('@@AUTH@@').join(auth);
    return await new Promise((resolve) => {
      const c = net.connect({ port: Number(proxy.port), host: '127.0.0.1', noDelay: true });
      let got = '';
      const timer = setTimeout(() => { c.destroy(); resolve('timeout ' + got); }, 20000);
      c.on('data', (d) => { got += d; if (got.includes('\\r\\n\\r\\n')) { clearTimeout(timer); c.destroy(); resolve(got); } });
      c.on('error', (e) => { clearTimeout(timer); resolve('error ' + e); });
      c.on('connect', async () => { for (const ch of head) { c.write(ch); await new Promise((r) => setTimeout(r, 3)); } });
    });
  `);
  t.match(oneByte, /^HTTP\/1.1 200 /, `a head in 1-byte writes is served (${oneByte.slice(0, 200)})`);

  // Row "pipelined absolute-form request": the relay checks and rewrites
  // only the first head and adds `connection: close` "so that the next
  // request comes on a new connection, whose head is checked again"
  // (request-head.ts). A second request pipelined behind the first must not
  // be acted on by the daemon (it carries no token, and a forged
  // postern-run-client).
  const pipelined = await cmdRaw(
    p,
    [
      `GET ${abs('/p-first')} HTTP/1.1\r\nHost: api.example.test:${P}\r\nProxy-Authorization: @@AUTH@@\r\n\r\n` +
        `GET ${abs('/p-second-smuggled')} HTTP/1.1\r\nHost: api.example.test:${P}\r\npostern-run-client: 1\r\n\r\n`,
    ],
    { ms: 8000 },
  );
  t.comment(`pipelined answer: ${JSON.stringify(pipelined.got.slice(0, 800))}`);

  // Row "header-count overflow": with more than 2000 header lines (node's
  // http.Server maxHeadersCount), the daemon drops the lines past 2000, so
  // the relay's appended `postern-run-client` and `connection: close` are
  // lost, and the connection is kept alive; the pipelined second request is
  // then served without any check by the relay.
  const filler = Array.from({ length: 2100 }, (_, i) => `a${i % 10}:b\r\n`).join('');
  const overflow = await cmdRaw(
    p,
    [
      `GET ${abs('/o-first')} HTTP/1.1\r\nHost: api.example.test:${P}\r\nProxy-Authorization: @@AUTH@@\r\n${filler}\r\n` +
        `GET ${abs('/o-second-smuggled')} HTTP/1.1\r\nHost: api.example.test:${P}\r\npostern-run-client: 1\r\n\r\n`,
    ],
    { ms: 8000 },
  );
  t.comment(`overflow answer: ${JSON.stringify(overflow.got.slice(0, 1200))}`);

  // Row "head that grows past the daemon's limit": 16 KiB of `a:b` lines
  // (no space) passes the relay's 16 KiB bound but grows when the relay
  // rewrites each as `a: b`. Expected: a refusal with x-postern-error.
  const many = Array.from({ length: 3150 }, () => `a:b\r\n`).join('');
  const grown = await cmdRaw(
    p,
    [`GET ${abs('/g-grown')} HTTP/1.1\r\nHost: api.example.test:${P}\r\nProxy-Authorization: @@AUTH@@\r\n${many}\r\n`],
    { ms: 8000 },
  );
  t.comment(`grown head (${many.length} bytes of lines) answer: ${JSON.stringify(grown.got.slice(0, 600))}`);
  t.match(grown.got, /^HTTP\/1.1 \d{3} /, 'the grown head gets an HTTP answer');
  t.match(grown.got, /\r\nx-postern-error: [a-z_]+\r\n/i, 'the grown head answer names its x-postern-error');

  await new Promise((r) => setTimeout(r, 1500));
  const j = journal(p);
  for (const m of [
    'm-barelf',
    'm-lfin',
    'm-crin',
    'm-fold',
    'm-spc',
    'm-nul',
    'm-dup',
    'm-big',
    'm-lower',
    'm-v2',
    'm-2sp',
  ])
    t.notOk(j.includes(m), `refused head ${m} never reached the daemon`);
  t.ok(j.includes('p-first'), 'the first pipelined request reached the daemon (control)');
  t.notOk(j.includes('p-second-smuggled'), 'the request pipelined behind the first is not acted on by the daemon');
  // (the daemon refuses the 2100-header head as bad_request "headers has
  // 1022 headers; send at most 100"; that refusal is journaled without a path)
  t.notOk(
    j.includes('o-second-smuggled'),
    'the request pipelined behind a 2100-header head is not acted on by the daemon',
  );
  t.notOk(j.includes('"pid":1,') && j.includes('smuggled'), 'no forged run client');
  t.comment(
    auditList(p.s)
      .filter((e) => JSON.stringify(e).includes('smuggled') || JSON.stringify(e).includes('-first'))
      .map((e) => JSON.stringify(e).slice(0, 700))
      .join('\n'),
  );
});
