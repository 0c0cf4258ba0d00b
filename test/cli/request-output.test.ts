// `postern request http` ends as curl does (SPEC §5): the response body
// alone on stdout, byte for byte (binary, no trailing newline added), or in
// `-o FILE`; the status line on stderr; exit 0 whatever the upstream status
// unless --fail (then 1 for 400 or more, no body written); --json prints the
// whole reply; --reason reaches the approval card; POSTERN_AGENT_SOCKET is
// the socket asked; a reader that closes the pipe early (`| head -c 10`)
// ends the command quietly. Real daemon, real HTTPS upstream; the secret in
// no byte the CLI prints.
import t from 'tap';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack, Stack, Card } from '../helpers/stack';
import { cliBytes, BytesResult as Run } from '../helpers/cli-bytes';
import { findCanary, makeCanary } from '../helpers/canary';

const STACK = /^\s+at .+(\(.*:\d+:\d+\)|:\d+:\d+)$|\b(TypeError|ReferenceError|RangeError|Error):|EPIPE/m;

const BINARY = Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7) % 256));
const NO_NEWLINE = 'the last line has no newline';
const LARGE = Buffer.alloc(2 * 1024 * 1024, 'abcdefghijklmnopqrstuvwxyz\n');

function credential(port: number): string {
  return `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`;
}

