// Hostile shapes of the agent's own request on the JSON agent socket:
// deep JSON nesting (top level, inside a field, in an unknown field),
// thousands of header lines, one very long header line, a JSON body sent in
// a hundred thousand one-byte chunks, and thousands of headers in the JSON
// `headers` field. Expected (SPEC §1, §6.3): each gets an answer (a 4xx with
// postern's JSON error where postern refuses; `bad_request` for malformed
// input), the daemon keeps running, and a normal request is served after.
import t from 'tap';
import net from 'node:net';
import type { Test } from 'tap';
import { startStack } from '../helpers/stack';

interface Raw {
  status: number;
  head: string;
  body: string;
  closed: boolean;
}

// Sends `parts` (written one after another) and collects the raw answer.
function rawRequest(sock: string, parts: (string | Buffer)[], guardMs = 60_000): Promise<Raw> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(guard);
      c.destroy();
      const data = Buffer.concat(chunks).toString('utf8');
      const i = data.indexOf('\r\n\r\n');
      const head = i === -1 ? data : data.slice(0, i);
      resolve({ status: Number(head.split(' ')[1]), head, body: i === -1 ? '' : data.slice(i + 4), closed });
    };
    const guard = setTimeout(() => finish(false), guardMs);
    c.on('connect', async () => {
      for (const p of parts) {
        if (!c.writable) break;
        if (!c.write(p)) await new Promise((r) => c.once('drain', r));
      }
    });
    c.on('data', (d: Buffer) => chunks.push(d));
    c.on('error', () => undefined);
    c.on('close', () => finish(true));
  });
}

function post(body: string | Buffer): (string | Buffer)[] {
  return [
    `POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
    body,
  ];
}

function code(r: Raw): string | undefined {
  try {
    return (JSON.parse(r.body) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

t.test('hostile request shapes on the agent socket', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET", "POST"]\n`,
    'request-shapes-secret-0123456789',
  );
  await s.approver();
  const alive = (): boolean => s.d.proc.exitCode === null && s.d.proc.signalCode === null;
  const url = s.url('api.example.test', '/ok');
  const normal = async (t: Test, what: string): Promise<void> => {
    t.ok(alive(), `the daemon is running after ${what}`);
    const r = await s.request({ credential: 'api', method: 'GET', url });
    t.equal(r.status, 200, `a normal request is served after ${what}: ${r.text.slice(0, 200)}`);
  };
  const first = await s.request({ credential: 'api', method: 'GET', url });
  t.equal(first.status, 200, first.text);

  await t.test('JSON nested 3,000,000 deep at the top level: 400 bad_request', async (t) => {
    const n = 3_000_000;
    const r = await rawRequest(s.sock, post('['.repeat(n) + ']'.repeat(n)));
    t.equal(r.status, 400, r.head.split('\r\n')[0] ?? '');
    t.equal(code(r), 'bad_request', r.body.slice(0, 300));
    await normal(t, 'deep JSON');
  });

  await t.test('JSON nested 1,000,000 deep inside "headers": 400 bad_request', async (t) => {
    const n = 1_000_000;
    const body = `{"credential":"api","method":"GET","url":${JSON.stringify(url)},"headers":{"x-a":${'['.repeat(n)}${']'.repeat(n)}}}`;
    const r = await rawRequest(s.sock, post(body));
    t.equal(r.status, 400, r.head.split('\r\n')[0] ?? '');
    t.equal(code(r), 'bad_request', r.body.slice(0, 300));
    await normal(t, 'deep JSON in headers');
  });

  await t.test('JSON nested 1,000,000 deep in an unknown field: answered, 400 bad_request', async (t) => {
    const n = 1_000_000;
    const body = `{"credential":"api","method":"GET","url":${JSON.stringify(url)},"zz":${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`;
    const r = await rawRequest(s.sock, post(body));
    t.equal(r.status, 400, r.head.split('\r\n')[0] ?? '');
    t.equal(code(r), 'bad_request', r.body.slice(0, 300));
    await normal(t, 'deep JSON in an unknown field');
  });

  await t.test('JSON nested 1,000,000 deep in "reason": answered, 400 bad_request', async (t) => {
    const n = 1_000_000;
    const body = `{"credential":"api","method":"GET","url":${JSON.stringify(url)},"reason":${'['.repeat(n)}${']'.repeat(n)}}`;
    const r = await rawRequest(s.sock, post(body));
    t.equal(r.status, 400, r.head.split('\r\n')[0] ?? '');
    t.equal(code(r), 'bad_request', r.body.slice(0, 300));
    await normal(t, 'deep JSON in reason');
  });

  await t.test('10,000 header lines in the request head: a 4xx answer', async (t) => {
    const body = JSON.stringify({ credential: 'api', method: 'GET', url });
    let head = 'POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\n';
    for (let i = 0; i < 10_000; i++) head += `x-h${i}: v\r\n`;
    head += `content-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const r = await rawRequest(s.sock, [head, body]);
    t.ok(r.status >= 400 && r.status < 500, `a 4xx: ${r.head.split('\r\n')[0] ?? '(nothing)'}`);
    await normal(t, 'many header lines');
  });

  await t.test('one header line of 1 MiB: a 4xx answer', async (t) => {
    const body = JSON.stringify({ credential: 'api', method: 'GET', url });
    const head = `POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\nx-long: ${'a'.repeat(1 << 20)}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const r = await rawRequest(s.sock, [head, body]);
    t.ok(r.status >= 400 && r.status < 500, `a 4xx: ${r.head.split('\r\n')[0] ?? '(nothing)'}`);
    await normal(t, 'a long header line');
  });

  await t.test('a 100 KB JSON body in 100,000 one-byte chunks: served', async (t) => {
    const payload = JSON.stringify({ credential: 'api', method: 'POST', url, body: 'b'.repeat(100_000) });
    const parts: string[] = [
      'POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n',
    ];
    // Written as a few large writes: the chunk framing, not the syscalls, is the point.
    let buf = '';
    for (const ch of payload) {
      buf += `1\r\n${ch}\r\n`;
      if (buf.length > 60_000) {
        parts.push(buf);
        buf = '';
      }
    }
    parts.push(buf + '0\r\n\r\n');
    const r = await rawRequest(s.sock, parts);
    t.equal(r.status, 200, `${r.head.split('\r\n')[0] ?? ''} ${r.body.slice(0, 200)}`);
    await normal(t, 'a body in tiny chunks');
  });

  await t.test('5,000 headers in the JSON "headers" field: answered, daemon fine', async (t) => {
    const headers: Record<string, string> = {};
    for (let i = 0; i < 5000; i++) headers[`x-h${i}`] = 'v';
    const r = await s.request({ credential: 'api', method: 'GET', url, headers });
    t.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `answered: ${r.status} ${r.text.slice(0, 200)}`);
    await normal(t, 'many JSON headers');
  });
});
