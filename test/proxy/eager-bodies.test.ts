// A client that sends a refused body anyway must still read the refusal.
// When postern refuses a request whose body is still arriving (over
// http.max_request_body, declared or not, with or without `Expect:
// 100-continue`) and closes the connection, closing at once while the
// client is still sending resets it: the reset reaches the client before
// it reads the answer, and the kernel discards the unread 413. botocore
// sends in-memory bodies with their head despite its own `Expect`; a
// chunked upload is read until it passes the limit. Each row here sends the
// whole body with its head, several times, and must read the 413.
import t from 'tap';
import net from 'node:net';
import { join } from 'node:path';
import { startProxyStack } from '../helpers/proxy-stack';
import { parseRaw, sendRaw, type Wire } from '../helpers/proxy-raw-client';
import { exposures } from '../helpers/exposure';
import { auditList } from '../helpers/stack';

const HOST = 'api.example.test';
const MiB = 1024 * 1024;

function chunked(size: number): Buffer {
  const piece = Buffer.alloc(64 * 1024, 'x');
  const parts: Buffer[] = [];
  for (let left = size; left > 0; left -= piece.length) {
    const p = piece.subarray(0, Math.min(piece.length, left));
    parts.push(Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

t.test('bodies sent with their head through `postern run`: the 413 is read every time', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  const head = (extra: string): string =>
    `PUT /upload HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:GH_TOKEN@@\r\n${extra}\r\n`;
  const rows: [string, string, Buffer][] = [
    [
      'Expect: 100-continue, 4 MiB declared and sent at once',
      head(`Expect: 100-continue\r\nContent-Length: ${4 * MiB}\r\n`),
      Buffer.alloc(4 * MiB, 'a'),
    ],
    ['chunked, 4 MiB, no Expect', head('Transfer-Encoding: chunked\r\n'), chunked(4 * MiB)],
    [
      'Content-Length beyond what is read and dropped (72 MiB), no Expect',
      head(`Content-Length: ${72 * MiB}\r\n`),
      Buffer.alloc(72 * MiB, 'b'),
    ],
  ];
  for (const [name, h, body] of rows) {
    const requests: Wire[] = [1, 2, 3].map((id) => ({
      id,
      connect: `${HOST}:${P}`,
      head: h,
      body: body.toString('base64'),
    }));
    const run = await sendRaw(s.h, requests, ['--credential', s.credential]);
    for (const id of [1, 2, 3]) {
      const a = run.answers.get(id);
      const raw = Buffer.from(a?.raw ?? '', 'base64');
      const p = raw.length ? parseRaw(raw) : null;
      t.equal(
        p?.status,
        413,
        `${name}, try ${id}: the client read the 413 (${a?.error ?? ''} ${p?.head ?? 'nothing'})`.trim(),
      );
      t.equal(p?.headers['x-postern-error'], 'body_too_large', `${name}, try ${id}: x-postern-error`);
    }
    t.same(exposures(run.stdout, s.secret), [], `${name}: no form of the secret in what the client read`);
  }
  t.equal(s.up.requests.filter((q) => q.url === '/upload').length, 0, 'nothing reached the upstream');
  const refused = auditList(s).filter((e) => e['kind'] === 'agent_refused' || e['kind'] === 'http_refused');
  t.same(
    refused.map((e) => e['code']),
    Array(9).fill('body_too_large'),
    `one body_too_large each, no stray refusal of the dropped bytes: ${JSON.stringify(refused.map((e) => [e['code'], e['endpoint']]))}`,
  );
  t.same(await s.exposed(), [], 'no form of the secret in any output, the log or the journal');
});

// The JSON front door: a POST /v1/http body beyond its limit, written at
// once on the agent socket.
function eagerPost(sock: string, size: number): Promise<{ raw: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const got: Buffer[] = [];
    let error: string | undefined;
    c.on('connect', () => {
      c.write(
        `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-type: application/json\r\ncontent-length: ${size}\r\n\r\n`,
      );
      c.write(Buffer.alloc(size, ' '));
    });
    c.on('data', (d) => got.push(d));
    c.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    c.on('close', () => resolve({ raw: Buffer.concat(got), error }));
    setTimeout(() => c.destroy(), 20_000).unref();
  });
}

t.test('POST /v1/http with a body over its limit sent at once: the 413 is read every time', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  for (let i = 1; i <= 4; i++) {
    const r = await eagerPost(join(s.h.home, 'agent.sock'), 24 * MiB);
    const status = r.raw.length ? parseRaw(r.raw).status : null;
    t.equal(status, 413, `try ${i}: the agent read the 413 (${r.error ?? ''} ${r.raw.subarray(0, 120).toString()})`);
    t.match(r.raw.toString(), /"code":"body_too_large"/, `try ${i}: body_too_large`);
    t.equal(r.error, undefined, `try ${i}: the connection closed in order, not reset under the agent's writes`);
  }
});
