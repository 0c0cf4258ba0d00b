// One answer per request: a request whose head postern refuses while
// Node's parser goes on and then fails on the same message (a transfer
// coding llhttp checks only after handing the head over; a bad chunk of its
// body) is answered once, the refusal of its head or the parse failure's,
// never both (docs/proxy.md §6, "once"). It used to get two: the refusal's
// path checked whether a parse failure had cut the request before the
// parser had finished with the bytes its head came in, and a refusal sent
// before the body ended was followed by the body's parse failure as a
// second answer. Rows: on the agent socket, one write:
//   POST /v1/http HTTP/1.1\r\nTransfer-Encoding: "chunked"\r\n\r\n
// (was: 400 `header "host" is missing`, then 400 `malformed HTTP request
// (HPE_INVALID_TRANSFER_ENCODING)`); an Expect refusal or HTTP/1.0 with
// transfer-encoding, then a parse failure, on the agent socket and in a
// tunnel (seen doubled by the generators depending on timing).
import t from 'tap';
import net from 'node:net';
import {
  dummyPlaceholder,
  readResponses,
  runFuzzClient,
  show,
  type FuzzCase,
  targetEchoStack,
} from '../helpers/framing-kit';

const DUMMY = dummyPlaceholder('api');

function agentExchange(sock: string, wire: string): Promise<Buffer> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const got: Buffer[] = [];
    let timer: NodeJS.Timeout | null = null;
    const done = (): void => {
      if (timer) clearTimeout(timer);
      c.destroy();
      resolve(Buffer.concat(got));
    };
    const poke = (): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(done, 1500);
    };
    c.on('connect', () => {
      c.write(Buffer.from(wire, 'latin1'));
      poke();
    });
    c.on('data', (d: Buffer) => {
      got.push(d);
      poke();
    });
    c.on('error', done);
    c.on('close', done);
  });
}

t.test('a request refused on its head, then failing to parse: one answer', async (t) => {
  const { s, origin, A } = await targetEchoStack(t, 'DOUBLE');
  const agentRows: [string, string][] = [
    ['agent-no-host', 'POST /v1/http HTTP/1.1\r\nTransfer-Encoding: "chunked"\r\n\r\n'],
    [
      'agent-expect',
      'POST /v1/http HTTP/1.1\r\nHost: postern\r\nExpect: nothing\r\nTransfer-Encoding: xchunked\r\n\r\n',
    ],
  ];
  for (const [id, wire] of agentRows) {
    const raw = await agentExchange(s.sock, wire);
    const { responses } = readResponses(raw);
    t.equal(responses.length, 1, `${id}: one request, one answer\n  sent: ${show(wire)}\n  got: ${show(raw)}`);
  }
  const tunnelRows: [string, string][] = [
    ['tunnel-expect', `POST /d/1 HTTP/1.1\r\nHost: ${A}\r\nExpect: nothing\r\nTransfer-Encoding: xchunked\r\n\r\n`],
    ['tunnel-http10', `POST /d/2 HTTP/1.0\r\nHost: ${A}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n-3\r\n`],
    ['tunnel-http10-xchunked', `POST /d/3 HTTP/1.0\r\nHost: ${A}\r\nTransfer-Encoding: xchunked\r\n\r\n`],
  ];
  const cases: FuzzCase[] = tunnelRows.map(([id, wire]) => ({
    id,
    connect: A,
    writes: [{ data: Buffer.from(wire, 'latin1').toString('base64') }],
    expect: 2,
    idle: 1500,
  }));
  const run = await runFuzzClient(s.h, cases, { phVar: 'API_TOKEN', dummy: DUMMY, concurrency: 1, tag: 'double' });
  t.equal(run.code, 0, run.stderr);
  for (const [id, wire] of tunnelRows) {
    const raw = Buffer.from(run.got.get(id)?.raw ?? '', 'base64');
    const { responses } = readResponses(raw);
    t.equal(responses.length, 1, `${id}: one request, one answer\n  sent: ${show(wire)}\n  got: ${show(raw)}`);
  }
  t.equal(origin.requests.length, 0, 'nothing reached the origin');
});
