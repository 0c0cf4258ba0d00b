// An AWS Signature V4 credential end to end (SPEC §13) through the real
// daemon, against an HTTPS endpoint that accepts only what AWS's own signer
// (@smithy/signature-v4) computes again from the request it received:
// POST /v1/http signed by postern (with and without a session token, s3 and
// another service), the headers an agent may not send refused; and the
// unmodified AWS CLI under `postern run`, signing with its placeholder as
// access key id, signed again by postern. The secret key and the session
// token never appear in what postern or the CLI emit.
import t from 'tap';
import { readFileSync } from 'node:fs';
import type { Test } from 'tap';
import { startStack, auditList, type Stack } from '../helpers/stack';
import { verifyingHandler, type RefKeys, type SeenRequest } from '../helpers/sigv4-verifier';
import { cliBytes } from '../helpers/cli-bytes';
import { exposures } from '../helpers/exposure';
import { journalText } from '../helpers/canary';

const ACCESS_KEY = 'AKIAPOSTERNTEST0001';
const SECRET_KEY = 'pOsTeRnSeCrEtKeY0123456789abcdefGHIJKLMN';
const TOKEN = 'IQoJb3JpZ2luX2VjPOSTERNSESSIONTOKEN0123456789abcdef';
const HOST = 's3.example.test';

// An aws-chunked body as S3 reads it: hex size, CRLF, the bytes, CRLF, …,
// a zero-size chunk, then trailers.
function unchunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    const size = parseInt(body.subarray(at, eol).toString('latin1').split(';')[0]!, 16);
    if (!(size > 0)) return Buffer.concat(parts);
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

interface Setup {
  s: Stack;
  keys: RefKeys;
  seen: SeenRequest[];
}

async function setup(t: Test, o: { token?: boolean; service?: string } = {}): Promise<Setup> {
  const keys: RefKeys = {
    accessKeyId: ACCESS_KEY,
    secretAccessKey: SECRET_KEY,
    ...(o.token ? { sessionToken: TOKEN } : {}),
  };
  const scope = { region: 'eu-west-1', service: o.service ?? 's3' };
  const seen: Setup['seen'] = [];
  const objects = new Map<string, Buffer>();
  const s = await startStack({
    names: [HOST],
    records: { [HOST]: { A: ['127.0.0.1'] } },
    handler: verifyingHandler(keys, scope, seen, (req, body, res) => {
      const key = (req.url ?? '').split('?')[0]!;
      if (req.method === 'PUT') {
        objects.set(key, /aws-chunked/.test(String(req.headers['content-encoding'])) ? unchunk(body) : body);
        res.writeHead(200, { etag: '"1"' }).end();
      } else if (objects.has(key) && req.method === 'HEAD')
        // As S3 answers HeadObject: the object's length, no body.
        res
          .writeHead(200, {
            'content-type': 'application/octet-stream',
            'content-length': String(objects.get(key)!.length),
            etag: '"1"',
            'last-modified': 'Wed, 02 Dec 2026 10:00:00 GMT',
          })
          .end();
      else if (objects.has(key))
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(objects.get(key));
      else
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ verified: true, url: req.url }));
    }),
  });
  t.teardown(() => s.close());
  const secret = `${ACCESS_KEY}:${SECRET_KEY}${o.token ? `:${TOKEN}` : ''}`;
  s.addCredential(
    'store',
    `name = "store"\nkind = "http"\nenv = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\naws_sigv4 = { region = "eu-west-1", service = "${scope.service}" }\n[[allow]]\nhost = "${HOST}"\nports = [${s.up.port}]\nmethods = ["GET", "PUT", "POST", "HEAD"]\npaths = ["/*"]\n`,
    secret,
  );
  await s.approver();
  return { s, keys, seen };
}

const url = (x: Setup, path: string) => `https://${HOST}:${x.s.up.port}${path}`;

