// A client that goes away in the middle of its request (a cancelled
// `curl`, a killed MCP bridge) is not a malformed request: since malformed
// HTTP on the agent socket is journaled, such a connection was journaled
// twice, once as malformed (HPE_INVALID_EOF_STATE) and once as an internal
// error (its body's read failed with a non-refusal), with an error in the
// log. Now at most one refusal that says the connection closed.
import t from 'tap';
import net from 'node:net';
import { startStack, auditList } from '../helpers/stack';
import { startProxyStack } from '../helpers/proxy-stack';
import { sendRaw, type Wire } from '../helpers/proxy-raw-client';
import { exposures } from '../helpers/exposure';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('clients that go away mid-request', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const before = auditList(s).length;
  const send = (wire: string, how: 'end' | 'destroy'): Promise<string> =>
    new Promise((resolve) => {
      const c = net.connect(s.sock);
      let got = '';
      c.on('data', (d: Buffer) => (got += d.toString('latin1')));
      c.on('error', () => undefined);
      c.on('close', () => resolve(got));
      c.on('connect', () => {
        c.write(wire);
        setTimeout(() => (how === 'end' ? c.end() : c.destroy()), 300);
        setTimeout(() => c.destroy(), 3000);
      });
    });
  const partialBody = `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"credential":`;
  const partialHead = `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-ty`;
  const r1 = await send(partialBody, 'end');
  const r2 = await send(partialBody, 'destroy');
  const r3 = await send(partialHead, 'end');
  await sleep(1500);
  const entries = auditList(s)
    .slice(before)
    .filter((e) => e['type'] === 'event');
  t.comment(`half-close mid-body answered: ${JSON.stringify(r1.slice(0, 300))}`);
  t.comment(`close mid-body answered: ${JSON.stringify(r2.slice(0, 200))}`);
  t.comment(`half-close mid-head answered: ${JSON.stringify(r3.slice(0, 300))}`);
  t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code'], e['endpoint']]))}`);
  const log = s.d.logs();
  const errs = log.split('\n').filter((l) => /agent_error|internal_error/.test(l));
  t.comment(`log errors: ${errs.length} ${errs.slice(0, 2).join(' / ').slice(0, 400)}`);
  t.equal(errs.length, 0, 'a client going away is not logged as an internal error');
  t.same(
    entries.map((e) => [e['kind'], e['code'], e['endpoint']]),
    [
      ['agent_refused', 'bad_request', 'POST /v1/http'],
      ['agent_refused', 'bad_request', 'POST /v1/http'],
    ],
    'each body cut off is one bad_request; a head cut off is nothing (no request was made)',
  );
  t.equal(
    entries.filter((e) => e['code'] === 'internal_error').length,
    0,
    'a client going away is not journaled as internal_error',
  );
});

// The same inside a terminated CONNECT tunnel: a body cut off is one
// bad_request naming the proxied request, a head cut off is nothing, and
// neither sends anything upstream or logs an internal error.
t.test('proxied clients that go away mid-request', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const HOST = 'api.example.test';
  const P = s.up.port;
  const before = auditList(s).length;
  const body: Wire = {
    id: 0,
    connect: `${HOST}:${P}`,
    head: `POST /cut HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:GH_TOKEN@@\r\nContent-Length: 100\r\n\r\n`,
    body: Buffer.from('{"partial":').toString('base64'),
  };
  const head: Wire = { id: 0, connect: `${HOST}:${P}`, head: `POST /cut HTTP/1.1\r\nHost: ${HOST}:${P}\r\nContent-ty` };
  const run = await sendRaw(s.h, [
    { ...body, id: 'body-end', cut: { how: 'end', afterMs: 300 } },
    { ...body, id: 'body-destroy', cut: { how: 'destroy', afterMs: 300 } },
    { ...head, id: 'head-end', cut: { how: 'end', afterMs: 300 } },
  ]);
  for (const [id, a] of run.answers)
    t.not(a.error, 'timeout', `${id}: the tunnel closed (${JSON.stringify(a).slice(0, 200)})`);
  await sleep(1500);
  const entries = auditList(s)
    .slice(before)
    .filter((e) => e['type'] === 'event');
  t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code'], e['endpoint']]))}`);
  const errs = s.d
    .logs()
    .split('\n')
    .filter((l) => /agent_error|internal_error/.test(l));
  t.equal(errs.length, 0, `no internal error logged (${errs.slice(0, 2).join(' / ').slice(0, 400)})`);
  const refusals = entries.filter((e) => e['kind'] !== 'run_start' && e['kind'] !== 'run_end');
  t.same(
    refusals.map((e) => [e['kind'], e['code'], e['endpoint']]),
    [
      ['agent_refused', 'bad_request', `POST https://${HOST}:${P}`],
      ['agent_refused', 'bad_request', `POST https://${HOST}:${P}`],
    ],
    'each body cut off is one bad_request; a head cut off is nothing',
  );
  t.equal(s.up.requests.filter((q) => q.url === '/cut').length, 0, 'nothing reached the upstream');
  t.same(exposures(run.stdout, s.secret), [], 'no secret in what the client got');
});
