// Transfer codings other than chunked through the real daemon (SPEC §6.2,
// §6.4): an origin that writes its responses byte by byte, over TLS and over
// plain http, echoes the injected "Bearer <secret>" inside a body sent with
// Transfer-Encoding gzip, x-gzip, deflate (zlib-wrapped and raw) or br, then
// chunked; the same codings without chunked (the body delimited by the
// close); stacked ("gzip, deflate, chunked"), on two header lines, in upper
// case; under a Content-Encoding too (TE gzip + CE br, TE deflate + CE gzip);
// gzip with stored blocks in 5-byte chunks, so chunk boundaries fall inside
// the secret on the wire. Each comes back decoded, as UTF-8 text, with the
// secret redacted (redactions: 1) and no Transfer-Encoding, Content-Encoding
// or Content-Length that describes the wire bytes. A coding postern cannot
// undo (compress, x-compress, zstd, chunked not last, a coding named as the
// secret) and a gzip body that does not decode are 502 upstream_error with
// maybe_executed: true, the upstream having seen the request once; a 64 MiB
// gzip bomb as a transfer coding stops at max_response_body, as under
// Content-Encoding. No form of the secret in any reply, the daemon log or
// the journal.
import t, { Test } from 'tap';
import zlib from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { startStack, Stack } from '../helpers/stack';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { chunked, header, RawOrigin, rawResponse, startRawOrigin } from '../helpers/raw-origin';
import type { AgentResponse } from '../../daemon/pipeline/response';

const HOST = 'api.example.test';
const CAP = 64 * 1024;
const MARK = '[REDACTED:api]';
const TEXT = Array.from({ length: 100 }, (_, i) => `{"line":${i},"word":"postern-${(i * 7919) % 1000}"}\n`).join('');
const body = (s: string): string => `${TEXT}{"you sent":"Bearer ${s}"}\n${TEXT}`;
const EXPECTED = body('').replace('Bearer ', MARK);

const gzip = (b: Buffer | string): Buffer => zlib.gzipSync(b);
const deflate = (b: Buffer | string): Buffer => zlib.deflateSync(b);
const br = (b: Buffer | string): Buffer => zlib.brotliCompressSync(b);
const BOMB_GZIP = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });

interface Route {
  te: string[]; // Transfer-Encoding header lines
  ce?: string;
  type?: string;
  // The body after the codings, before chunking.
  coded(secret: string): Buffer;
  framing: 'chunked' | 'close';
  sizes?: number[]; // chunk sizes
}

const DECODED: Record<string, Route> = {
  '/te/gzip': { te: ['gzip, chunked'], coded: (s) => gzip(body(s)), framing: 'chunked', sizes: [1, 2, 3, 700] },
  '/te/x-gzip': { te: ['x-gzip, chunked'], coded: (s) => gzip(body(s)), framing: 'chunked' },
  '/te/deflate': { te: ['deflate, chunked'], coded: (s) => deflate(body(s)), framing: 'chunked' },
  '/te/deflate-raw': { te: ['deflate, chunked'], coded: (s) => zlib.deflateRawSync(body(s)), framing: 'chunked' },
  '/te/br': { te: ['br, chunked'], coded: (s) => br(body(s)), framing: 'chunked' },
  '/te/upper': { te: ['GZIP, Chunked'], coded: (s) => gzip(body(s)), framing: 'chunked' },
  '/te/two-lines': { te: ['gzip', 'chunked'], coded: (s) => gzip(body(s)), framing: 'chunked' },
  '/te/stacked': { te: ['gzip, deflate, chunked'], coded: (s) => deflate(gzip(body(s))), framing: 'chunked' },
  '/te/gzip-close': { te: ['gzip'], coded: (s) => gzip(body(s)), framing: 'close' },
  '/te/deflate-close': { te: ['deflate'], coded: (s) => deflate(body(s)), framing: 'close' },
  '/te/gzip-ce-br': { te: ['gzip, chunked'], ce: 'br', coded: (s) => gzip(br(body(s))), framing: 'chunked' },
  '/te/deflate-ce-gzip': {
    te: ['deflate, chunked'],
    ce: 'gzip',
    coded: (s) => deflate(gzip(body(s))),
    framing: 'chunked',
  },
  // Stored blocks: the secret's bytes stand on the wire as they are, cut by
  // chunk boundaries every 5 bytes.
  '/te/gzip-stored-split': {
    te: ['gzip, chunked'],
    coded: (s) => zlib.gzipSync(body(s), { level: 0 }),
    framing: 'chunked',
    sizes: [5],
  },
};

