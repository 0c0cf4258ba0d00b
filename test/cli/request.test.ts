// `postern request http` as people and scripts use it (SPEC §5): exit 0 with
// the upstream's answer (its body alone on stdout, the status on stderr), 1 for a refusal (its code and audit_seq kept in
// --json), 2 for a usage error, 3 when the daemon is not reachable; and when
// the daemon dies after it has taken the request, 3 with maybe_executed in
// --json and a message that says to check the journal before retrying.
// One line on stderr, never a stack trace, never the secret.
import t from 'tap';
import type { Test } from 'tap';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { startStack, Stack } from '../helpers/stack';
import { cli, cliAsync, eventually, init, makeHome, Result } from '../helpers/postern';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

const STACK = /^\s+at .+(\(.*:\d+:\d+\)|:\d+:\d+)$|\b(TypeError|ReferenceError|RangeError|Error):/m;

function credential(port: number): string {
  return `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${port}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`;
}

// One line on stderr, no stack trace.
function oneLine(t: Test, r: Result, what: string): void {
  t.equal(r.stderr.trim().split('\n').length, 1, `${what}: one line on stderr: ${r.stderr}`);
  t.notMatch(r.stderr + r.stdout, STACK, `${what}: no stack trace`);
}

function jsonError(r: Result): Record<string, unknown> {
  return (JSON.parse(r.stdout) as { error: Record<string, unknown> }).error;
}

t.test('no daemon: exit 3, daemon_unreachable, nothing executed', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const sock = join(h.home, 'agent.sock');
  const args = ['request', 'http', '--credential', 'api', '--url', 'https://api.example.test/v1/items'];
  const human = cli(h, args);
  t.equal(human.code, 3, 'exit 3');
  t.equal(human.stdout, '', 'nothing on stdout');
  t.equal(
    human.stderr,
    `postern: the postern daemon is not reachable at ${sock} (ENOENT); start it with \`postern daemon\`\n`,
  );
  const json = cli(h, [...args, '--json']);
  t.equal(json.code, 3, 'exit 3 with --json');
  t.same(
    jsonError(json),
    {
      code: 'daemon_unreachable',
      message: `the postern daemon is not reachable at ${sock} (ENOENT); start it with \`postern daemon\``,
    },
    'no maybe_executed: the request never left',
  );
  oneLine(t, json, '--json');
});

t.test('answers, refusals and usage errors', async (t) => {
  const s: Stack = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('REQCLI');
  s.addCredential('api', credential(s.up.port), secret);
  await s.approver();
  const outputs: string[] = [];
  // Asynchronous: the DNS server and the upstream live in this process.
  const run = async (args: string[]): Promise<Result> => {
    const r = await cliAsync(s.h, ['request', 'http', '--credential', 'api', ...args]);
    outputs.push(r.stdout, r.stderr);
    return r;
  };

  const ok = await run(['--url', s.url('api.example.test', '/v1/items'), '--json']);
  t.equal(ok.code, 0, `exit 0: ${ok.stderr}`);
  const answer = JSON.parse(ok.stdout) as Record<string, unknown>;
  t.equal(answer['status'], 200);
  t.type(answer['audit_seq'], 'number', 'the audit entry is named');
  t.equal(s.up.requests.length, 1, 'the upstream saw the request');
  t.equal(s.up.requests[0]!.headers['authorization'], `Bearer ${secret}`, 'the secret was injected upstream');

  const human = await run(['-X', 'POST', '--data', 'hello', '--url', s.url('api.example.test', '/v1/items')]);
  t.equal(human.code, 0, `exit 0: ${human.stderr}`);
  t.match(
    JSON.parse(human.stdout),
    { method: 'POST', url: '/v1/items', body: 'hello' },
    "stdout is the upstream's body alone",
  );
  t.match(
    human.stderr,
    /^postern: status 200 from api\.example\.test \(127\.0\.0\.1:\d+\), audit #\d+ \[1 redactions\]\n$/,
    'the status line on stderr, naming the audit entry (the echoed Authorization redacted)',
  );

  // Refused by policy: nothing sent, exit 1, the code and the entry kept.
  const refused = await run(['--url', s.url('api.example.test', '/admin'), '--json']);
  t.equal(refused.code, 1, 'exit 1');
  const err = jsonError(refused);
  t.equal(err['code'], 'denied_policy', JSON.stringify(err));
  t.type(err['audit_seq'], 'number', 'the refusal is journaled');
  oneLine(t, refused, 'refusal');
  t.match(refused.stderr, /^postern: denied_policy: /, 'stderr names the code');
  t.equal(s.up.requests.length, 2, 'the refused request never reached the upstream');

  // Usage errors: exit 2 before anything is sent.
  for (const [args, message] of [
    [['-H', 'no-colon', '--url', s.url('api.example.test', '/v1/x')], '-H "no-colon": write "name: value"'],
    [
      ['--timeout-ms', '0', '--url', s.url('api.example.test', '/v1/x')],
      '--timeout-ms must be a positive whole number',
    ],
    [
      ['--timeout-ms', '1.5', '--url', s.url('api.example.test', '/v1/x')],
      '--timeout-ms must be a positive whole number',
    ],
    [
      ['--data', 'a', '--data-file', '/etc/hostname', '--url', s.url('api.example.test', '/v1/x')],
      'give --data or --data-file, not both',
    ],
  ] as [string[], string][]) {
    const r = await run(args);
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
    t.equal(r.stderr, `postern: ${message}\n`, `${args.join(' ')}: says what to write`);
  }
  t.equal(s.up.requests.length, 2, 'no usage error reached the upstream');

  t.same(findCanary(outputs.join('\n'), secret), [], 'the secret in no CLI output');
});

t.test('the daemon killed after taking the request: exit 3, maybe_executed', async (t) => {
  const held: ServerResponse[] = [];
  const s: Stack = await startStack({ handler: (_req, _body, res) => void held.push(res) });
  t.teardown(async () => {
    for (const res of held) res.destroy();
    await s.close();
  });
  const secret = makeCanary('REQKILL');
  s.addCredential('api', credential(s.up.port), secret);
  await s.approver();

  const pending = cliAsync(s.h, [
    'request',
    'http',
    '--json',
    '--credential',
    'api',
    '-X',
    'POST',
    '--data',
    'once',
    '--url',
    s.url('api.example.test', '/v1/items'),
  ]);
  t.ok(await eventually(() => s.up.requests.length === 1, 10_000), 'the request reached the upstream');
  s.d.proc.kill('SIGKILL');
  t.equal(await s.d.exited, null, 'the daemon is gone');
  const r = await pending;
  t.equal(r.code, 3, 'exit 3');
  const err = jsonError(r);
  t.equal(err['code'], 'daemon_unreachable');
  t.equal(err['maybe_executed'], true, 'the request may have been executed');
  t.match(
    String(err['message']),
    /may have been executed — check `postern audit show` before retrying/,
    'says what to check before a retry',
  );
  oneLine(t, r, 'killed');

  // Without --json, the same words on stderr.
  const after = await cliAsync(s.h, [
    'request',
    'http',
    '--credential',
    'api',
    '--url',
    s.url('api.example.test', '/v1/items'),
  ]);
  t.equal(after.code, 3, 'exit 3 once the daemon is gone');
  t.match(
    after.stderr,
    /\(ECONNREFUSED\); start it with `postern daemon`/,
    'a stale socket: not reachable, nothing executed',
  );
  t.same(findCanary(r.stdout + r.stderr + after.stdout + after.stderr, secret), [], 'the secret in no CLI output');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'nor in the journal files');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor in a decrypted journal entry');
});
