// A "CL.0" desync through the real daemon (SPEC §6.2: a connection that
// carried a request body is closed after its response and never reused).
// The origin is a raw TLS server that parses HTTP/1.1 itself: POST /cl0, and
// GET /public/cl0 (servers often ignore a GET's body), answer without
// reading the declared body, so the body is parsed as the next request; a
// smuggled POST /store takes up to 400 bytes of whatever follows as its body
// and keeps it; GET /public/stored gives everything kept, in the clear. The
// agent's bodies are such smuggled prefixes, and a smuggled GET
// /admin/secret-route (no rule allows /admin or /store). Before the fix the
// next request postern sent on that connection, with its Authorization,
// became the stored body, and its agent got the smuggled request's response.
// Two origins: one that stops after a response to `Connection: close`, as
// servers do (the smuggled bytes must then never be parsed as a request),
// and one that ignores it too and keeps parsing (the agent's own bytes are
// parsed as a request there, but nothing postern wrote after them is).
// Sequential and concurrent agents; asserted: no stored or smuggled byte
// holds any form of the secret, each agent gets the response to its own
// request, postern's requests reach the origin exactly once each, nothing is
// sent on a connection after a request with a body and that connection is
// closed, a request without a body cannot claim one (framing headers and
// their "_" look-alikes are refused), while bodiless GETs still share a
// pooled connection; the replies, the daemon log and the journal hold no
// form of the secret. Redaction is off for the credential: it is defence in
// depth, and would hide a capture from the agent's view of the store, not
// prevent it.
import t, { Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { startStack, Stack } from '../helpers/stack';
import { eventually } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import {
  declaredLength,
  header,
  ParsedRequest,
  RawConnection,
  RawOrigin,
  rawResponse,
  startRawOrigin,
} from '../helpers/raw-origin';
import type { AgentResponse } from '../../daemon/pipeline/response';

const HOST = 'api.example.test';
const STORE = `POST /store HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 400\r\n\r\n`;
const ADMIN = `GET /admin/secret-route HTTP/1.1\r\nHost: ${HOST}\r\nX-Smuggled: yes\r\n\r\n`;
const SMUGGLES = [STORE, ADMIN + STORE, ADMIN];

interface Mode {
  name: string;
  cred: string;
  honourClose: boolean;
  origin: RawOrigin;
  stored: Buffer[];
  // Every request postern was asked to send, by its tag.
  sent: Map<string, { method: string; path: string }>;
}

let s: Stack;
let secret: string;
const replies: string[] = [];

function json(tag: string | null, path: string, extra: Record<string, unknown> = {}): Buffer {
  const text = JSON.stringify({ tag, path, ...extra });
  return rawResponse(
    200,
    [
      ['Content-Type', 'application/json'],
      ['Content-Length', String(Buffer.byteLength(text))],
    ],
    text,
  );
}

async function startOrigin(name: string, cred: string, honourClose: boolean): Promise<Mode> {
  const stored: Buffer[] = [];
  const origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose }, (head) => {
    const path = head.target.split('?')[0] as string;
    const tag = header(head, 'x-tag') ?? null;
    // CL.0: a POST route, and a GET route (servers often ignore a GET's body).
    if ((head.method === 'POST' && path === '/cl0') || (head.method === 'GET' && path === '/public/cl0'))
      return { read: 'none', respond: () => json(tag, path) };
    if (head.method === 'POST' && path === '/echo')
      return { read: 'declared', respond: (req) => json(tag, path, { length: req.body.length }) };
    if (head.method === 'POST' && path === '/store') {
      return {
        read: 'until-pause',
        respond: (req) => {
          stored.push(req.body);
          return json(tag, path, { stored: req.body.length });
        },
      };
    }
    if (head.method === 'GET' && path === '/public/stored')
      return { read: 'declared', respond: () => json(tag, path, { stored: stored.map((b) => b.toString('latin1')) }) };
    if (head.method === 'GET' && path.startsWith('/admin/'))
      return { read: 'declared', respond: () => json(tag, path, { admin: 'the admin area' }) };
    if (head.method === 'GET' && path.startsWith('/public/'))
      return { read: 'declared', respond: () => json(tag, path) };
    return { read: 'declared', respond: () => rawResponse(404, [['Content-Length', '0']]) };
  });
  return { name, cred, honourClose, origin, stored, sent: new Map() };
}

