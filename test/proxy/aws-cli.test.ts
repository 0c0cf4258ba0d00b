// the unmodified AWS CLI under `postern run` with an aws_sigv4
// credential (SPEC §11, §13) beyond S3 get/put: JSON-protocol (dynamodb) and
// query-protocol (sts) services that postern must sign again with the body
// hash, a multipart S3 upload, and `--debug` output (which prints every
// response header) against an endpoint that echoes what it got. The secret
// key, the session token and the real signature must never reach the CLI,
// the daemon log or the journal.
import t from 'tap';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack, auditList, type Stack } from '../helpers/stack';
import { verifyingHandler, type RefKeys, type SeenRequest } from '../helpers/sigv4-verifier';
import { cliBytes, type BytesResult } from '../helpers/cli-bytes';
import { exposures } from '../helpers/exposure';
import { journalText } from '../helpers/canary';

const ACCESS_KEY = 'AKIAPROBECOMPUTED001';
const SECRET_KEY = 'pRoBeSeCrEtKeY9876543210zyxwvuTSRQPONMLK';
const TOKEN = 'IQoJb3JpZ2luX2VjPROBESESSIONTOKENfedcba9876543210';
const HOST = 'aws.example.test';

type Answer = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void;

interface X {
  s: Stack;
  seen: SeenRequest[];
  outputs: Buffer[];
  aws(args: string[], env?: Record<string, string>): Promise<BytesResult>;
  emitted(): Promise<Buffer>;
}

async function setup(t: Test, service: string, answer: Answer, httpConfig = ''): Promise<X> {
  const keys: RefKeys = { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY, sessionToken: TOKEN };
  const scope = { region: 'eu-west-1', service };
  const seen: X['seen'] = [];
  const s = await startStack({
    names: [HOST],
    records: { [HOST]: { A: ['127.0.0.1'] } },
    httpConfig,
    handler: verifyingHandler(keys, scope, seen, answer),
  });
  t.teardown(() => s.close());
  s.addCredential(
    'cloud',
    `name = "cloud"\nkind = "http"\nenv = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\naws_sigv4 = { region = "eu-west-1", service = "${service}" }\n[[allow]]\nhost = "${HOST}"\nports = [${s.up.port}]\nmethods = ["GET", "PUT", "POST", "HEAD"]\npaths = ["/*"]\n`,
    `${ACCESS_KEY}:${SECRET_KEY}:${TOKEN}`,
  );
  await s.approver();
  const outputs: Buffer[] = [];
  const env = {
    AWS_DEFAULT_REGION: 'eu-west-1',
    AWS_PAGER: '',
    AWS_CONFIG_FILE: '/dev/null',
    AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
    AWS_MAX_ATTEMPTS: '1',
  };
  return {
    s,
    seen,
    outputs,
    async aws(args, extra = {}) {
      const r = await cliBytes({ ...s.h.env, ...env, ...extra }, [
        'run',
        '--credential',
        'cloud',
        '--',
        'timeout',
        '120',
        'aws',
        '--endpoint-url',
        `https://${HOST}:${s.up.port}`,
        ...args,
      ]);
      outputs.push(r.stdout, Buffer.from(r.stderr));
      return r;
    },
    async emitted() {
      return Buffer.concat([...outputs, Buffer.from(s.d.logs()), Buffer.from(await journalText(s.h))]);
    },
  };
}

async function noLeaks(t: Test, x: X): Promise<void> {
  const all = await x.emitted();
  t.same(exposures(all, SECRET_KEY), [], 'no form of the secret key');
  t.same(exposures(all, TOKEN), [], 'no form of the session token');
  const sigs = x.seen.map((r) => /Signature=([0-9a-f]{64})/.exec(r.auth)?.[1]).filter((v): v is string => !!v);
  for (const sig of sigs) t.same(exposures(all, sig), [], `no real signature ${sig.slice(0, 8)}…`);
}

// Echo of what the endpoint got, in response headers as a debugging proxy
// or API Gateway might add them.
function echoHeaders(req: IncomingMessage): Record<string, string> {
  return {
    'x-echo-authorization': String(req.headers.authorization ?? ''),
    'x-echo-token': String(req.headers['x-amz-security-token'] ?? ''),
  };
}

