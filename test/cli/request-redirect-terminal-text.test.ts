// What an upstream says goes to the human's terminal only escaped (SPEC §7
// rule for agent-controlled strings, which the CLI's stderr lines share:
// `postern request http` prints "redirect not followed: <Location>"). An
// upstream the policy allows may still be hostile, and its Location header
// may hold bytes a terminal acts on: a C1 CSI (0x9b), or the UTF-8 of a
// bidi override (U+202E) that reorders the rest of the line. The line on
// stderr must hold neither raw. Real daemon, real HTTPS upstream.
import t from 'tap';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack, Stack } from '../helpers/stack';
import { cliBytes } from '../helpers/cli-bytes';
import { makeCanary } from '../helpers/canary';

function credential(port: number): string {
  return `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`;
}

// Header values are bytes; Node writes a string's code points below 256 as
// those bytes. "\u00e2\u0080\u00ae" is the UTF-8 of U+202E.
const LOCATION = 'https://api.example.test/v1/next\u009b2J\u00e2\u0080\u00aegpj.exe';

function answer(_req: IncomingMessage, _body: Buffer, res: ServerResponse): void {
  res.writeHead(302, { location: LOCATION, 'content-length': 0 });
  res.end();
}

t.test("an upstream's Location reaches the terminal escaped", async (t) => {
  const s: Stack = await startStack({ handler: answer });
  t.teardown(() => s.close());
  s.addCredential('api', credential(s.up.port), makeCanary('REDIRTEXT'));
  await s.approver(() => ({ decision: 'once' }));
  const r = await cliBytes(s.h.env, [
    'request',
    'http',
    '--credential',
    'api',
    '--url',
    s.url('api.example.test', '/v1/start'),
  ]);
  t.equal(r.code, 0, r.stderr);
  const line = r.stderr.split('\n').find((l) => l.startsWith('postern: redirect not followed: '));
  t.ok(line, `the redirect is said: ${JSON.stringify(r.stderr)}`);
  t.notOk(/[\u0080-\u009f]/.test(line ?? ''), `no raw C1 control: ${JSON.stringify(line)}`);
  t.notOk(/[\u202a-\u202e\u2066-\u2069]/.test(line ?? ''), `no raw bidi control: ${JSON.stringify(line)}`);
});