// One agent request, tagged; asserts it got the response to itself.
async function send(t: Test, m: Mode, method: 'GET' | 'POST', path: string, body?: string): Promise<void> {
  const tag = randomUUID();
  m.sent.set(tag, { method, path });
  const r = await s.request({
    credential: m.cred,
    method,
    url: `https://${HOST}:${m.origin.port}${path}`,
    headers: { 'x-tag': tag, ...(body === undefined ? {} : { 'content-type': 'text/plain' }) },
    ...(body === undefined ? {} : { body }),
    timeout_ms: 5000,
  });
  replies.push(r.text);
  t.equal(r.status, 200, `${method} ${path}: ${r.text.slice(0, 200)}`);
  const reply = r.json as AgentResponse | null;
  let echoed: { tag?: string; path?: string } | null = null;
  try {
    echoed = JSON.parse(reply?.body ?? '') as { tag?: string; path?: string };
  } catch {
    echoed = null;
  }
  t.equal(reply?.status, 200, `${method} ${path}: the origin answered 200`);
  t.same(
    echoed && { tag: echoed.tag, path: echoed.path },
    { tag, path },
    `${method} ${path}: the response to this request`,
  );
  const kept = (echoed as { stored?: unknown } | null)?.stored;
  if (path === '/public/stored' && Array.isArray(kept)) {
    for (const b of kept as string[])
      t.same(
        findCanary(Buffer.from(b, 'latin1'), secret),
        [],
        'the stored bodies the agent reads hold no form of the secret',
      );
  }
}

// A request parsed inside the declared body of a request postern sent on
// the same connection: the origin misread that body as a request.
function parentOf(conn: RawConnection, r: ParsedRequest): ParsedRequest | undefined {
  for (const e of conn.requests) {
    if (e === r || e.offset >= r.offset) continue;
    if (parentOf(conn, e)) continue; // e was smuggled itself
    const start = e.offset + e.headLength;
    if (r.offset >= start && r.offset < start + declaredLength(e)) return e;
  }
  return undefined;
}

