// Adversarial rows for AWS Signature V4 (SPEC §13, §6.4): an upstream that
// echoes the request's headers back (an API Gateway backend, a debugging
// endpoint) hands the agent what postern put on the wire. The secret key
// and the session token are needles; this file asks whether the signature
// is too, and shows what an agent can do with it when it is not: send the
// same signed request again straight to the endpoint, without postern, its
// approval or its journal, and have it accepted by a server that verifies
// with AWS's own signer (@smithy/signature-v4, test/helpers/sigv4-verifier).
import t from 'tap';
import { request as httpsRequest } from 'node:https';
import { startStack } from '../helpers/stack';
import { verifySigV4, type RefKeys } from '../helpers/sigv4-verifier';
import { exposures } from '../helpers/exposure';

const ACCESS_KEY = 'AKIAPOSTERNECHOTEST1';
const SECRET_KEY = 'eChOtEsTsEcReTkEy0123456789abcdefGHIJKLM';
const TOKEN = 'IQoJb3JpZ2luX2VjECHOTESTSESSIONTOKEN012345678abcdef';
const HOST = 'api.aws.example.test';

for (const withToken of [false, true]) {
  t.test(`an echoed signature ${withToken ? '(session credentials)' : '(long-term keys)'}`, async (t) => {
    const keys: RefKeys = {
      accessKeyId: ACCESS_KEY,
      secretAccessKey: SECRET_KEY,
      ...(withToken ? { sessionToken: TOKEN } : {}),
    };
    const scope = { region: 'eu-west-1', service: 'execute-api' };
    const verdicts: number[] = [];
    const s = await startStack({
      names: [HOST],
      records: { [HOST]: { A: ['127.0.0.1'] } },
      handler: async (req, body, res) => {
        const v = await verifySigV4(req, body, keys, scope);
        verdicts.push(v.status);
        const text = JSON.stringify({ verified: v.status === 200, headers: req.headers });
        res.writeHead(v.status, { 'content-type': 'application/json' }).end(text);
      },
    });
    t.teardown(() => s.close());
    s.addCredential(
      'gw',
      `name = "gw"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\naws_sigv4 = { region = "eu-west-1", service = "execute-api" }\n[[allow]]\nhost = "${HOST}"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/prod/*"]\n`,
      `${ACCESS_KEY}:${SECRET_KEY}${withToken ? `:${TOKEN}` : ''}`,
    );
    await s.approver();
    const body = '{"transfer":100}';
    const r = await s.request({
      credential: 'gw',
      method: 'POST',
      url: `https://${HOST}:${s.up.port}/prod/pay`,
      headers: { 'content-type': 'application/json' },
      body,
    });
    t.equal((r.json as { status: number }).status, 200, r.text);
    const sent = s.up.requests.at(-1)!;
    const authorization = String(sent.headers.authorization);
    const signature = /Signature=([0-9a-f]{64})/.exec(authorization)![1]!;
    t.same(exposures(r.text, SECRET_KEY), [], 'the secret key is redacted');
    if (withToken) t.same(exposures(r.text, TOKEN), [], 'the session token is redacted');

    // What the agent read in the reply, replayed without postern.
    const echoed = JSON.parse((r.json as { body: string }).body) as { headers: Record<string, string> };
    const replay = await new Promise<number>((resolve, reject) => {
      const q = httpsRequest(
        {
          host: '127.0.0.1',
          port: s.up.port,
          servername: HOST,
          ca: s.ca.caCert,
          method: 'POST',
          path: '/prod/pay',
          headers: Object.fromEntries(
            Object.entries(echoed.headers).filter(([k]) => !['connection', 'content-length'].includes(k)),
          ),
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      q.on('error', reject);
      q.end(body);
    });
    t.comment(`the agent's replay of the echoed request, without postern, got ${replay}`);
    t.same(exposures(r.text, signature), [], 'the signature postern sent is redacted from the echo');
    t.not(replay, 200, 'the echo gives the agent no request the endpoint accepts without postern');
  });
}
