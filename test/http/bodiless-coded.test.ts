// Responses without a body whose headers name a coding, through BOTH front
// doors: the answer to HEAD, a 304 and a 204 carrying the Content-Encoding
// (or Transfer-Encoding) their GET would have (RFC 9110 §9.3.2: HEAD's
// header fields are GET's; §15.4.5: a 304 carries what a 200 would; S3
// sends `Content-Encoding: gzip` for an object stored with that metadata,
// whatever Accept-Encoding says, and `aws s3 cp` begins with HeadObject),
// and a 200 with `Content-Encoding: gzip` and `Content-Length: 0`.
// docs/responses.md step 0: "No body to read in the answer to HEAD, a 204
// or a 304, whatever its headers say: the body is empty and complete." So
// there is nothing to decode and nothing to search: the agent gets the
// status with an empty body, as the proxy front door gives it.
//
// The JSON front door answered every row 502 upstream_error ("sent a gzip
// body that does not decode"): zlib was given the empty body and failed.
import t from 'tap';
import { startStack, type Stack } from '../helpers/stack';
import { exposures } from '../helpers/exposure';
import { makeCanary } from '../helpers/canary';
import { rawResponse, startRawOrigin, type RawOrigin, type RouteAnswer } from '../helpers/raw-origin';
import { sendKeptAlive } from '../helpers/proxy-raw-client';

const HOST = 'api.example.test';

interface Row {
  name: string;
  method: 'GET' | 'HEAD';
  reply: Buffer;
  status: number;
}

const ROWS: Row[] = [
  {
    name: 'head-gzip',
    method: 'HEAD',
    reply: rawResponse(200, [
      ['Content-Type', 'application/json'],
      ['Content-Encoding', 'gzip'],
      ['Content-Length', '1234'],
      ['ETag', '"v1"'],
    ]),
    status: 200,
  },
  {
    name: 'head-te-gzip',
    method: 'HEAD',
    reply: rawResponse(200, [
      ['Content-Type', 'application/json'],
      ['Transfer-Encoding', 'gzip, chunked'],
    ]),
    status: 200,
  },
  {
    name: '304-gzip',
    method: 'GET',
    reply: rawResponse(304, [
      ['ETag', '"v1"'],
      ['Content-Encoding', 'gzip'],
    ]),
    status: 304,
  },
  {
    name: '204-br',
    method: 'GET',
    reply: rawResponse(204, [['Content-Encoding', 'br']]),
    status: 204,
  },
  {
    name: '200-gzip-empty',
    method: 'GET',
    reply: rawResponse(200, [
      ['Content-Type', 'application/json'],
      ['Content-Encoding', 'gzip'],
      ['Content-Length', '0'],
    ]),
    status: 200,
  },
];
const BY_PATH = new Map(ROWS.map((r) => [`/b/${r.name}`, r]));

let s: Stack;
let origin: RawOrigin;
const secret = makeCanary('BODILESS');

function route(target: string): RouteAnswer {
  const row = BY_PATH.get(target);
  if (!row) return { read: 'declared', respond: () => rawResponse(404, [['Content-Length', '0']]) };
  return { read: 'declared', respond: () => row.reply };
}

t.before(async () => {
  s = await startStack({ httpConfig: 'timeout = "5s"' });
  origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: true }, (h) => route(h.target));
  s.addCredential(
    'bodiless',
    `name = "bodiless"\nkind = "http"\nenv = ["B_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "${HOST}"\nports = [${origin.port}]\nmethods = ["GET", "HEAD"]\npaths = ["/*"]\n`,
    secret,
  );
  await s.approver();
});
t.teardown(async () => {
  await origin.close();
  await s.close();
});

t.test('POST /v1/http: the status with an empty body, no refusal', async (t) => {
  for (const row of ROWS) {
    await t.test(`${row.method} ${row.name}`, async (t) => {
      const r = await s.request({
        credential: 'bodiless',
        method: row.method,
        url: `https://${HOST}:${origin.port}/b/${row.name}`,
      });
      t.same(exposures(r.text, secret), []);
      t.equal(r.status, 200, `postern answered 200: ${r.text.slice(0, 300)}`);
      const j = r.json as { status?: number; body?: string; headers?: Record<string, unknown> } | null;
      t.equal(j?.status, row.status, `upstream status ${row.status}`);
      t.equal(j?.body, '', 'an empty body');
    });
  }
});

t.test('the proxy front door: the same rows (the control: already answered so)', async (t) => {
  const ph = 'Authorization: Bearer @@PH:B_TOKEN@@\r\n';
  const run = await sendKeptAlive(
    s.h,
    `${HOST}:${origin.port}`,
    ROWS.map((row) => ({
      id: row.name,
      head: `${row.method} /b/${row.name} HTTP/1.1\r\nHost: ${HOST}:${origin.port}\r\n${ph}\r\n`,
    })),
    ['--credential', 'bodiless'],
  );
  t.equal(run.code, 0, run.stderr);
  for (const row of ROWS) {
    const a = run.answers.find((x) => x.id === row.name);
    t.equal(a?.status, row.status, `${row.name}: status ${row.status} (${(a?.head ?? '').split('\r\n')[0]})`);
    t.notMatch(a?.head ?? '', /x-postern-error/i, `${row.name}: not a refusal`);
    t.equal(Buffer.from(a?.body ?? '', 'base64').length, 0, `${row.name}: no body`);
    t.equal(a?.error, null, `${row.name}: read whole`);
  }
});
