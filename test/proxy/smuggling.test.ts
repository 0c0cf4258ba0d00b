// Smuggling, pipelining and framing confusion inside a
// terminated CONNECT tunnel and on absolute-form requests (SPEC §11, §6.2,
// §6.3, docs/proxy.md §5-§6). A real daemon, a real `postern run`, a raw
// client under it, a raw TLS origin (and a plain one) that records every
// byte. Each row asserts the answers in order, what reached the origin, and
// that no secret went anywhere but its own credential's host.
// Found and fixed with these rows: a request pipelined behind an HTTP/1.0
// keep-alive one (whose answer closes) was sent upstream and never answered;
// `transfer-encoding: gzip, chunked` reached the origin de-chunked but still
// gzip-coded, unsaid; a request pipelined after an upgrade request was held
// unanswered; no `host` got Node's bare 400, unjournaled.
import t, { type Test } from 'tap';
import { startStack } from '../helpers/stack';
import { startRawOrigin, rawResponse, header, type RawOrigin } from '../helpers/raw-origin';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { runCases, parseResponses, type Case, type Got, type Resp } from '../helpers/proxy-sequence-client';

const HOST = 'api.example.test';
const OTHER = 'other.example.test';
const PLAINH = 'plain.example.test';

const seenRoute = () => ({
  read: 'declared' as const,
  respond: (req: { method: string; target: string }) => {
    const body = `seen:${req.method} ${req.target}`;
    return rawResponse(200, [['content-length', String(Buffer.byteLength(body))]], body);
  },
});

interface Want {
  status: number;
  code?: string;
  body?: string;
}