const REFUSED: Record<string, Route> = {
  '/te/compress': { te: ['compress, chunked'], coded: (s) => Buffer.from(body(s)), framing: 'chunked' },
  '/te/x-compress': { te: ['x-compress, chunked'], coded: (s) => Buffer.from(body(s)), framing: 'chunked' },
  '/te/zstd': { te: ['zstd, chunked'], coded: (s) => Buffer.from(body(s)), framing: 'chunked' },
  '/te/gzip-zstd': { te: ['gzip, zstd, chunked'], coded: (s) => gzip(body(s)), framing: 'chunked' },
  // chunked not last: the message is not chunked at all (RFC 9112 §6.3).
  '/te/chunked-then-gzip': {
    te: ['chunked, gzip'],
    coded: (s) => gzip(chunked(Buffer.from(body(s)), [64])),
    framing: 'close',
  },
  '/te/corrupt-gzip': {
    te: ['gzip, chunked'],
    coded: (s) => {
      const g = gzip(body(s));
      for (let i = 20; i < 60; i++) g[i] = 0xff;
      return g;
    },
    framing: 'chunked',
  },
  // An upstream that echoes the secret as the coding's name.
  '/te/coding-is-secret': { te: [], coded: (s) => gzip(body(s)), framing: 'chunked' },
};

const BOMBS: Record<string, Route> = {
  '/te/bomb-chunked': {
    te: ['gzip, chunked'],
    type: 'application/octet-stream',
    coded: () => BOMB_GZIP,
    framing: 'chunked',
    sizes: [16 * 1024],
  },
  '/te/bomb-close': { te: ['gzip'], type: 'application/octet-stream', coded: () => BOMB_GZIP, framing: 'close' },
};

const ROUTES: Record<string, Route> = {
  ...DECODED,
  ...REFUSED,
  ...BOMBS,
  '/te/chunked-only': { te: ['chunked'], coded: (s) => Buffer.from(body(s)), framing: 'chunked', sizes: [5] },
};

let s: Stack;
let secret: string;
// A secret in lower case, as coding names are once normalised.
const LOWER = `sk_${randomBytes(16).toString('hex')}`;
const replies: string[] = [];
const origins: { scheme: 'https' | 'http'; origin: RawOrigin }[] = [];

function respond(target: string, auth: string): { bytes: Buffer; close: boolean } {
  const path = target.split('?')[0] as string;
  const r = ROUTES[path];
  if (!r) return { bytes: rawResponse(404, [['Content-Length', '0']]), close: false };
  const s = auth.replace(/^Bearer /, '');
  const te = path === '/te/coding-is-secret' ? [`gzip, ${s}, chunked`] : r.te;
  const headers: [string, string][] = [
    ['Content-Type', r.type ?? 'text/plain; charset=utf-8'],
    ['X-Kept', 'yes'],
    ...te.map((v): [string, string] => ['Transfer-Encoding', v]),
  ];
  if (r.ce) headers.push(['Content-Encoding', r.ce]);
  const coded = r.coded(s);
  return {
    bytes: rawResponse(200, headers, r.framing === 'chunked' ? chunked(coded, r.sizes ?? [997]) : coded),
    close: r.framing === 'close',
  };
}