t.test('POST /v1/http: postern signs, the endpoint verifies with AWS’s own signer', async (t) => {
  for (const token of [false, true]) {
    await t.test(token ? 'with a session token' : 'without a session token', async (t) => {
      const x = await setup(t, { token });
      const rows: { method: string; path: string; body?: string; headers?: Record<string, string> }[] = [
        { method: 'GET', path: '/bucket/key.txt' },
        { method: 'GET', path: '/bucket/?list-type=2&prefix=a%20b&max-keys=10' },
        { method: 'GET', path: '/bucket/caf%C3%A9/%E2%82%AC%20sign.txt' },
        { method: 'PUT', path: '/bucket/new.bin', body: 'hello body', headers: { 'content-type': 'text/plain' } },
        { method: 'GET', path: '/bucket/x', headers: { 'x-amz-meta-note': '  spaced   out  ', range: 'bytes=0-3' } },
        { method: 'POST', path: '/bucket/?delete=', body: '<Delete/>' },
      ];
      for (const row of rows) {
        const r = await x.s.request({
          credential: 'store',
          method: row.method,
          url: url(x, row.path),
          ...(row.headers ? { headers: row.headers } : {}),
          ...(row.body !== undefined ? { body: row.body } : {}),
        });
        t.equal(r.status, 200, `${row.method} ${row.path}: ${r.text}`);
        t.equal((r.json as { status: number }).status, 200, `${row.method} ${row.path}: ${x.seen.at(-1)?.reason}`);
        t.match(
          x.seen.at(-1)?.auth,
          new RegExp(`^AWS4-HMAC-SHA256 Credential=${ACCESS_KEY}/\\d{8}/eu-west-1/s3/aws4_request`),
        );
      }
      const intent = auditList(x.s).find((e) => e['kind'] === 'http_intent');
      t.match(intent, { computed: 'aws_sigv4' }, 'the journal says the request was signed');
      const emitted = [x.s.d.logs(), await journalText(x.s.h)].join('\n');
      t.same(exposures(emitted, SECRET_KEY), [], 'no form of the secret key');
      if (token) t.same(exposures(emitted, TOKEN), [], 'no form of the session token');
    });
  }
});

t.test('another service is signed with its path encoded again', async (t) => {
  const x = await setup(t, { service: 'execute-api' });
  const r = await x.s.request({
    credential: 'store',
    method: 'GET',
    url: url(x, '/prod/items/a%20b/caf%C3%A9?x=1&a=2'),
  });
  t.equal((r.json as { status: number }).status, 200, String(x.seen.at(-1)?.reason));
});

t.test('an agent may not send the headers a signature sets', async (t) => {
  const x = await setup(t);
  for (const h of ['Authorization', 'X-Amz-Date', 'x-amz-content-sha256', 'X-AMZ-SECURITY-TOKEN', 'x_amz_date']) {
    const r = await x.s.request({
      credential: 'store',
      method: 'GET',
      url: url(x, '/bucket/k'),
      headers: { [h]: 'x' },
    });
    t.equal(r.status, 400, `${h}: ${r.text}`);
    t.equal((r.json as { error: { code: string } }).error.code, 'bad_request');
    t.match((r.json as { error: { message: string } }).error.message, /AWS Signature V4/);
  }
  t.equal(x.seen.length, 0, 'nothing was sent');
});

