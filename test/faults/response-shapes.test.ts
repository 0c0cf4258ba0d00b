// Responses an unlucky (or hostile) upstream sends: a body in a
// million one-byte chunks, and four 4 MiB ones at once. Expected (SPEC §1,
// §6.4): each is answered whole, requests covered by a session are served
// meanwhile, and the daemon keeps running.
import t from 'tap';
import net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack } from '../helpers/stack';
import { echo } from '../helpers/https-upstream';

const MiB = 1 << 20;

// POST /v1/http, counting the reply's bytes instead of keeping them; the
// JSON is parsed only when small.
function countedRequest(
  sock: string,
  body: unknown,
  guardMs = 120_000,
): Promise<{ status: number; bytes: number; json: Record<string, unknown> | null; tail: string }> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const payload = JSON.stringify(body);
    let head = '';
    let bytes = 0;
    let keep: Buffer[] = [];
    let tail = '';
    const guard = setTimeout(() => c.destroy(), guardMs);
    c.on('connect', () =>
      c.write(
        `POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      ),
    );
    c.on('data', (d: Buffer) => {
      bytes += d.length;
      if (keep.length < 4 || bytes < 64 * 1024) keep.push(d);
      tail = (tail + d.toString('latin1')).slice(-400);
    });
    c.on('error', () => undefined);
    c.on('close', () => {
      clearTimeout(guard);
      const first = Buffer.concat(keep).toString('utf8');
      keep = [];
      head = first.split('\r\n\r\n')[0] ?? '';
      let json: Record<string, unknown> | null = null;
      if (bytes < 64 * 1024) {
        try {
          json = JSON.parse(first.slice(head.length + 4)) as Record<string, unknown>;
        } catch {
          json = null;
        }
      }
      resolve({ status: Number(head.split(' ')[1]), bytes, json, tail });
    });
  });
}

// A chunked body of `n` one-byte chunks, written raw on the socket.
function tinyChunks(res: ServerResponse, n: number): void {
  const parts: string[] = [
    'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n',
  ];
  let buf = '';
  for (let i = 0; i < n; i++) {
    buf += '1\r\nz\r\n';
    if (buf.length >= 600_000) {
      parts.push(buf);
      buf = '';
    }
  }
  parts.push(buf + '0\r\n\r\n');
  const sock = res.socket!;
  for (const p of parts) sock.write(p);
  sock.end();
}

t.test('hostile responses', async (t) => {
  const s = await startStack({
    handler: (req: IncomingMessage, body: Buffer, res: ServerResponse) => {
      const url = req.url ?? '';
      if (url.startsWith('/tiny')) return tinyChunks(res, Number(new URL(url, 'https://x').searchParams.get('n')));
      return echo(req, body, res);
    },
  });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\n`,
    'response-shapes-secret-0123456789',
  );
  await s.approver();
  const alive = (): boolean => s.d.proc.exitCode === null && s.d.proc.signalCode === null;
  const first = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/ok') });
  t.equal(first.status, 200, first.text.slice(0, 200));

  await t.test('a 1 MiB body in 1,048,576 one-byte chunks: whole, not truncated', async (t) => {
    const n = MiB;
    const during = (async () => {
      await new Promise((r) => setTimeout(r, 300));
      return s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/ok-during') });
    })();
    const r = await countedRequest(s.sock, {
      credential: 'api',
      method: 'GET',
      url: s.url('api.example.test', `/tiny?n=${n}`),
      timeout_ms: 110_000,
    });
    t.equal(r.status, 200, `reply ${r.status}, ${r.bytes} bytes, ends ${r.tail.slice(-200)}`);
    t.match(r.tail, /"truncated":false/, 'not truncated');
    t.ok(r.bytes > n, `the whole body came back (${r.bytes} bytes)`);
    const d = await during;
    t.equal(d.status, 200, `a request meanwhile is served: ${d.text.slice(0, 100)}`);
    t.ok(alive(), 'the daemon is running');
  });

  await t.test('a 4 MiB body in one-byte chunks, 4 at once: answered, daemon fine', async (t) => {
    const rs = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        countedRequest(s.sock, {
          credential: 'api',
          method: 'GET',
          url: s.url('api.example.test', `/tiny?n=${4 * MiB}&i=${i}`),
          timeout_ms: 110_000,
        }),
      ),
    );
    for (const r of rs) t.equal(r.status, 200, `reply ${r.status}, ${r.bytes} bytes, ends ${r.tail.slice(-200)}`);
    t.ok(alive(), 'the daemon is running');
  });
});