function apiDef(name: string): string {
  const ports = origins.map((o) => o.origin.port).join(', ');
  return (
    `name = "${name}"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
    `[[allow]]\nhost = "${HOST}"\nschemes = ["https", "http"]\nports = [${ports}]\nmethods = ["GET"]\npaths = ["/te/*"]\n`
  );
}

t.before(async () => {
  s = await startStack({ httpConfig: 'max_response_body = "64KiB"' });
  secret = makeCanary('TOKEN');
  for (const scheme of ['https', 'http'] as const) {
    const origin = await startRawOrigin(
      { ...(scheme === 'https' ? { tls: { key: s.ca.key, cert: s.ca.cert } } : {}), honourClose: true },
      (head) => {
        const { bytes, close } = respond(head.target, header(head, 'authorization') ?? '');
        return { read: 'declared', respond: () => bytes, close };
      },
    );
    origins.push({ scheme, origin });
  }
  s.addCredential('api', apiDef('api'), secret);
  s.addCredential('lower', apiDef('lower'), LOWER);
  await s.approver();
});
t.teardown(async () => {
  for (const o of origins) await o.origin.close();
  await s.close();
});

async function get(
  t: Test,
  o: { scheme: string; origin: RawOrigin },
  path: string,
  credential = 'api',
): Promise<{ status: number; json: unknown; text: string }> {
  const r = await s.request({ credential, method: 'GET', url: `${o.scheme}://${HOST}:${o.origin.port}${path}` });
  replies.push(r.text);
  t.same(exposures(r.text, credential === 'api' ? secret : LOWER), [], `${path}: no form of the secret in the reply`);
  return r;
}

// The reply must not say the body still has a coding it no longer has.
function noWireCoding(t: Test, reply: AgentResponse): void {
  if (!reply?.headers) {
    t.fail('no reply to check the headers of');
    return;
  }
  const te = reply.headers['transfer-encoding'];
  t.ok(
    te === undefined || (typeof te === 'string' && te.trim().toLowerCase() === 'chunked'),
    `no transfer coding claimed (transfer-encoding: ${JSON.stringify(te)})`,
  );
  t.equal(reply.headers['content-encoding'], undefined, 'no content-encoding');
  t.equal(reply.headers['content-length'], undefined, 'no content-length of the wire bytes');
}

for (const scheme of ['https', 'http'] as const) {
  t.test(`over ${scheme}`, async (t) => {
    const o = origins.find((x) => x.scheme === scheme)!;

    await t.test('transfer codings postern undoes: decoded, then redacted', async (t) => {
      for (const path of Object.keys(DECODED)) {
        await t.test(path, async (t) => {
          const r = await get(t, o, path);
          t.equal(r.status, 200, r.text.slice(0, 300));
          const reply = r.json as AgentResponse;
          t.equal(reply.status, 200);
          t.equal(reply.body_encoding, 'utf8', 'text, not base64 of the wire bytes');
          t.equal(reply.body, EXPECTED, 'the decoded body, the secret replaced');
          t.equal(reply.redactions, 1, 'the echoed secret counted');
          t.equal(reply.truncated, false);
          noWireCoding(t, reply);
          t.equal(reply.headers['x-kept'], 'yes', 'other headers kept');
          t.equal(reply.headers['content-type'], 'text/plain; charset=utf-8');
        });
      }
      await t.test('chunked alone, boundaries inside the secret (no coding to undo)', async (t) => {
        const r = await get(t, o, '/te/chunked-only');
        t.equal(r.status, 200, r.text.slice(0, 300));
        const reply = r.json as AgentResponse;
        t.equal(reply.body, EXPECTED);
        t.equal(reply.redactions, 1);
        noWireCoding(t, reply);
      });
    });

    await t.test('transfer codings postern cannot undo: 502 upstream_error, executed', async (t) => {
      for (const path of Object.keys(REFUSED)) {
        await t.test(path, async (t) => {
          const before = o.origin.requests.length;
          const credential = path === '/te/coding-is-secret' ? 'lower' : 'api';
          const r = await get(t, o, path, credential);
          t.equal(r.status, 502, r.text.slice(0, 300));
          const err = (
            r.json as { error?: { code: string; message: string; maybe_executed?: boolean; audit_seq?: number } }
          ).error;
          t.equal(err?.code, 'upstream_error');
          t.equal(err?.maybe_executed, true, 'maybe_executed');
          t.type(err?.audit_seq, 'number', 'journaled');
          t.match(err?.message, /executed/, 'the message says the request ran');
          t.equal(o.origin.requests.length, before + 1, 'the origin saw the request once');
          if (credential === 'lower')
            t.equal(
              header(o.origin.requests.at(-1)!, 'authorization'),
              `Bearer ${LOWER}`,
              'the origin received the secret it named the coding after',
            );
        });
      }
    });

    await t.test('a gzip bomb as a transfer coding stops at the cap', async (t) => {
      t.ok(BOMB_GZIP.length < CAP + 2048, `the bomb is ${BOMB_GZIP.length} bytes for 64 MiB decoded`);
      for (const path of Object.keys(BOMBS)) {
        await t.test(path, async (t) => {
          const started = Date.now();
          const r = await get(t, o, path);
          t.equal(r.status, 200, r.text.slice(0, 300));
          const reply = r.json as AgentResponse;
          t.equal(reply.truncated, true, 'truncated');
          t.equal(reply.body_encoding, 'base64');
          const bytes = Buffer.from(reply.body, 'base64');
          t.equal(bytes.length, CAP, 'exactly max_response_body bytes');
          t.ok(
            bytes.every((b) => b === 0),
            'the decoded zeros',
          );
          noWireCoding(t, reply);
          t.ok(Date.now() - started < 10_000, 'answered without decoding it all');
        });
      }
    });
  });
}

t.test('no form of a secret in the replies, the daemon log or the journal', async (t) => {
  await s.d.stop();
  const journal = await journalText(s.h);
  for (const x of [secret, LOWER]) {
    t.same(exposures(replies.join('\n'), x), [], 'the replies');
    t.same(exposures(s.d.logs(), x), [], 'the daemon log');
    t.same(findCanary(s.d.logs(), x), [], 'the daemon log (canary forms)');
    t.same(findCanary(journalBytes(s.h.home), x), [], 'the journal files');
    t.same(exposures(journal, x), [], 'the decrypted journal');
    t.same(findCanary(journal, x), [], 'the decrypted journal (canary forms)');
  }
});