t.test('the AWS CLI under postern run signs with its placeholder; postern signs again', async (t) => {
  const x = await setup(t, { token: true });
  const env = {
    AWS_DEFAULT_REGION: 'eu-west-1',
    AWS_PAGER: '',
    AWS_CONFIG_FILE: '/dev/null',
    AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
  };
  const endpoint = `https://${HOST}:${x.s.up.port}`;
  const run = (args: string[]) =>
    cliBytes({ ...x.s.h.env, ...env }, [
      'run',
      '--credential',
      'store',
      '--',
      'aws',
      '--endpoint-url',
      endpoint,
      ...args,
    ]);
  const out = x.s.h.file('got.txt', '');
  const put = await run([
    's3api',
    'put-object',
    '--bucket',
    'bucket',
    '--key',
    'dir/hello world.txt',
    '--body',
    '/etc/hostname',
  ]);
  t.equal(put.code, 0, `${put.stderr} ${JSON.stringify(x.seen.slice(-2))}`);
  const get = await run(['s3api', 'get-object', '--bucket', 'bucket', '--key', 'dir/hello world.txt', out]);
  t.equal(get.code, 0, `${get.stderr} ${JSON.stringify(x.seen.slice(-2))}`);
  t.equal(readFileSync(out, 'utf8'), readFileSync('/etc/hostname', 'utf8'), 'the object read back');
  // `aws s3 cp` asks for the object's size first (HeadObject reads it from
  // the answer to HEAD's content-length), then gets it.
  const copied = x.s.h.file('copied.txt', '');
  const cp = await run(['s3', 'cp', 's3://bucket/dir/hello world.txt', copied]);
  t.equal(cp.code, 0, `aws s3 cp: ${cp.stderr} ${JSON.stringify(x.seen.slice(-2))}`);
  t.equal(readFileSync(copied, 'utf8'), readFileSync('/etc/hostname', 'utf8'), 'the object copied by aws s3 cp');
  t.ok(
    x.seen.some((r) => r.method === 'HEAD'),
    'aws s3 cp asked with HEAD first',
  );
  t.ok(x.seen.length >= 2 && x.seen.every((r) => r.status === 200), JSON.stringify(x.seen));
  t.ok(
    x.seen.every((r) => r.auth.includes(`Credential=${ACCESS_KEY}/`)),
    'the endpoint saw the real key id only',
  );
  const intents = auditList(x.s).filter((e) => e['kind'] === 'http_intent');
  t.ok(intents.every((e) => e['via'] === 'proxy' && e['computed'] === 'aws_sigv4'));
  const emitted = Buffer.concat([
    put.stdout,
    Buffer.from(put.stderr),
    get.stdout,
    Buffer.from(get.stderr),
    cp.stdout,
    Buffer.from(cp.stderr),
    Buffer.from(x.s.d.logs()),
    Buffer.from(await journalText(x.s.h)),
  ]);
  t.same(exposures(emitted, SECRET_KEY), [], 'no form of the secret key');
  t.same(exposures(emitted, TOKEN), [], 'no form of the session token');
  t.same(
    exposures(Buffer.concat([put.stdout, get.stdout, Buffer.from(put.stderr)]), ACCESS_KEY),
    [],
    'the CLI never saw the key id',
  );

  // A client scope for another region, and a payload signed chunk by
  // chunk, are refused, each for its own reason: the endpoint sees nothing.
  // An Authorization header that is no SigV4 signature (here a signature
  // that is not 64 hex digits) is no slot for the placeholder either.
  const seenBefore = x.seen.length;
  const hex64 = '0'.repeat(64);
  for (const [what, region, sha, signature, reason] of [
    ['another region', 'us-east-1', 'UNSIGNED-PAYLOAD', hex64, /signed for region "us-east-1".*signs for "eu-west-1"/],
    ['a chunk-signed payload', 'eu-west-1', 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD', hex64, /signed chunk by chunk/],
    ['an unreadable signature', 'eu-west-1', 'UNSIGNED-PAYLOAD', '00', /a placeholder is in header "authorization"/],
  ] as const) {
    const forged = await cliBytes({ ...x.s.h.env }, [
      'run',
      '--credential',
      'store',
      '--',
      'sh',
      '-c',
      `curl -sS -w '\n%{http_code} %header{x-postern-error}' -H "Authorization: AWS4-HMAC-SHA256 Credential=$AWS_ACCESS_KEY_ID/20261202/${region}/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=${signature}" -H 'x-amz-date: 20261202T000000Z' -H 'x-amz-content-sha256: ${sha}' ${endpoint}/bucket/k`,
    ]);
    const [body, status] = forged.stdout.toString().split('\n');
    t.equal(status, '400 bad_request', `${what}: the status and x-postern-error (${forged.stderr})`);
    const answer = JSON.parse(body!) as { error: { code: string; message: string; audit_seq: number } };
    t.equal(answer.error.code, 'bad_request', `${what}: the code`);
    t.match(answer.error.message, reason, `${what}: the reason`);
    const journaled = auditList(x.s).find((e) => e['seq'] === answer.error.audit_seq);
    t.match(journaled, { code: 'bad_request' }, `${what}: journaled with its code`);
  }
  t.equal(x.seen.length, seenBefore, 'neither reached the endpoint');

  // A presigned URL made by the CLI with its placeholder cannot be signed again.
  const presigned = await run(['s3', 'presign', 's3://bucket/dir/x']);
  t.equal(presigned.code, 0, presigned.stderr);
  const link = presigned.stdout.toString().trim();
  const curl = await cliBytes({ ...x.s.h.env }, [
    'run',
    '--credential',
    'store',
    '--',
    'curl',
    '-sS',
    '-w',
    '\n%{http_code} %header{x-postern-error}',
    link,
  ]);
  const [body, status] = curl.stdout.toString().split('\n');
  t.equal(status, '400 bad_request', `the status and x-postern-error (${curl.stderr})`);
  t.match(JSON.parse(body!), { error: { code: 'bad_request', message: /a presigned URL/ } }, 'refused as presigned');
  // Refused before a request is formed: journaled as the front door's refusal.
  const refused = auditList(x.s)
    .filter((e) => e['kind'] === 'agent_refused')
    .at(-1);
  t.match(refused, { code: 'bad_request' });
});