async function checkOrigin(t: Test, m: Mode): Promise<void> {
  const conns = m.origin.connections;
  const withBody = (): RawConnection[] => conns.filter((c) => c.requests.some((r) => declaredLength(r) > 0));
  t.ok(
    await eventually(() => withBody().every((c) => c.closed), 5000),
    'every connection that carried a body is closed',
  );
  await new Promise((r) => setTimeout(r, 300)); // a smuggled store still waiting for bytes gives up
  const smuggled: { conn: RawConnection; req: ParsedRequest; parent: ParsedRequest }[] = [];
  const direct: { conn: RawConnection; req: ParsedRequest }[] = [];
  for (const conn of conns) {
    for (const req of conn.requests) {
      const parent = parentOf(conn, req);
      if (parent) smuggled.push({ conn, req, parent });
      else direct.push({ conn, req });
    }
  }
  const bodied = direct.filter((d) => declaredLength(d.req) > 0);
  t.ok(bodied.length >= 20, `${bodied.length} requests with a body reached the origin`);
  t.ok(
    bodied.some((d) => d.req.method === 'GET'),
    'GETs with a body among them',
  );

  await t.test('no stored or smuggled byte holds the secret in any form', async (t) => {
    for (const b of m.stored) {
      t.same(exposures(b, secret), [], 'a stored body');
      t.same(findCanary(b, secret), [], 'a stored body (canary forms)');
    }
    for (const x of smuggled) {
      t.same(exposures(x.req.raw, secret), [], `smuggled ${x.req.method} ${x.req.target}`);
      t.same(findCanary(x.req.raw, secret), [], `smuggled ${x.req.method} ${x.req.target} (canary forms)`);
      const end = x.parent.offset + x.parent.headLength + declaredLength(x.parent);
      t.ok(
        x.req.offset + x.req.raw.length <= end,
        `smuggled ${x.req.method} ${x.req.target} holds only bytes of the agent's own body`,
      );
    }
    t.ok(
      m.stored.every((b) => b.length === 0),
      `the smuggled store got no bytes after the agent's body (${m.stored.map((b) => b.length).join(',') || 'nothing stored'})`,
    );
  });

  await t.test('the smuggled requests', async (t) => {
    if (m.honourClose) {
      t.same(
        smuggled.map((x) => `${x.req.method} ${x.req.target}`),
        [],
        'none was ever parsed as a request',
      );
      t.same(
        m.origin.requests.filter((r) => /^\/(admin|store)/.test(r.target)).map((r) => r.target),
        [],
        'no /admin or /store request reached the origin',
      );
      t.same(m.stored, [], 'nothing stored');
    } else {
      // This origin parses the agent's own body as requests whatever postern
      // does: proof that it is the broken server the test needs.
      t.ok(
        smuggled.some((x) => x.req.target === '/admin/secret-route'),
        "the origin misread the agent's body as GET /admin/secret-route",
      );
      t.ok(
        smuggled.some((x) => x.req.target === '/store'),
        'and as POST /store',
      );
    }
    for (const x of smuggled)
      t.equal(header(x.req, 'authorization'), undefined, `smuggled ${x.req.target} carries no Authorization`);
  });

  await t.test('what reached the origin as requests is what the agents asked for, once each', async (t) => {
    const tags = direct.map((d) => header(d.req, 'x-tag') ?? `(untagged ${d.req.method} ${d.req.target})`);
    t.same(
      tags.filter((x) => !m.sent.has(x)),
      [],
      "every request postern sent was an agent's",
    );
    t.same(
      [...m.sent.keys()].filter((tag) => tags.filter((x) => x === tag).length !== 1),
      [],
      "every agent's request arrived exactly once, as a request of its own",
    );
    for (const d of direct) {
      const want = m.sent.get(header(d.req, 'x-tag') ?? '');
      if (want) t.same({ method: d.req.method, path: d.req.target }, want, `${want.method} ${want.path} as asked`);
      t.equal(header(d.req, 'authorization'), `Bearer ${secret}`, 'with the injected secret');
    }
  });

  await t.test('a connection that carried a body carries nothing after it, and is closed', async (t) => {
    for (const d of bodied) {
      const after = d.conn.requests.filter((r) => r.offset > d.req.offset && !parentOf(d.conn, r));
      t.same(
        after.map((r) => `${r.method} ${r.target}`),
        [],
        `connection ${d.conn.id}: no request after ${d.req.method} ${d.req.target}`,
      );
      const end = d.req.offset + d.req.headLength + declaredLength(d.req);
      t.ok(
        d.conn.receivedLength() <= end,
        `connection ${d.conn.id}: no byte after the body (${d.conn.receivedLength()} received, the body ends at ${end})`,
      );
      if (!m.honourClose)
        t.notOk(d.conn.closedByOrigin, `connection ${d.conn.id}: postern closed it (this origin never does)`);
    }
    t.equal(
      new Set(bodied.map((d) => d.conn.id)).size,
      bodied.length,
      'each request with a body had a connection to itself',
    );
  });
}

t.before(async () => {
  s = await startStack();
  secret = makeCanary('DESYNC');
  await s.approver();
});
t.teardown(() => s.close());

