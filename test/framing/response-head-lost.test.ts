// An origin's response whose head is valid but whose body fails to parse
// at its first byte (a chunk size undici rejects: `+a`, `0xa`, `zz`): no
// byte of it has reached the proxied client, so it gets a refusal (502
// upstream_error, x-postern-error, maybe_executed: the request reached the
// origin, with the secret), not a closed connection with nothing in it
// (docs/proxy.md: only once a response head went out is the connection
// closed without ending the message). The head used to be written before
// the first body byte and lost with the abort: curl said "Empty reply from
// server".
// Wire from the origin, for GET /h/<n>:
//   HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n<size>\r\nabcdefghij\r\n0\r\n\r\n
import t from 'tap';
import { startStack } from '../helpers/stack';
import { startRawOrigin } from '../helpers/raw-origin';
import { makeCanary } from '../helpers/canary';
import { PH, dummyPlaceholder, readResponses, runFuzzClient, show, type FuzzCase } from '../helpers/framing-kit';

const HOST = 'api.example.test';
const DUMMY = dummyPlaceholder('api');
const SIZES = ['+a', '0xa', 'zz'];

t.test('a response whose body fails at its first byte still gets an answer', async (t) => {
  const s = await startStack({ records: { [HOST]: { A: ['127.0.0.1'] } }, httpConfig: 'timeout = "3s"' });
  t.teardown(() => s.close());
  const origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, (head) => ({
    read: 'declared',
    respond: () =>
      Buffer.from(
        `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n${SIZES[Number(head.target.split('/')[2])]}\r\nabcdefghij\r\n0\r\n\r\n`,
        'latin1',
      ),
  }));
  t.teardown(() => origin.close());
  const A = `${HOST}:${origin.port}`;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nenv = ["API_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${origin.port}]\nmethods = ["GET", "POST"]\n`,
    makeCanary('HEADLOST'),
  );
  await s.approver();
  const cases: FuzzCase[] = SIZES.map((_x, n) => ({
    id: String(n),
    connect: A,
    writes: [
      {
        data: Buffer.from(
          `GET /h/${n} HTTP/1.1\r\nHost: ${A}\r\nAuthorization: Bearer ${PH}\r\n\r\n`.split(PH).join(DUMMY),
          'latin1',
        ).toString('base64'),
      },
    ],
    expect: 1,
    idle: 5000,
  }));
  const run = await runFuzzClient(s.h, cases, { phVar: 'API_TOKEN', dummy: DUMMY, concurrency: 1, tag: 'headlost' });
  t.equal(run.code, 0, run.stderr);
  SIZES.forEach((size, n) => {
    const got = run.got.get(String(n));
    const raw = Buffer.from(got?.raw ?? '', 'base64');
    const { responses, rest } = readResponses(raw);
    const answered = responses.length > 0 || /^HTTP\/1\.1 \d{3} /.test(rest.toString('latin1'));
    t.ok(answered, `chunk size ${JSON.stringify(size)}: an answer, not a bare close (${got?.how}): ${show(raw, 600)}`);
    t.equal(origin.requests.filter((q) => q.target === `/h/${n}`).length, 1, `the request reached the origin`);
  });
});
