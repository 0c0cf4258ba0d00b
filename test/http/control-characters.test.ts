// A text response made mostly of control characters (valid UTF-8, but each
// written by JSON as \u00XX, six bytes) is returned as base64: 64 replies
// of 8 MiB of 0x01 bytes took 6.8 GiB of the daemon's memory as JSON, six
// times the body each. Text with a few control characters (a terminal's
// colour escapes) stays text. Either way the bytes are the upstream's, and
// a secret among them is redacted.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const SECRET = makeCanary('CTRLSECRET');

const BODIES: Record<string, Buffer> = {
  '/v1/control': Buffer.alloc(64 * 1024, 1),
  '/v1/control-echo': Buffer.concat([Buffer.alloc(4096, 2), Buffer.from(SECRET), Buffer.alloc(4096, 3)]),
  '/v1/colours': Buffer.from('\x1b[31mred\x1b[0m and \x1b[32mgreen\x1b[0m, then plain text for the rest of the line\n'),
  '/v1/tabs': Buffer.from('a\tb\r\nc\fd\be "quoted" \\ backslash\n'.repeat(100)),
};

t.test('control characters: base64 when most of the body, text when few', async (t) => {
  const s = await startStack({
    handler: (req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(BODIES[req.url ?? ''] ?? Buffer.alloc(0));
    },
  });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\npaths = ["/v1/*"]\n`,
    SECRET,
  );
  await s.approver();
  const want: Record<string, string> = {
    '/v1/control': 'base64',
    '/v1/control-echo': 'base64',
    '/v1/colours': 'utf8',
    '/v1/tabs': 'utf8',
  };
  for (const [path, encoding] of Object.entries(want)) {
    const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', path) });
    const reply = r.json as { body: string; body_encoding: 'utf8' | 'base64'; redactions: number };
    t.equal(r.status, 200, `${path}: answered`);
    t.equal(reply.body_encoding, encoding, `${path}: ${encoding}`);
    const bytes = Buffer.from(reply.body, reply.body_encoding);
    if (path === '/v1/control-echo') {
      t.equal(reply.redactions, 1, `${path}: the secret redacted`);
      t.same(exposures(bytes, SECRET), [], `${path}: no form of the secret in the body`);
      t.same(exposures(r.text, SECRET), [], `${path}: nor in the reply`);
    } else t.same(bytes, BODIES[path], `${path}: the upstream's bytes`);
    t.ok(
      r.text.length < BODIES[path]!.length * 2 + 1024,
      `${path}: the reply is ${r.text.length} bytes for a body of ${BODIES[path]!.length}`,
    );
  }
});