for (const honourClose of [true, false]) {
  const name = honourClose ? 'an origin that honours Connection: close' : 'an origin that ignores Connection: close';
  t.test(name, async (t) => {
    const cred = `desync-${honourClose ? 'a' : 'b'}`;
    const m = await startOrigin(name, cred, honourClose);
    t.teardown(() => m.origin.close());
    s.addCredential(
      cred,
      `name = "${cred}"\nkind = "http"\nredact_response = false\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
        `[[allow]]\nhost = "${HOST}"\nports = [${m.origin.port}]\nmethods = ["GET", "POST"]\npaths = ["/cl0", "/echo", "/public/*"]\n`,
      secret,
    );

    await t.test('no rule allows the smuggled paths', async (t) => {
      for (const [method, path] of [
        ['GET', '/admin/secret-route'],
        ['POST', '/store'],
      ] as const) {
        const r = await s.request({
          credential: cred,
          method,
          url: `https://${HOST}:${m.origin.port}${path}`,
          ...(method === 'POST' ? { body: 'x' } : {}),
        });
        replies.push(r.text);
        t.equal(r.status, 403, r.text);
        t.equal((r.json as { error: { code: string } }).error.code, 'denied_policy');
      }
      t.equal(m.origin.connections.length, 0, 'nothing reached the origin');
    });

    await t.test(
      'a request without a body cannot declare one: framing headers and look-alikes are refused',
      async (t) => {
        for (const name of [
          'Content-Length',
          'content_length',
          'Transfer-Encoding',
          'TRANSFER_ENCODING',
          'Trailer',
          'Connection',
        ]) {
          const r = await s.request({
            credential: cred,
            method: 'GET',
            url: `https://${HOST}:${m.origin.port}/public/x`,
            headers: { [name]: name.toLowerCase().startsWith('content') ? '400' : 'chunked' },
          });
          replies.push(r.text);
          t.equal(r.status, 400, `${name}: ${r.text}`);
          t.equal((r.json as { error?: { code: string } }).error?.code, 'bad_request');
        }
        t.equal(m.origin.connections.length, 0, 'nothing reached the origin');
      },
    );

    await t.test('bodiless GETs share one pooled connection', async (t) => {
      const before = m.origin.requests.length;
      for (let i = 0; i < 10; i++) await send(t, m, 'GET', `/public/reuse-${i}`);
      const conns = new Set(m.origin.requests.slice(before).map((r) => r.conn));
      t.equal(conns.size, 1, 'ten sequential GETs, one connection');
      t.equal(m.origin.connections.length, 1, 'the origin accepted one connection');
    });

    await t.test('sequential: each smuggling POST, then GETs', async (t) => {
      for (let i = 0; i < 6; i++) {
        await send(t, m, 'POST', '/cl0', SMUGGLES[i % SMUGGLES.length]);
        await send(t, m, 'GET', `/public/after-${i}`);
        await send(t, m, 'GET', '/public/stored');
        await send(t, m, 'GET', '/public/cl0', SMUGGLES[i % SMUGGLES.length]);
        await send(t, m, 'GET', `/public/after-get-${i}`);
      }
      await send(t, m, 'GET', '/public/stored');
    });

    await t.test('concurrent agents: smuggling POSTs beside GETs', async (t) => {
      for (let round = 0; round < 3; round++) {
        await Promise.all([
          ...[0, 1, 2, 3].map((i) => send(t, m, 'POST', '/cl0', SMUGGLES[(round + i) % SMUGGLES.length])),
          ...[0, 1].map((i) => send(t, m, 'GET', '/public/cl0', SMUGGLES[(round + i) % SMUGGLES.length])),
          ...[0, 1, 2, 3].map((i) => send(t, m, 'GET', `/public/concurrent-${round}-${i}`)),
        ]);
        await send(t, m, 'GET', '/public/stored');
      }
    });

    await t.test('ordinary POSTs: a new connection for each', async (t) => {
      const before = m.origin.requests.length;
      for (let i = 0; i < 5; i++) await send(t, m, 'POST', '/echo', `hello ${i}`);
      const posts = m.origin.requests.slice(before).filter((r) => r.target === '/echo');
      t.equal(posts.length, 5);
      t.equal(new Set(posts.map((r) => r.conn)).size, 5, 'five POSTs, five connections');
    });

    await t.test('GETs after all that still share a pooled connection', async (t) => {
      const before = m.origin.requests.length;
      for (let i = 0; i < 10; i++) await send(t, m, 'GET', `/public/again-${i}`);
      // The first may open a connection (the pool's last one may have gone
      // with a POST); the nine after it reuse that one.
      const conns = new Set(m.origin.requests.slice(before + 1).map((r) => r.conn));
      t.equal(conns.size, 1, 'nine sequential GETs, one connection');
    });

    await checkOrigin(t, m);
  });
}

t.test('no form of the secret in the replies, the daemon log or the journal', async (t) => {
  t.ok(replies.length > 100, `${replies.length} replies`);
  t.same(exposures(replies.join('\n'), secret), [], 'the replies (as text)');
  for (const r of replies) {
    const found = exposures(r, secret);
    if (found.length > 0) t.same(found, [], `a reply: ${r.slice(0, 300)}`);
  }
  await s.d.stop();
  t.same(exposures(s.d.logs(), secret), [], 'the daemon log');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log (canary forms)');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files');
  const journal = await journalText(s.h);
  t.same(exposures(journal, secret), [], 'the decrypted journal');
  t.same(findCanary(journal, secret), [], 'the decrypted journal (canary forms)');
});