t.test('aws dynamodb list-tables (JSON protocol, body signed by hash)', async (t) => {
  const x = await setup(t, 'dynamodb', (req, _body, res) => {
    res
      .writeHead(200, { 'content-type': 'application/x-amz-json-1.0', ...echoHeaders(req) })
      .end(JSON.stringify({ TableNames: ['deploy-table'] }));
  });
  const r = await x.aws(['dynamodb', 'list-tables', '--output', 'json']);
  t.equal(r.code, 0, `${r.stderr} ${JSON.stringify(x.seen)}`);
  t.match(r.stdout.toString(), /deploy-table/);
  t.ok(x.seen.length > 0 && x.seen.every((v) => v.status === 200), JSON.stringify(x.seen));
  const debug = await x.aws(['--debug', 'dynamodb', 'list-tables', '--output', 'json']);
  t.equal(debug.code, 0, 'with --debug');
  const intents = auditList(x.s).filter((e) => e['kind'] === 'http_intent');
  t.ok(intents.length >= 2 && intents.every((e) => e['computed'] === 'aws_sigv4'));
  await noLeaks(t, x);
});

t.test('aws sts get-caller-identity (query protocol, form body)', async (t) => {
  const x = await setup(t, 'sts', (req, _body, res) => {
    res
      .writeHead(200, { 'content-type': 'text/xml', ...echoHeaders(req) })
      .end(
        `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/deploy</Arn><UserId>AIDADEPLOY</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`,
      );
  });
  const r = await x.aws(['--debug', 'sts', 'get-caller-identity', '--output', 'json']);
  t.equal(r.code, 0, `${r.stderr.slice(-1500)} ${JSON.stringify(x.seen)}`);
  t.match(r.stdout.toString(), /123456789012/);
  t.ok(x.seen.length > 0 && x.seen.every((v) => v.status === 200), JSON.stringify(x.seen));
  await noLeaks(t, x);
});