t.test('smuggling and framing through the proxy front door', async (t) => {
  const s = await startStack({
    names: [HOST, OTHER],
    records: { [HOST]: { A: ['127.0.0.1'] }, [OTHER]: { A: ['127.0.0.1'] }, [PLAINH]: { A: ['127.0.0.1'] } },
  });
  t.teardown(() => s.close());
  const origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, seenRoute);
  t.teardown(() => origin.close());
  const plain = await startRawOrigin({ honourClose: true }, seenRoute);
  t.teardown(() => plain.close());
  const OP = origin.port;
  const PP = plain.port;
  const A = `${HOST}:${OP}`;
  const O = `${OTHER}:${OP}`;
  const apiSecret = makeCanary('SMUGAPI');
  const otherSecret = makeCanary('SMUGOTHER');
  const plainSecret = makeCanary('SMUGPLAIN');
  const cred = (name: string, host: string, ports: number[], scheme: string): string =>
    `name = "${name}"\nkind = "http"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${host}"\nschemes = ["${scheme}"]\nports = [${ports.join(', ')}]\nmethods = ["GET", "POST"]\n`;
  s.addCredential('api', cred('api', HOST, [OP, PP], 'https'), apiSecret);
  s.addCredential('other', cred('other', OTHER, [OP], 'https'), otherSecret);
  s.addCredential('plain', cred('plain', PLAINH, [PP], 'http'), plainSecret);
  await s.approver();

  const PH = '@@PH:API_TOKEN@@';
  const AUTH = `Authorization: Bearer ${PH}\r\n`;
  const req = (method: string, path: string, extra = '', host: string | null = A, version = '1.1'): string =>
    `${method} ${path} HTTP/${version}\r\n${host === null ? '' : `Host: ${host}\r\n`}${extra}\r\n`;
  const get = (path: string, extra = '', host: string | null = A, version = '1.1'): string =>
    req('GET', path, extra, host, version);
  // The length on the wire once @@PH:…@@ is the placeholder (postern-<name>-<16 hex>).
  const wireLen = (text: string): number =>
    Buffer.byteLength(
      text.replace(
        /@@PH:([A-Z_]+)@@/g,
        (_m, v: string) => `postern-${v.replace(/_TOKEN$/, '').toLowerCase()}-0123456789abcdef`,
      ),
      'latin1',
    );
  const one = (id: string, data: string, more: Partial<Case> = {}): Case => ({
    id,
    connect: A,
    writes: [{ data }],
    ...more,
  });

  const cases: Case[] = [];
  const checks: [string, (t: Test, g: Got | undefined, r: Resp[]) => void][] = [];
  const row = (c: Case, check: (t: Test, g: Got | undefined, r: Resp[]) => void): void => {
    cases.push(c);
    checks.push([c.id, check]);
  };
  const atOrigin = (o: RawOrigin, prefix: string) => o.requests.filter((q) => q.target.startsWith(prefix));
  const expectSeq = (t: Test, g: Got | undefined, r: Resp[], wants: Want[]): void => {
    t.notOk(g?.error, `no client error (${g?.error})`);
    t.equal(r.length, wants.length, `answers: ${r.map((x) => `${x.status} ${x.body.slice(0, 120)}`).join(' | ')}`);
    wants.forEach((w, i) => {
      const x = r[i];
      t.equal(x?.status, w.status, `answer ${i + 1} status (${x?.head?.split('\r\n')[0]} ${x?.body.slice(0, 200)})`);
      if (w.code) {
        t.equal(x?.headers['x-postern-error'], w.code, `answer ${i + 1} x-postern-error`);
        let e: { code?: string; audit_seq?: unknown } | undefined;
        try {
          e = (JSON.parse(x?.body ?? '') as { error: typeof e }).error;
        } catch {
          e = undefined;
        }
        t.equal(e?.code, w.code, `answer ${i + 1} JSON code`);
        t.type(e?.audit_seq, 'number', `answer ${i + 1} journaled (audit_seq)`);
      }
      if (w.body !== undefined) t.equal(x?.body, w.body, `answer ${i + 1} is its own request's`);
    });
  };
  const refused = (id: string, data: string, code = 'bad_request', status = 400, more: Partial<Case> = {}) =>
    row(one(id, data, more), (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status, code }]);
      t.equal(atOrigin(origin, `/${id}`).length, 0, 'nothing reached the origin');
    });
  const served = (id: string, data: string, more: Partial<Case> = {}, path = `/${id}`) =>
    row(one(id, data, more), (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 200, body: `seen:GET ${path}` }]);
    });

  // ---- Pipelining in one TLS write.
  row(
    one('pipe-mixed', get('/pipe-mixed/a') + get('/pipe-mixed/b', AUTH) + get('/pipe-mixed/c', AUTH, O)),
    (t, g, r) => {
      expectSeq(t, g, r, [
        { status: 200, body: 'seen:GET /pipe-mixed/a' },
        { status: 200, body: 'seen:GET /pipe-mixed/b' },
        { status: 400, code: 'bad_request' },
      ]);
      const seen = atOrigin(origin, '/pipe-mixed');
      t.same(
        seen.map((q) => q.target),
        ['/pipe-mixed/a', '/pipe-mixed/b'],
        'the origin saw a and b only',
      );
      t.equal(header(seen[0]!, 'authorization'), undefined, 'a went without a secret');
      t.equal(header(seen[1]!, 'authorization'), `Bearer ${apiSecret}`, 'b with its own');
    },
  );
  row(
    one(
      'pipe-connect',
      get('/pipe-connect/a', AUTH) + `CONNECT ${O} HTTP/1.1\r\nHost: ${O}\r\n\r\n` + get('/pipe-connect/after', AUTH),
    ),
    (t, g, r) => {
      expectSeq(t, g, r, [
        { status: 200, body: 'seen:GET /pipe-connect/a' },
        { status: 400, code: 'bad_request' },
      ]);
      t.ok(g?.closed, 'closed after the CONNECT refusal');
      t.same(
        atOrigin(origin, '/pipe-connect').map((q) => q.target),
        ['/pipe-connect/a'],
        'nothing after the CONNECT was sent',
      );
    },
  );
  row(
    one('pipe-close', get('/pipe-close/a', AUTH + 'Connection: close\r\n') + get('/pipe-close/after', AUTH)),
    (t, g, r) => {
      t.equal(r[0]?.status, 200, 'the first is answered');
      const sent = atOrigin(origin, '/pipe-close/after').length;
      t.ok(
        sent === 0 || r.length === 2,
        `a request after "Connection: close" was sent upstream ${sent} time(s), but the client got ${r.length} answer(s) (closed: ${g?.closed})`,
      );
    },
  );
  row(one('pipe-http10', get('/pipe-http10/a', AUTH, A, '1.0') + get('/pipe-http10/after', AUTH)), (t, g, r) => {
    t.equal(r[0]?.status, 200, 'the first is answered');
    const sent = atOrigin(origin, '/pipe-http10/after').length;
    t.ok(
      sent === 0 || r.length === 2,
      `a request after an HTTP/1.0 request (no keep-alive) was sent upstream ${sent} time(s), but the client got ${r.length} answer(s) (closed: ${g?.closed})`,
    );
  });
  // HTTP/1.0 with keep-alive: the streamed answer cannot be chunked for a
  // 1.0 client, so the connection closes after it; a request pipelined
  // behind it must then not be sent upstream unanswered.
  for (const [id, second] of [
    ['pipe-10ka-post', req('POST', '/pipe-10ka-post/after', AUTH + 'Content-Length: 3\r\n') + 'abc'],
    ['pipe-10ka-get', get('/pipe-10ka-get/after', AUTH)],
  ] as const)
    row(one(id, get(`/${id}/a`, AUTH + 'Connection: keep-alive\r\n', A, '1.0') + second), (t, g, r) => {
      t.equal(r[0]?.status, 200, 'the first is answered');
      const sent = atOrigin(origin, `/${id}/after`).length;
      t.ok(
        sent === 0 || r.length === 2,
        `a request pipelined after an HTTP/1.0 keep-alive request was sent upstream ${sent} time(s), but the client got ${r.length} answer(s) (closed: ${g?.closed}): ${r.map((x) => x.head.split('\r\n').join(' / ')).join(' | ')}`,
      );
    });
  row(
    one(
      'pipe-upgrade',
      get(
        '/pipe-upgrade/a',
        AUTH +
          'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n',
      ) + get('/pipe-upgrade/after', AUTH),
    ),
    (t, g, r) => {
      // postern never upgrades, and nothing after an upgrade request is
      // read: its answer closes the connection, and what followed is not
      // run (the client sends it again on a new connection).
      expectSeq(t, g, r, [{ status: 200, body: 'seen:GET /pipe-upgrade/a' }]);
      t.ok(g?.closed, 'the connection closes after the answer');
      t.equal(atOrigin(origin, '/pipe-upgrade/after').length, 0, 'the request after it never ran');
      t.comment(
        `closed ${g?.closed}; /after at origin: ${atOrigin(origin, '/pipe-upgrade/after').length}; raw: ${JSON.stringify(
          Buffer.from(g?.raw ?? '', 'base64')
            .toString('latin1')
            .slice(0, 400),
        )}`,
      );
      const a = atOrigin(origin, '/pipe-upgrade/a')[0];
      t.equal(a && header(a, 'upgrade'), undefined, 'upgrade removed');
    },
  );
  row(
    one(
      'pipe-h2c',
      get(
        '/pipe-h2c/a',
        AUTH + 'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n',
      ) + get('/pipe-h2c/after', AUTH),
    ),
    (t, g, r) => {
      // postern never upgrades, and nothing after an upgrade request is
      // read: its answer closes the connection, and what followed is not
      // run (the client sends it again on a new connection).
      expectSeq(t, g, r, [{ status: 200, body: 'seen:GET /pipe-h2c/a' }]);
      t.ok(g?.closed, 'the connection closes after the answer');
      t.equal(atOrigin(origin, '/pipe-h2c/after').length, 0, 'the request after it never ran');
      t.comment(`closed ${g?.closed}; /after at origin: ${atOrigin(origin, '/pipe-h2c/after').length}`);
      const a = atOrigin(origin, '/pipe-h2c/a')[0];
      t.equal(a && header(a, 'http2-settings'), undefined, 'the header Connection lists is removed');
    },
  );
  // A refused request whose body is a whole request with the placeholder in
  // its slot, then an ordinary request: the body is never a request.
  {
    const smuggled = get('/cl-body/smuggled', AUTH);
    row(
      one(
        'cl-body',
        req('GET', '/cl-body/a', `Content-Length: ${wireLen(smuggled)}\r\n`) + smuggled + get('/cl-body/after', AUTH),
      ),
      (t, g, r) => {
        expectSeq(t, g, r, [
          { status: 400, code: 'bad_request' },
          { status: 200, body: 'seen:GET /cl-body/after' },
        ]);
        t.same(
          atOrigin(origin, '/cl-body/').map((q) => q.target),
          ['/cl-body/after'],
          'only the after request reached the origin',
        );
      },
    );
    row(
      one(
        'cl-body-hostbad',
        req('POST', '/cl-body-hostbad/a', `Content-Length: ${wireLen(smuggled)}\r\n` + AUTH, O) +
          smuggled +
          get('/cl-body-hostbad/after', AUTH),
      ),
      (t, g, r) => {
        expectSeq(t, g, r, [
          { status: 400, code: 'bad_request' },
          { status: 200, body: 'seen:GET /cl-body-hostbad/after' },
        ]);
        t.same(
          atOrigin(origin, '/cl-body')
            .filter((q) => q.target.startsWith('/cl-body-hostbad') || q.target === '/cl-body/smuggled')
            .map((q) => q.target),
          ['/cl-body-hostbad/after'],
        );
      },
    );
    row(
      one(
        'expect-hostbad',
        req('POST', '/expect-hostbad/a', `Expect: 100-continue\r\nContent-Length: ${wireLen(smuggled)}\r\n` + AUTH, O) +
          smuggled +
          get('/expect-hostbad/after', AUTH),
      ),
      (t, _g, r) => {
        t.equal(r[0]?.status, 400, `refused first (${r.map((x) => x.status).join(',')})`);
        t.equal(r[0]?.headers['x-postern-error'], 'bad_request');
        t.same(atOrigin(origin, '/cl-body/smuggled').length, 0, 'the body never became a request');
        const sent = atOrigin(origin, '/expect-hostbad/after').length;
        t.ok(
          sent === 0 || (r[1]?.status === 200 && r[1]?.body === 'seen:GET /expect-hostbad/after'),
          'the after request is answered if sent',
        );
      },
    );
  }

  // ---- Placeholders of another credential, SNI and Host.
  refused('other-cred', get('/other-cred', 'Authorization: Bearer @@PH:OTHER_TOKEN@@\r\n'), 'denied_policy', 403);
  refused('other-cred-rev', get('/other-cred-rev', AUTH, O), 'denied_policy', 403, { connect: O });
  served('host-upper', get('/host-upper', AUTH, `API.EXAMPLE.TEST:${OP}`));
  served('host-dot', get('/host-dot', AUTH, `api.example.test.:${OP}`));
  refused('host-noport', get('/host-noport', AUTH, HOST));
  refused('host-userinfo', get('/host-userinfo', AUTH, `x@${A}`));
  refused('host-pct', get('/host-pct', AUTH, `api%2Eexample.test:${OP}`));
  refused('host-v6', get('/host-v6', AUTH, `[::1]:${OP}`));
  refused('host-other', get('/host-other', AUTH, O));
  refused('host-two', get('/host-two', AUTH + `Host: ${O}\r\n`));
  refused('host-list', get('/host-list', AUTH, `${A}, ${O}`));
  refused('host-missing', get('/host-missing', AUTH, null));
  refused('host-empty', get('/host-empty', AUTH, ''));
  refused('host-otherport', get('/host-otherport', AUTH, `${HOST}:${PP}`));
  // The absolute form of the tunnel's own origin is its path (RFC 9112
  // §3.2.2; docs/proxy.md); another origin or scheme is refused.
  row(one('abs-in-tunnel', get(`https://${A}/abs-in-tunnel`, AUTH)), (t, g, r) => {
    expectSeq(t, g, r, [{ status: 200, body: 'seen:GET /abs-in-tunnel' }]);
    const q = atOrigin(origin, '/abs-in-tunnel')[0];
    t.equal(q && header(q, 'host'), A, 'sent to the CONNECT target');
  });
  refused('abs-other-in-tunnel', get(`https://${O}/abs-other-in-tunnel`, AUTH));
  refused('abs-http-in-tunnel', get(`http://${A}/abs-http-in-tunnel`, AUTH));
  refused('sni-api-host-other', get('/sni-api-host-other', AUTH, O), 'bad_request', 400, { servername: HOST });
  row(one('sni-other-host-api', get('/sni-other-host-api', AUTH), { servername: 'evil.test' }), (t, g, r) => {
    // The tunnel's target, not the SNI, is what the request reaches.
    expectSeq(t, g, r, [{ status: 200, body: 'seen:GET /sni-other-host-api' }]);
    const q = atOrigin(origin, '/sni-other-host-api')[0];
    t.equal(q && header(q, 'host'), A, 'sent to the CONNECT target');
  });

  // ---- Framing a parser may read two ways: refused before anything is sent.
  const post = (id: string, framing: string, body: string): string => req('POST', `/${id}`, AUTH + framing) + body;
  const CH = '3\r\nabc\r\n0\r\n\r\n';
  refused('te-obsfold', post('te-obsfold', 'Transfer-Encoding:\r\n chunked\r\n', CH));
  refused('te-obsfold2', post('te-obsfold2', 'Transfer-Encoding: identity\r\n chunked\r\n', CH));
  refused('te-twice', post('te-twice', 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', CH));
  refused(
    'te-split-notlast',
    post('te-split-notlast', 'Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n', CH),
  );
  refused('te-gzip-chunked', post('te-gzip-chunked', 'Transfer-Encoding: gzip, chunked\r\n', CH));
  refused('te-xchunked', post('te-xchunked', 'Transfer-Encoding: xchunked\r\n', CH));
  refused('te-space-name', post('te-space-name', 'Transfer-Encoding : chunked\r\n', CH));
  refused('te-cl0', post('te-cl0', 'Content-Length: 0\r\nTransfer-Encoding: chunked\r\n', CH));
  refused('te-vtab', post('te-vtab', 'Transfer-Encoding: \x0bchunked\r\n', CH));
  refused('cl-space-name', post('cl-space-name', 'Content-Length : 3\r\n', 'abc'));
  refused('cl-plus', post('cl-plus', 'Content-Length: +3\r\n', 'abc'));
  refused('cl-two-values', post('cl-two-values', 'Content-Length: 3, 4\r\n', 'abcd'));
  refused(
    'bare-lf-head',
    `POST /bare-lf-head HTTP/1.1\nHost: ${A}\n${AUTH.replace('\r\n', '\n')}Content-Length: 3\n\nabc`,
  );
  refused('bare-lf-one', `POST /bare-lf-one HTTP/1.1\r\nHost: ${A}\r\n${AUTH}Content-Length: 3\n\r\nabc`);
  refused('bare-lf-chunk', post('bare-lf-chunk', 'Transfer-Encoding: chunked\r\n', '3\nabc\n0\n\n'));
  refused(
    'chunk-overflow',
    post('chunk-overflow', 'Transfer-Encoding: chunked\r\n', '10000000000000003\r\nabc\r\n0\r\n\r\n'),
  );
  refused('nul-in-value', post('nul-in-value', 'X-A: a\x00b\r\nContent-Length: 3\r\n', 'abc'));
  // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
  // framing; the connection must close after it, whatever follows.
  row(
    one(
      'te-http10',
      req('POST', '/te-http10', AUTH + 'Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n', A, '1.0') +
        CH +
        get('/te-http10/after', AUTH),
    ),
    (t, g, r) => {
      t.comment(`answers: ${r.map((x) => `${x.status} ${x.body.slice(0, 100)}`).join(' | ')}; closed ${g?.closed}`);
      t.equal(atOrigin(origin, '/te-http10/after').length, 0, 'nothing after it is read as a request');
      t.ok(g?.closed, 'the connection closes after it');
    },
  );
  // Harmless if read: the body re-framed, nothing but "abc" sent.
  for (const [id, body] of [
    ['chunk-zeros', '00000000000000000000000000000003\r\nabc\r\n0\r\n\r\n'],
    ['chunk-ext-ph', `3;x=${PH}\r\nabc\r\n0\r\n\r\n`],
    ['chunk-ext-quoted', '3;x="a\\"b"\r\nabc\r\n0\r\n\r\n'],
  ] as const)
    row(one(id, post(id, 'Transfer-Encoding: chunked\r\n', body)), (t, _g, r) => {
      const q = atOrigin(origin, `/${id}`);
      t.ok(r[0]?.status === 200 || r[0]?.status === 400, `answered (${r[0]?.status} ${r[0]?.body.slice(0, 200)})`);
      if (r[0]?.status === 400) t.equal(q.length, 0, 'refused: nothing sent');
      else
        t.same(
          q.map((x) => x.body.toString('latin1')),
          ['abc'],
          'read: the body alone, re-framed',
        );
      t.notOk(
        q.some((x) => x.raw.includes('postern-')),
        'no placeholder reached the origin',
      );
    });

  // ---- Placeholders outside their slot, split, encoded.
  row(
    {
      id: 'split-slot',
      connect: A,
      writes: [
        { data: `GET /split-slot HTTP/1.1\r\nHost: ${A}\r\nAuthorization: Bearer @@PHA:API_TOKEN@@` },
        { data: '@@PHB:API_TOKEN@@\r\n\r\n', delay: 200 },
      ],
    },
    (t, g, r) => {
      expectSeq(t, g, r, [{ status: 200, body: 'seen:GET /split-slot' }]);
      const q = atOrigin(origin, '/split-slot')[0];
      t.equal(q && header(q, 'authorization'), `Bearer ${apiSecret}`, 'injected though split across records');
    },
  );
  row(
    {
      id: 'split-body',
      connect: A,
      writes: [
        {
          data: `POST /split-body HTTP/1.1\r\nHost: ${A}\r\n${AUTH}Content-Length: ${2 + 'postern-api-'.length + 16}\r\n\r\nt=@@PHA:API_TOKEN@@`,
        },
        { data: '@@PHB:API_TOKEN@@', delay: 200 },
      ],
    },
    (t, g, r) => {
      expectSeq(t, g, r, [{ status: 400, code: 'bad_request' }]);
      t.equal(atOrigin(origin, '/split-body').length, 0);
    },
  );
  refused('ph-path-pct', get('/ph-path-pct/@@PCT:API_TOKEN@@', AUTH));
  refused('ph-path', get(`/ph-path/${PH}`, AUTH));
  refused('ph-query', get(`/ph-query?token=${PH}`, AUTH));
  refused('ph-query-pct', get('/ph-query-pct?token=@@PCT:API_TOKEN@@', AUTH));
  refused('ph-header', get('/ph-header', AUTH + `X-Token: ${PH}\r\n`));
  refused('ph-header-only', get('/ph-header-only', `X-Token: ${PH}\r\n`));
  refused('ph-cookie', get('/ph-cookie', `Cookie: a=${PH}\r\n`));
  refused('ph-name', get('/ph-name', `${PH}: 1\r\n`));
  refused('ph-basic-other', get('/ph-basic-other', 'Authorization: Basic @@B64:bob:API_TOKEN@@\r\n'));
  refused('ph-inject-twice', get('/ph-inject-twice', AUTH + AUTH));
  refused('ph-inject-obsfold', get('/ph-inject-obsfold', `Authorization: Bearer\r\n ${PH}\r\n`));
  refused(
    'ph-body-cl',
    req('POST', '/ph-body-cl', AUTH + `Content-Length: ${4 + 'postern-api-'.length + 16}\r\n`) + `tok=${PH}`,
  );

  // ---- Methods.
  refused('trace-ph', req('TRACE', '/trace-ph', AUTH));
  refused('trace-noph', req('TRACE', '/trace-noph', ''));
  refused('method-foo', req('FOO', '/method-foo', AUTH));
  refused('method-lower', req('get', '/method-lower', AUTH));
  refused('options-star', req('OPTIONS', '*', AUTH));
  refused('connect-inner', `CONNECT ${O} HTTP/1.1\r\nHost: ${O}\r\n${AUTH}\r\n`);

  // ---- Absolute-form on the agent socket (through the run's HTTP proxy).
  const PA = 'Proxy-Authorization: Basic @@AUTH@@\r\n';
  const absRow = (id: string, data: string, check: (t: Test, g: Got | undefined, r: Resp[]) => void) =>
    row({ id, mode: 'plain', writes: [{ data }] }, check);
  absRow(
    'abs-https-cred-over-http',
    get(`http://${HOST}:${PP}/abs-https-cred-over-http`, PA + AUTH, `${HOST}:${PP}`),
    (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 403, code: 'denied_policy' }]);
      t.equal(atOrigin(plain, '/abs-https-cred-over-http').length, 0, 'the https-only credential never went over http');
    },
  );
  absRow(
    'abs-served',
    get(`http://${PLAINH}:${PP}/abs-served`, PA + 'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\n', `${PLAINH}:${PP}`),
    (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 200, body: 'seen:GET /abs-served' }]);
    },
  );
  absRow(
    'abs-host-mismatch',
    get(
      `http://${PLAINH}:${PP}/abs-host-mismatch`,
      PA + 'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\n',
      `${HOST}:${PP}`,
    ),
    (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 400, code: 'bad_request' }]);
      t.equal(atOrigin(plain, '/abs-host-mismatch').length, 0);
    },
  );
  absRow(
    'abs-userinfo-host',
    get(
      `http://${PLAINH}:${PP}@${HOST}:${PP}/abs-userinfo-host`,
      PA + 'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\n',
      `${PLAINH}:${PP}`,
    ),
    (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 400, code: 'bad_request' }]);
      t.equal(atOrigin(plain, '/abs-userinfo-host').length, 0);
    },
  );
  absRow(
    'abs-cl-te',
    req(
      'POST',
      `http://${PLAINH}:${PP}/abs-cl-te`,
      PA + 'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n',
      `${PLAINH}:${PP}`,
    ) + CH,
    (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 400, code: 'bad_request' }]);
      t.equal(atOrigin(plain, '/abs-cl-te').length, 0);
    },
  );
  absRow(
    'abs-te-obsfold',
    req(
      'POST',
      `http://${PLAINH}:${PP}/abs-te-obsfold`,
      PA + 'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\nTransfer-Encoding: gzip, chunked\r\n',
      `${PLAINH}:${PP}`,
    ) + CH,
    (t, g, r) => {
      expectSeq(t, g, r.slice(0, 1), [{ status: 400, code: 'bad_request' }]);
      t.equal(atOrigin(plain, '/abs-te-obsfold').length, 0);
    },
  );
  absRow(
    'abs-pipe-body',
    req('POST', `http://${PLAINH}:${PP}/abs-pipe-body`, PA + `Content-Length: 5\r\n`, `${PLAINH}:${PP}`) +
      'abcde' +
      get(
        `http://${PLAINH}:${PP}/abs-pipe-body/second`,
        'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\n',
        `${PLAINH}:${PP}`,
      ),
    (t, _g, r) => {
      t.equal(r[0]?.status, 200, `first answered (${r[0]?.body})`);
      const sent = atOrigin(plain, '/abs-pipe-body/second').length;
      t.ok(sent === 0 || r.length === 2, `second sent ${sent} time(s), answers ${r.length}`);
    },
  );

  const run = await runCases(s.h, cases);
  t.equal(run.code, 0, run.stderr);
  const received: Buffer[] = [run.all];
  for (const [id, check] of checks) {
    await t.test(id, async (t) => {
      const g = run.got.get(id);
      const raw = Buffer.from(g?.raw ?? '', 'base64');
      received.push(raw);
      check(t, g, parseResponses(raw).responses);
    });
  }

  await t.test('each secret reached only its own host, in its own slot', async (t) => {
    for (const q of origin.requests) {
      const text = q.raw.toString('latin1');
      if (exposures(text, apiSecret).length > 0) {
        t.equal(header(q, 'host'), A, `api secret only with Host ${A} (${q.target})`);
        t.equal(header(q, 'authorization'), `Bearer ${apiSecret}`, `only in its slot (${q.target})`);
      }
      if (exposures(text, otherSecret).length > 0) t.equal(header(q, 'host'), O, `other secret only to ${O}`);
      t.same(exposures(text, plainSecret), [], 'plain secret never to the TLS origin');
      t.notOk(text.includes('postern-'), `no placeholder reached the origin (${q.target})`);
    }
    for (const q of plain.requests) {
      t.same(exposures(q.raw, apiSecret), [], `no api secret over http (${q.target})`);
      t.same(exposures(q.raw, otherSecret), [], `no other secret over http (${q.target})`);
    }
  });

  await s.d.stop();
  for (const secret of [apiSecret, otherSecret, plainSecret]) {
    received.forEach((b, i) => t.same(exposures(b, secret), [], `client bytes ${i} hold no form of a secret`));
    t.same(exposures(s.d.logs(), secret), [], 'not in the daemon log');
    t.same(exposures(await journalText(s.h), secret), [], 'not in the journal');
  }
});
