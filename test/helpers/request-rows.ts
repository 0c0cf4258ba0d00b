// The row runner shared by the hostile request tables: each row is sent to
// the real daemon and must give the exact status and code; refusals must be
// journaled (a new audit_seq) and must not reach the upstream (no request,
// no connection); successes must reach it exactly once. Every reply, the
// daemon log and the journal (its files and its decrypted entries) are
// searched for the secret canary.
import type { Test } from 'tap';
import net from 'node:net';
import type { Stack } from './stack';
import type { SeenRequest } from './https-upstream';
import { findCanary, journalBytes, journalText } from './canary';

export interface Reply {
  status: number;
  body: string;
  target: { host: string; address: string; port: number };
}

export interface Row {
  what: string;
  // A JSON request, or the raw bytes of one (for malformed JSON).
  req: Record<string, unknown> | { raw: Buffer };
  status: number;
  code?: string; // absent: success
  message?: RegExp;
  seen?: (t: Test, seen: SeenRequest, reply: Reply) => void; // for successes
}

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown };
}

export function rawRequest(sock: string, payload: Buffer): Promise<{ status: number; json: unknown; text: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(sock);
    const chunks: Buffer[] = [];
    s.on('connect', () => {
      s.write(
        `POST /v1/http HTTP/1.1\r\nhost: postern\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${payload.length}\r\n\r\n`,
      );
      s.write(payload);
    });
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', reject);
    s.on('close', () => {
      const data = Buffer.concat(chunks).toString('utf8');
      const text = data.slice(data.indexOf('\r\n\r\n') + 4);
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
      resolve({ status: Number(data.split(' ')[1]), json, text });
    });
  });
}

export async function runRows(t: Test, s: Stack, table: Row[], secret: string): Promise<void> {
  t.ok(table.length >= 80, `${table.length} rows`);
  const texts: string[] = [];
  let lastSeq = 0;
  for (const row of table) {
    await t.test(row.what, async (t) => {
      const before = { requests: s.up.requests.length, connections: s.up.connections() };
      const r =
        'raw' in row.req && Buffer.isBuffer(row.req.raw)
          ? await rawRequest(s.sock, row.req.raw)
          : await s.request(row.req);
      texts.push(r.text);
      t.same(findCanary(r.text, secret), [], 'no form of the secret in the reply');
      t.equal(r.status, row.status, r.text.slice(0, 600));
      if (row.code === undefined) {
        const reply = r.json as Reply;
        t.equal(reply?.status, 200, 'the upstream answered');
        t.equal(s.up.requests.length, before.requests + 1, 'the upstream saw exactly one request');
        const seen = s.up.requests.at(-1);
        if (seen && row.seen) row.seen(t, seen, reply);
        return;
      }
      const err = (r.json as ErrorBody | null)?.error;
      t.equal(err?.code, row.code);
      if (row.message) t.match(err?.message, row.message);
      t.type(err?.audit_seq, 'number', 'the refusal is journaled');
      if (typeof err?.audit_seq === 'number') {
        t.ok(err.audit_seq > lastSeq, 'with a new journal entry');
        lastSeq = err.audit_seq;
      }
      t.equal(s.up.requests.length, before.requests, 'the upstream saw no request');
      t.equal(s.up.connections(), before.connections, 'no connection was made');
    });
  }
  await s.d.stop();
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
}