t.test('aws s3 cp of a 12 MiB file (max_request_body 32MiB): a multipart upload, each part signed again', async (t) => {
  const parts = new Map<string, number>();
  const x = await setup(
    t,
    's3',
    (req, body, res) => {
      const url = new URL(req.url ?? '/', 'https://x');
      if (req.method === 'POST' && url.searchParams.has('uploads')) {
        res
          .writeHead(200, { 'content-type': 'application/xml' })
          .end(
            `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>big.bin</Key><UploadId>UP1</UploadId></InitiateMultipartUploadResult>`,
          );
      } else if (req.method === 'PUT' && url.searchParams.has('partNumber')) {
        parts.set(url.searchParams.get('partNumber')!, body.length);
        res.writeHead(200, { etag: `"p${url.searchParams.get('partNumber')}"` }).end();
      } else if (req.method === 'POST' && url.searchParams.has('uploadId')) {
        res
          .writeHead(200, { 'content-type': 'application/xml' })
          .end(
            `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Bucket>bucket</Bucket><Key>big.bin</Key><ETag>"x-2"</ETag></CompleteMultipartUploadResult>`,
          );
      } else if (req.method === 'PUT') {
        res.writeHead(200, { etag: '"1"' }).end();
      } else res.writeHead(404, { 'content-type': 'application/xml' }).end('<Error><Code>NoSuchKey</Code></Error>');
    },
    'max_request_body = "32MiB"',
  );
  const file = x.s.h.file('big.bin', '');
  writeFileSync(file, randomBytes(12 * 1024 * 1024));
  const started = Date.now();
  const r = await x.aws(['--debug', 's3', 'cp', file, 's3://bucket/big.bin']);
  const errs = r.stderr
    .split('\n')
    .filter((l) => /Error|error|proxy|413|x-postern/.test(l) && !/File "|hooks/.test(l))
    .slice(0, 15)
    .map((l) => l.slice(0, 300));
  x.outputs.splice(0);
  x.outputs.push(r.stdout, Buffer.from(r.stderr));
  t.comment(`took ${Date.now() - started} ms; parts ${JSON.stringify([...parts])}`);
  t.equal(r.code, 0, `${errs.join('\n')}`);
  t.ok(parts.size >= 2, `uploaded in parts: ${JSON.stringify([...parts])}`);
  t.ok(
    x.seen.length > 0 && x.seen.every((v) => v.status === 200),
    JSON.stringify(x.seen.map((v) => [v.method, v.url, v.status, v.reason])),
  );
  await noLeaks(t, x);
});

// botocore sends a part held in memory with its head despite its own
// `Expect: 100-continue`; postern refuses it at the head and must not reset
// the connection under the part still arriving, or the CLI reports a
// connection error instead of the 413.
t.test('aws s3 cp of a 12 MiB file at the default max_request_body: the CLI reads the 413', async (t) => {
  const x = await setup(t, 's3', (req, _body, res) => {
    const url = new URL(req.url ?? '/', 'https://x');
    if (req.method === 'POST' && url.searchParams.has('uploads'))
      res
        .writeHead(200, { 'content-type': 'application/xml' })
        .end(
          `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>big.bin</Key><UploadId>UP1</UploadId></InitiateMultipartUploadResult>`,
        );
    else res.writeHead(204).end();
  });
  const file = x.s.h.file('big.bin', '');
  writeFileSync(file, randomBytes(12 * 1024 * 1024));
  const r = await x.aws(['--debug', 's3', 'cp', file, 's3://bucket/big.bin']);
  x.outputs.push(r.stdout, Buffer.from(r.stderr));
  t.not(r.code, 0, 'the upload fails');
  t.match(r.stderr, /x-postern-error[^\n]*body_too_large/i, 'the CLI read the 413 and its code');
  t.notMatch(
    r.stderr,
    /Connection was closed|ConnectionResetError|Connection reset|BrokenPipe|EndpointConnectionError/,
    'no connection reset or broken pipe',
  );
  t.equal(x.seen.filter((v) => v.method === 'PUT').length, 0, 'no part reached the endpoint');
  await noLeaks(t, x);
});

t.test(
  'the CLI with the region the credential does not sign for: refused before sending, reason visible with --debug',
  async (t) => {
    const x = await setup(t, 'dynamodb', (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' }).end('{"TableNames":[]}');
    });
    const r = await x.aws(['--debug', 'dynamodb', 'list-tables'], { AWS_DEFAULT_REGION: 'us-east-1' });
    t.not(r.code, 0, 'the CLI fails');
    t.equal(x.seen.length, 0, 'nothing reached the endpoint');
    t.match(r.stderr, /x-postern-error[^\n]*bad_request/i, 'the CLI debug output shows the postern code');
    t.match(r.stderr, /us-east-1/, 'and the region reason');
    t.comment(
      `what the user sees without --debug: ${r.stderr
        .split('\n')
        .filter((l) => /error occurred/i.test(l))
        .join(' | ')}`,
    );
    await noLeaks(t, x);
  },
);

// curl -T of 4 MiB at the default limit, four times: with Expect the 413
// comes before any body (no 100 Continue) and the connection closes;
// without it the body is read and dropped on the kept connection. Either
// way the client reads the 413, and only that refusal is journaled.
for (const [expect, how] of [
  ['Expect: 100-continue', 'refused before a 100 Continue'],
  ['Expect:', 'without Expect: the body read and dropped'],
] as const) {
  t.test(`curl -T of 4 MiB over the default max_request_body, ${how}: a 413 every time`, async (t) => {
    const x = await setup(t, 's3', (_req, _body, res) => res.writeHead(200).end());
    const file = x.s.h.file('four.bin', '');
    writeFileSync(file, randomBytes(4 * 1024 * 1024));
    const got: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await cliBytes({ ...x.s.h.env }, [
        'run',
        '--credential',
        'cloud',
        '--',
        'sh',
        '-c',
        `curl -sS -o /dev/null -H '${expect}' -w '%{http_code} %header{x-postern-error}' -T ${file} https://${HOST}:${x.s.up.port}/bucket/k 2>&1`,
      ]);
      got.push(r.stdout.toString().trim().slice(0, 200));
    }
    t.same(got, Array(4).fill('413 body_too_large'), 'each upload refused with a 413 the client reads');
    const refused = auditList(x.s).filter((e) => e['kind'] === 'agent_refused' || e['kind'] === 'http_refused');
    t.same(
      refused.map((e) => e['code']),
      Array(4).fill('body_too_large'),
      `one body_too_large each, no stray refusal of the dropped bytes: ${JSON.stringify(refused.map((e) => [e['code'], e['endpoint']]))}`,
    );
  });
}
