// A parse failure on a connection is answered after the requests that
// arrived whole before it, never instead of them: both front doors, with
// real clients. Answered at once, the failure told the client its request
// was malformed while that request ran upstream, and cut off its real
// answer (a client that retries it would run it twice).
//
// Through the proxy: bytes after a request head that no content-length or
// transfer-encoding frames are not its body (RFC 9112 §6.3) but the next
// message, whatever they hold. A client under a real `postern run` writes,
// on one kept-alive tunnel, a POST with its placeholder in the inject slot
// and no framing, followed at once by `token=<the placeholder>`, then (once
// answered) an ordinary GET. The POST is served with an empty body and its
// answer is the first on the wire; the bytes after it never reach the
// upstream, in a body or as a request of their own: they are refused as a
// malformed request (400 bad_request, journaled) after the POST's answer,
// and the connection closes. On the agent socket: a whole POST /v1/http and
// bytes that are not HTTP in one write get the reply, then the refusal.
// The secret is in no byte the clients received, nor the journal, nor the
// daemon's log.
import t, { type Test } from 'tap';
import net from 'node:net';
import { startStack, type Stack } from '../helpers/stack';
import { parseRaw, sendKeptAlive, type KeptAliveAnswer } from '../helpers/proxy-raw-client';
import { makeCanary, journalBytes, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const HOST = 'api.example.test';

// A daemon with one credential `api` for HOST (placeholder in $API_TOKEN),
// approved by a test approver.
async function stackWithApi(t: Test, canary: string): Promise<{ s: Stack; P: number; secret: string }> {
  const s = await startStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary(canary);
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nenv = ["API_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  await s.approver();
  return { s, P, secret };
}

// The daemon stopped, its log, journal files and decrypted journal hold no
// form of the secret.
async function noSecretLeft(t: Test, s: Stack, secret: string): Promise<void> {
  await s.d.stop();
  t.same(exposures(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(exposures(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(exposures(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
}

// Writes `wire` in one write on the agent socket; every byte read until the
// daemon closes, `until` is seen, or 15 s pass.
function exchange(sock: string, wire: string, until?: string): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const c = net.connect(sock);
    const got: Buffer[] = [];
    c.on('data', (d: Buffer) => {
      got.push(d);
      if (until && Buffer.concat(got).includes(until)) c.destroy();
    });
    c.on('error', reject);
    c.on('close', () => resolve(Buffer.concat(got)));
    c.write(wire);
    setTimeout(() => c.destroy(), 15_000).unref();
  });
}

const bytesOf = (a: KeptAliveAnswer | undefined): Buffer =>
  Buffer.concat([a?.raw, a?.body, a?.stray].map((b) => Buffer.from(b ?? '', 'base64')));

t.test('unframed bytes after a request are the next message, never its body', async (t) => {
  const { s, P, secret } = await stackWithApi(t, 'UNFRAMED');

  const authority = `${HOST}:${P}`;
  const run = await sendKeptAlive(
    s.h,
    authority,
    [
      {
        id: 'unframed',
        head: `POST /v1/post HTTP/1.1\r\nHost: ${authority}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n\r\ntoken=@@PH:API_TOKEN@@&x=1`,
      },
      {
        id: 'after',
        head: `GET /v1/after HTTP/1.1\r\nHost: ${authority}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n\r\n`,
      },
    ],
    ['--credential', 'api'],
  );
  t.equal(run.code, 0, run.stderr);
  const answers = new Map(run.answers.map((a) => [a.id, a]));
  const first = answers.get('unframed');
  const after = answers.get('after');

  t.equal(first?.status, 200, `the POST is served, and its answer is the first on the wire (${first?.error})`);
  const posts = s.up.requests.filter((r) => r.url === '/v1/post');
  t.equal(posts.length, 1, 'the upstream saw the POST once');
  t.equal(posts[0]?.body.length, 0, 'with an empty body');
  t.equal(posts[0]?.headers['authorization'], `Bearer ${secret}`, 'the secret injected in its slot');
  t.notOk(
    s.up.requests.some((r) => r.url.includes('token=') || r.body.includes('token=')),
    'the bytes after it reached the upstream neither as a body nor as a request',
  );

  // The refusal of the bytes that followed comes after the POST's answer,
  // and the connection then closes; the GET goes on a new tunnel.
  const refusal = parseRaw(Buffer.from(first?.stray ?? '', 'base64'));
  t.equal(refusal.status, 400, `then the refusal of what followed (${refusal.head})`);
  t.equal(refusal.headers['x-postern-error'], 'bad_request', 'x-postern-error');
  let err: { code?: string; audit_seq?: unknown } | undefined;
  try {
    err = (JSON.parse(refusal.body) as { error: typeof err }).error;
  } catch {
    err = undefined;
  }
  t.equal(err?.code, 'bad_request', 'the JSON code');
  t.type(err?.audit_seq, 'number', 'the refusal is journaled');
  t.ok(first?.closed, 'the connection closed after it');
  t.equal(after?.reopened, true, 'the next request went on a new tunnel');
  t.equal(after?.status, 200, 'and was served');
  t.same(
    s.up.requests.map((r) => r.url),
    ['/v1/post', '/v1/after'],
    'the upstream saw the two requests, nothing else',
  );

  const received = [run.stdout, Buffer.from(run.stderr), bytesOf(first), bytesOf(after)];
  received.forEach((bytes, i) =>
    t.same(exposures(bytes, secret), [], `the client received no form of the secret (${i})`),
  );
  await noSecretLeft(t, s, secret);
});

// The JSON front door, the same way: a whole POST /v1/http and, in the same
// write, bytes that are not HTTP. Its reply comes first, then the refusal,
// then the connection closes.
t.test('on the agent socket: a whole request, then bytes that are not HTTP', async (t) => {
  const { s, secret } = await stackWithApi(t, 'PIPELINED');
  const body = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, '/v1/pipelined') });
  const wire =
    `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}` +
    'not http\r\n\r\n';
  const raw = await exchange(s.sock, wire);
  const text = raw.toString('latin1');
  const second = text.indexOf('HTTP/1.1 400');
  t.ok(text.startsWith('HTTP/1.1 200 '), `the request's reply is first (${text.slice(0, 200)})`);
  t.ok(second > 0, 'then the refusal of what followed');
  const reply = parseRaw(raw.subarray(0, second));
  const answer = JSON.parse(reply.body) as { status?: number; body?: string };
  t.equal(answer.status, 200, 'the upstream answered');
  t.match(answer.body, /\/v1\/pipelined/, 'what it answered is this request');
  const refusal = parseRaw(raw.subarray(second));
  t.equal((JSON.parse(refusal.body) as { error: { code: string } }).error.code, 'bad_request', 'the JSON code');
  t.equal(s.up.requests.length, 1, 'the upstream saw the request once');
  t.same(exposures(raw, secret), [], 'the client received no form of the secret');
  await noSecretLeft(t, s, secret);
});

// A whole POST /v1/http and a CONNECT in one write: the reply to the POST
// goes out before the CONNECT's answer, never after it (where the client
// expects its tunnel's TLS).
t.test('on the agent socket: a whole request, then a CONNECT', async (t) => {
  const { s, P, secret } = await stackWithApi(t, 'BEFORECONNECT');
  const body = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, '/v1/first') });
  const wire =
    `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}` +
    `CONNECT ${HOST}:${P} HTTP/1.1\r\nHost: ${HOST}:${P}\r\n\r\n`;
  const raw = await exchange(s.sock, wire, 'Connection Established\r\n\r\n');
  const text = raw.toString('latin1');
  const tunnel = text.indexOf('HTTP/1.1 200 Connection Established');
  t.ok(text.startsWith('HTTP/1.1 200 OK'), `the POST's reply is first (${text.slice(0, 200)})`);
  t.ok(tunnel > 0, "then the CONNECT's answer");
  const answer = JSON.parse(parseRaw(raw.subarray(0, tunnel)).body) as { status?: number; body?: string };
  t.equal(answer.status, 200, 'the upstream answered the POST');
  t.match(answer.body, /\/v1\/first/, 'whole, before the tunnel');
  t.same(exposures(raw, secret), [], 'the client received no form of the secret');
  await noSecretLeft(t, s, secret);
});
