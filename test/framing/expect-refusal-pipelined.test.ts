// Inside a terminated CONNECT tunnel, a request with an `Expect` other
// than 100-continue is refused (`400 bad_request`, `connection: close`,
// docs/proxy.md §6), and a request pipelined behind it in the same bytes is
// never sent: its answer could never be written on a closing connection.
// It used to be sent at once, with the injected secret, and left
// unanswered (the refusal was not tracked as an exchange, so the request
// behind it did not wait for its turn); the agent socket held.
// Wire (one TLS write), A = api.example.test:<origin port>:
//   GET /e/<n>/first HTTP/1.1\r\nHost: A\r\nExpect: nothing\r\n\r\n
//   GET /e/<n>/after HTTP/1.1\r\nHost: A\r\nAuthorization: Bearer <placeholder>\r\n\r\n
import t from 'tap';
import { header } from '../helpers/raw-origin';
import {
  dummyPlaceholder,
  readResponses,
  refusalOf,
  runFuzzClient,
  show,
  type FuzzCase,
  targetEchoStack,
} from '../helpers/framing-kit';

const DUMMY = dummyPlaceholder('api');

t.test('a request pipelined behind an Expect refusal is never sent', async (t) => {
  const { s, origin, A, secret } = await targetEchoStack(t, 'EXPECTPIPE');
  const wire = (n: number): string =>
    `GET /e/${n}/first HTTP/1.1\r\nHost: ${A}\r\nExpect: nothing\r\n\r\n` +
    `GET /e/${n}/after HTTP/1.1\r\nHost: ${A}\r\nAuthorization: Bearer ${DUMMY}\r\n\r\n`;
  const cases: FuzzCase[] = [1, 2, 3].map((n) => ({
    id: String(n),
    connect: A,
    writes: [{ data: Buffer.from(wire(n), 'latin1').toString('base64') }],
    expect: 2,
    idle: 2000,
  }));
  const run = await runFuzzClient(s.h, cases, { phVar: 'API_TOKEN', dummy: DUMMY, concurrency: 1, tag: 'expect' });
  t.equal(run.code, 0, run.stderr);
  for (const n of [1, 2, 3]) {
    const raw = Buffer.from(run.got.get(String(n))?.raw ?? '', 'base64');
    const { responses } = readResponses(raw);
    t.equal(responses.length, 1, `${n}: one answer: ${show(raw, 600)}`);
    t.equal(responses[0] && refusalOf(responses[0])?.code, 'bad_request', `${n}: the Expect refusal`);
    const sent = origin.requests.filter((q) => q.target.startsWith(`/e/${n}/`));
    t.same(
      sent.map((q) => `${q.target}${header(q, 'authorization') === `Bearer ${secret}` ? ' with the secret' : ''}`),
      [],
      `${n}: nothing reached the origin`,
    );
  }
});
