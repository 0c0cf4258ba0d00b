// A hostile or clumsy client of the JSON agent socket, raw bytes: requests
// pipelined then half-closed (the first ran upstream, none was answered;
// now none is sent),
// and an absolute-form request with an Expect other than 100-continue.
import t from 'tap';
import { startStack, auditList, type Stack } from '../helpers/stack';
import { exchange, messages, json, type Msg } from '../helpers/agent-exchange';
import { makeCanary } from '../helpers/canary';

const HOST = 'api.example.test';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function errOf(m: Msg | undefined): { code?: string; audit_seq?: unknown } | undefined {
  return json(m)['error'] as { code?: string; audit_seq?: unknown } | undefined;
}

t.test('Expect on absolute-form; half-close journal', async (t) => {
  const s: Stack = await startStack({ config: 'agent_request_timeout = "2s"' });
  t.teardown(() => s.close());
  const P = s.up.port;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = ["GET", "POST"]\n`,
    makeCanary('EXPHC'),
  );
  await s.approver();
  const req = (path: string): string => {
    const b = JSON.stringify({ credential: 'api', method: 'GET', url: s.url(HOST, path) });
    return `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
  };
  const warm = await s.request({ credential: 'api', method: 'GET', url: s.url(HOST, '/warm') });
  t.equal(warm.status, 200, 'warm-up');

  await t.test('absolute-form request with Expect: x-fancy', async (t) => {
    const before = auditList(s).length;
    const { raw } = await exchange(s.sock, [
      `GET http://${HOST}:${P}/abs HTTP/1.1\r\nHost: ${HOST}:${P}\r\nexpect: x-fancy\r\n\r\n`,
    ]);
    const { msgs } = messages(raw);
    const entries = auditList(s).slice(before);
    t.comment(`raw: ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`);
    t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code']]))}`);
    t.ok(msgs[0]?.headers['x-postern-error'], 'refusal has x-postern-error');
    t.type(errOf(msgs[0])?.audit_seq, 'number', 'refusal has audit_seq');
    t.ok(entries.length > 0, 'journaled');
  });

  await t.test('five pipelined then half-close: journal after the timeout', async (t) => {
    const before = auditList(s).length;
    const paths = ['/h5a', '/h5b', '/h5c', '/h5d', '/h5e'];
    const { raw } = await exchange(s.sock, [paths.map(req).join(''), 'end'], 2000, 8000);
    await sleep(3500);
    const entries = auditList(s).slice(before);
    const msgs = messages(raw).msgs;
    const sent = paths.map((p) => s.up.requests.filter((q) => q.url === p).length);
    t.comment(`answers ${msgs.length}; upstream ${JSON.stringify(sent)}`);
    t.comment(`journal: ${JSON.stringify(entries.map((e) => [e['kind'], e['code'], e['endpoint']]))}`);
    // The defect: the first ran upstream, with the secret, and none was
    // answered. Now a client's end of sending is its going away: none is sent.
    paths.forEach((p, i) =>
      t.ok(sent[i] === 0 || msgs.some((m) => m.status === 200), `${p}: never run upstream without an answer`),
    );
    t.same(sent, [0, 0, 0, 0, 0], 'none sent');
    t.equal(entries.filter((e) => e['kind'] === 'http_intent').length, 0, 'no intent journaled');
  });
});
