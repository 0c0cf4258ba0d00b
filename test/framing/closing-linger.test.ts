// A connection closed while its client may still be sending reads until the
// client stops (lingering-close.ts). An HTTP/1.0 request on the agent
// socket followed in the same bytes by something that cannot be read (a
// request after a closing one is HPE_CLOSED_CONNECTION): the request is
// served, and its answer used to go out followed at once by the
// connection's close. A client still writing then got EPIPE and dropped the
// answer unread, though its request had run upstream with the secret (seen
// by framing/agent-socket-framing-fuzz under load, seed 695809 case
// a9e01-114). Rows: the client writes again after the answer is out, then
// reads: it gets the answer and no error; the connection closes once the
// client ends, or LINGER_MS after the answer if it never does.
import t from 'tap';
import net from 'node:net';
import { readResponses, show, targetEchoStack } from '../helpers/framing-kit';

const HOST = 'api.example.test';

function post(version: string, url: string): string {
  const body = JSON.stringify({ credential: 'api', method: 'GET', url });
  return `POST /v1/http HTTP/${version}\r\nHost: postern\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
}
// A request whose first chunk does not end where its size says.
const BAD_CHUNKED =
  'POST /v1/http HTTP/1.1\r\nHost: postern\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n{"credentiac\r\n';

interface Outcome {
  raw: Buffer;
  error: string | null;
  closedAfterMs: number | null;
}

// Writes `first`, reads nothing until `answered` resolves and `pause` ms
// more, writes `more`, then reads; ends its side `endAfterMs` after the
// daemon's end (never, if null).
function exchange(
  sock: string,
  first: string,
  answered: () => Promise<void>,
  more: string,
  endAfterMs: number | null,
): Promise<Outcome> {
  return new Promise((resolve) => {
    const c = net.connect({ path: sock, allowHalfOpen: true });
    const got: Buffer[] = [];
    let error: string | null = null;
    let ended: number | null = null;
    const hard = setTimeout(() => c.destroy(), 15_000);
    c.pause();
    c.on('connect', () => {
      c.write(first);
      void answered().then(() => {
        if (c.destroyed) return;
        c.write(more);
        c.resume();
      });
    });
    c.on('data', (d: Buffer) => got.push(d));
    c.on('end', () => {
      ended = Date.now();
      if (endAfterMs !== null) setTimeout(() => c.end(), endAfterMs);
    });
    c.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    c.on('close', () => {
      clearTimeout(hard);
      resolve({ raw: Buffer.concat(got), error, closedAfterMs: ended === null ? null : Date.now() - ended });
    });
  });
}

t.test('the answer before a parse failure reaches a client still writing', async (t) => {
  const { s, origin } = await targetEchoStack(t, 'LINGER');
  const url = (p: string): string => `https://${HOST}:${origin.port}${p}`;
  // The origin has the request and the daemon had time to answer it.
  const servedThenSettled = (target: string) => async (): Promise<void> => {
    while (!origin.requests.some((q) => q.target === target)) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 400));
  };

  const rows: [string, string, string, number | null][] = [
    ['http/1.0 then a request after close', post('1.0', url('/l/1')) + post('1.1', url('/l/x')), '/l/1', 50],
    ['http/1.0 then a bad chunk', post('1.0', url('/l/2')) + BAD_CHUNKED, '/l/2', 50],
    ['http/1.1 then a bad chunk', post('1.1', url('/l/3')) + BAD_CHUNKED, '/l/3', 50],
  ];
  for (const [name, first, target, endAfter] of rows) {
    const o = await exchange(s.sock, first, servedThenSettled(target), '{"more":1}\r\n', endAfter);
    const answers = readResponses(o.raw).responses;
    t.equal(o.error, null, `${name}: no error on the client's side (got ${show(o.raw)})`);
    const served = answers[0];
    t.equal(served?.status, 200, `${name}: the served request's answer came first`);
    t.match(served?.body.toString('utf8') ?? '', target, `${name}: and it is that request's`);
    t.ok(answers.length <= 2, `${name}: at most the parse failure's refusal after it`);
    t.equal(origin.requests.filter((q) => q.target === target).length, 1, `${name}: the request ran once`);
  }

  // A client that never ends its side: the daemon still reads a second
  // after its end, and has closed LINGER_MS (5 s) after it: a write fails.
  const c = net.connect({ path: s.sock, allowHalfOpen: true });
  const errors: string[] = [];
  c.on('error', (e: NodeJS.ErrnoException) => errors.push(e.code ?? e.message));
  c.write(post('1.0', url('/l/4')) + BAD_CHUNKED);
  c.resume();
  await new Promise((r) => c.once('end', r));
  const wrote = (data: string): Promise<string | null> =>
    new Promise((resolve) => {
      c.write(data, (e) => resolve(e ? ((e as NodeJS.ErrnoException).code ?? e.message) : null));
    });
  await new Promise((r) => setTimeout(r, 1_000));
  t.equal(await wrote('still there?'), null, 'a client that never ends: read a second after the answer');
  await new Promise((r) => setTimeout(r, 6_000));
  t.not(await wrote('still there?'), null, 'a client that never ends: closed after LINGER_MS');
  c.destroy();
});