function answer(req: IncomingMessage, _body: Buffer, res: ServerResponse): void {
  const send = (status: number, type: string, body: Buffer | string): void => {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  switch (req.url) {
    case '/v1/binary':
      return send(200, 'application/octet-stream', BINARY);
    case '/v1/text':
      return send(200, 'text/plain', NO_NEWLINE);
    case '/v1/large':
      return send(200, 'text/plain', LARGE);
    case '/v1/echo-auth':
      return send(200, 'text/plain', `you sent ${req.headers['authorization'] ?? ''}`);
    default:
      return send(404, 'text/plain', 'not here\n');
  }
}

t.test('postern request http: the body on stdout, the rest on stderr', async (t) => {
  const s: Stack = await startStack({ handler: answer });
  t.teardown(() => s.close());
  const secret = makeCanary('REQOUT');
  s.addCredential('api', credential(s.up.port), secret);
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'once' };
  });
  const printed: (Buffer | string)[] = [];
  const http = async (args: string[], pipeTo?: string, env = s.h.env): Promise<Run> => {
    const r = await cliBytes(env, ['request', 'http', '--credential', 'api', ...args], pipeTo);
    printed.push(r.stdout, r.stderr);
    return r;
  };
  const url = (path: string): string => s.url('api.example.test', path);
  const statusLine = (status: number): RegExp =>
    new RegExp(
      `^postern: status ${status} from api\\.example\\.test \\(127\\.0\\.0\\.1:${s.up.port}\\), audit #\\d+\\n$`,
    );

  await t.test('binary and text bodies, byte for byte', async (t) => {
    const bin = await http(['--url', url('/v1/binary')]);
    t.equal(bin.code, 0, bin.stderr);
    t.ok(bin.stdout.equals(BINARY), `stdout is the binary body itself (${bin.stdout.length} bytes)`);
    t.match(bin.stderr, statusLine(200), 'the status line on stderr, alone');
    const text = await http(['--url', url('/v1/text')]);
    t.equal(text.code, 0, text.stderr);
    t.equal(text.stdout.toString('latin1'), NO_NEWLINE, 'no newline added after the body');
    t.match(text.stderr, statusLine(200));
    const silent = await http(['--url', url('/v1/text'), '--silent']);
    t.equal(silent.stdout.toString(), NO_NEWLINE);
    t.equal(silent.stderr, '', '--silent: nothing on stderr');
  });

  await t.test('-o FILE', async (t) => {
    const file = join(s.h.dir, 'body.bin');
    const r = await http(['--url', url('/v1/binary'), '-o', file]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.length, 0, 'nothing on stdout');
    t.ok(readFileSync(file).equals(BINARY), 'the file holds the body');
    t.match(r.stderr, statusLine(200));
    const dash = await http(['--url', url('/v1/text'), '-o', '-']);
    t.equal(dash.stdout.toString(), NO_NEWLINE, '-o - is stdout');
    // A path that cannot be written: refused before anything is sent.
    const seen = s.up.requests.length;
    const missing = join(s.h.dir, 'no-such-dir', 'body');
    const bad = await http(['--url', url('/v1/text'), '-o', missing]);
    t.equal(bad.code, 2, 'a usage error');
    t.equal(bad.stderr, `postern: -o ${JSON.stringify(missing)}: no such directory; check the path\n`);
    const dir = join(s.h.dir, 'a-dir');
    mkdirSync(dir);
    const isDir = await http(['--url', url('/v1/text'), '-o', dir]);
    t.equal(isDir.code, 2);
    t.equal(isDir.stderr, `postern: -o ${JSON.stringify(dir)}: is a directory; name a file\n`);
    t.equal(s.up.requests.length, seen, 'neither reached the upstream');
  });

  await t.test('an error status: exit 0, unless --fail', async (t) => {
    const plain = await http(['--url', url('/v1/missing')]);
    t.equal(plain.code, 0, 'postern performed the request: exit 0');
    t.equal(plain.stdout.toString(), 'not here\n', 'the error body on stdout');
    t.match(plain.stderr, statusLine(404));
    const failed = await http(['--url', url('/v1/missing'), '--fail']);
    t.equal(failed.code, 1, '--fail: exit 1');
    t.equal(failed.stdout.length, 0, '--fail: no body written');
    t.match(
      failed.stderr,
      /\npostern: the upstream answered 404; with --fail its body is not written \(see it with --json\)\n$/,
    );
    const ok = await http(['--url', url('/v1/text'), '--fail']);
    t.equal(ok.code, 0, '--fail with a 200: exit 0');
    const json = await http(['--url', url('/v1/missing'), '--fail', '--json']);
    t.equal(json.code, 1, '--fail --json: exit 1');
    t.match(
      JSON.parse(json.stdout.toString()),
      { status: 404, body: 'not here\n', body_encoding: 'utf8', audit_seq: Number },
      'the whole reply',
    );
    const jsonOk = await http(['--url', url('/v1/binary'), '--json']);
    t.equal(jsonOk.code, 0);
    const reply = JSON.parse(jsonOk.stdout.toString()) as Record<string, unknown>;
    t.equal(reply['body_encoding'], 'base64');
    t.ok(Buffer.from(String(reply['body']), 'base64').equals(BINARY), '--json: the body as base64');
  });

  await t.test('redaction is flagged on stderr', async (t) => {
    const r = await http(['--url', url('/v1/echo-auth')]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.toString(), 'you sent [REDACTED:api]');
    t.match(r.stderr, /, audit #\d+ \[1 redactions\]\n$/);
  });

  await t.test('--reason reaches the approval card', async (t) => {
    const before = cards.length;
    const r = await http(['--url', url('/v1/text'), '--reason', 'show the user the text']);
    t.equal(r.code, 0, r.stderr);
    t.equal(cards.length, before + 1, 'one card');
    t.equal(cards.at(-1)!.action['reason'], 'show the user the text');
    const long = await http(['--url', url('/v1/text'), '--reason', 'x'.repeat(201)]);
    t.equal(long.code, 1, 'a reason over 200 characters is refused');
    t.match(long.stderr, /^postern: bad_request: .*reason.*at most 200 characters/);
  });

  await t.test('POSTERN_AGENT_SOCKET names the socket', async (t) => {
    // A home without a config: the socket comes from the variable alone.
    const env = { ...s.h.env, POSTERN_HOME: join(s.h.dir, 'elsewhere'), POSTERN_AGENT_SOCKET: s.sock };
    const r = await http(['--url', url('/v1/text')], undefined, env);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.toString(), NO_NEWLINE);
    const gone = join(s.h.dir, 'no.sock');
    const missing = await http(['--url', url('/v1/text')], undefined, { ...env, POSTERN_AGENT_SOCKET: gone });
    t.equal(missing.code, 3, 'not reachable');
    t.equal(
      missing.stderr,
      `postern: the postern daemon is not reachable at ${gone} (ENOENT); start it with \`postern daemon\`\n`,
    );
  });

  await t.test('a reader that closes the pipe early', async (t) => {
    const body = await http(['--url', url('/v1/large')], 'head -c 10');
    t.equal(body.stdout.toString(), 'abcdefghij', 'the reader got its 10 bytes');
    t.equal(body.code, 0, `exit 0: ${body.stderr}`);
    t.match(body.stderr, statusLine(200), 'only the status line on stderr');
    const json = await http(['--url', url('/v1/large'), '--json'], 'head -c 300');
    t.equal(json.stdout.length, 300);
    t.equal(json.code, 0, `--json: exit 0: ${json.stderr}`);
    t.equal(json.stderr, '', '--json: nothing on stderr');
    for (const r of [body, json]) t.notMatch(r.stderr, STACK, 'no stack trace, no EPIPE');
    // A refusal whose reader is gone: its own exit code, no stack either.
    const refused = await http(['--url', url('/admin'), '--json'], 'true');
    t.equal(refused.code, 1, 'a refusal keeps exit 1');
    t.notMatch(refused.stderr, STACK);
  });

  await t.test('every command: a reader gone before the output', async (t) => {
    // `true` exits at once, so the first write meets a closed pipe.
    for (const args of [['--help'], ['request', 'http', '--help'], ['cred', 'list', '--json'], ['status', '--json']]) {
      const r = await cliBytes(s.h.env, args, 'true');
      t.equal(r.code, 0, `${args.join(' ')}: exit 0`);
      t.equal(r.stderr, '', `${args.join(' ')}: nothing on stderr`);
    }
  });

  t.same(
    findCanary(Buffer.concat(printed.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))), secret),
    [],
    'the secret in no byte the CLI printed',
  );
});
