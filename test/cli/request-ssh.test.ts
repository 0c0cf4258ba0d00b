// `postern request ssh` ends as ssh does (SPEC §5): the remote stdout and
// stderr on stdout and stderr, byte for byte (binary, no newline added);
// the exit code is the remote command's (2 stays 2), 128 + n when signal n
// ended it, 255 when postern refused or could not be reached (the code and
// message on stderr), 2 for a usage error; --json prints the whole reply
// and ends the same way; a truncated output is said on stderr; --reason
// reaches the card; a reader that closes the pipe early ends it quietly
// with the remote status. Real daemon, Debian's OpenSSH sshd, password
// login; the password in no byte the CLI prints.
import t from 'tap';
import { constants } from 'node:os';
import { join } from 'node:path';
import { startSshd } from '../helpers/sshd';
import { startStack, Card } from '../helpers/stack';
import { addSshCredential } from '../helpers/ssh-credential';
import { cliBytes, BytesResult } from '../helpers/cli-bytes';
import { findCanary } from '../helpers/canary';

const STACK = /^\s+at .+(\(.*:\d+:\d+\)|:\d+:\d+)$|\b(TypeError|ReferenceError|RangeError|Error):|EPIPE/m;

const BOTH = 'echo out; printf err >&2; exit 2';
const BINARY = "printf '\\377\\000\\001'";
const NO_NEWLINE = 'printf abc';
const TERM = 'kill -TERM $$';
const KILL = 'kill -KILL $$';
const LARGE = 'seq 1 300000';
const OVER_CAP = "head -c 5000000 /dev/zero | tr '\\0' a"; // over max_output (4 MiB)
const COMMANDS = [BOTH, BINARY, NO_NEWLINE, TERM, KILL, LARGE, OVER_CAP, 'true'];

t.test('postern request ssh ends as ssh does', async (t) => {
  const [sshd, s] = await Promise.all([
    startSshd({ passwordUser: true }),
    startStack({ sshConfig: 'max_output = "4MiB"' }),
  ]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  const password = sshd.password!.password;
  const added = addSshCredential(
    s.h,
    {
      name: 'box',
      port: sshd.port,
      user: sshd.user,
      auth: 'password',
      hostKey: sshd.hostKeyFingerprint,
      commands: COMMANDS,
    },
    s.h.file('pw', password + '\n'),
  );
  t.equal(added.code, 0, added.stderr);
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'once' };
  });
  const printed: Buffer[] = [];
  const ssh = async (args: string[], o: { pipeTo?: string; env?: NodeJS.ProcessEnv } = {}): Promise<BytesResult> => {
    const r = await cliBytes(o.env ?? s.h.env, ['request', 'ssh', '--credential', 'box', ...args], o.pipeTo);
    printed.push(r.stdout, Buffer.from(r.stderr));
    return r;
  };

  await t.test('stdout and stderr apart, the remote exit code', async (t) => {
    const r = await ssh(['--command', BOTH]);
    t.equal(r.code, 2, 'exit 2, as the remote command');
    t.equal(r.stdout.toString(), 'out\n', 'the remote stdout alone on stdout');
    t.equal(r.stderr, 'err', 'the remote stderr alone on stderr');
    const bin = await ssh(['--command', BINARY]);
    t.equal(bin.code, 0, bin.stderr);
    t.ok(
      bin.stdout.equals(Buffer.from([0xff, 0x00, 0x01])),
      `binary output byte for byte: ${bin.stdout.toString('hex')}`,
    );
    const plain = await ssh(['--command', NO_NEWLINE]);
    t.equal(plain.stdout.toString(), 'abc', 'no newline added');
    t.equal(plain.stderr, '');
    const json = await ssh(['--command', BOTH, '--json']);
    t.equal(json.code, 2, '--json: exit 2 too');
    t.match(
      JSON.parse(json.stdout.toString()),
      { exit_code: 2, signal: null, stdout: 'out\n', stderr: 'err', audit_seq: Number },
      'the whole reply',
    );
  });

  await t.test('a truncated output is said on stderr', async (t) => {
    const r = await ssh(['--command', OVER_CAP]);
    t.equal(r.code, 0, 'the remote status');
    t.equal(r.stdout.length, 4 * 1024 * 1024, 'stdout: what was kept, max_output');
    t.ok(
      r.stdout.every((b) => b === 0x61),
      'the remote bytes',
    );
    t.match(r.stderr, /^postern: the remote output above is not exactly the command's: \[truncated\], audit #\d+\n$/);
  });

  await t.test('a signal: 128 + its number', async (t) => {
    const term = await ssh(['--command', TERM]);
    t.equal(term.code, 128 + constants.signals.SIGTERM, 'TERM: 143');
    const kill = await ssh(['--command', KILL]);
    t.equal(kill.code, 128 + constants.signals.SIGKILL, 'KILL: 137');
    const json = await ssh(['--command', TERM, '--json']);
    t.equal(json.code, 143);
    t.match(JSON.parse(json.stdout.toString()), { exit_code: null, signal: 'SIGTERM' });
  });

  await t.test('postern refused or failed: 255', async (t) => {
    const refused = await ssh(['--command', 'rm -rf /']);
    t.equal(refused.code, 255, 'a refusal: 255');
    t.equal(refused.stdout.length, 0);
    t.match(
      refused.stderr,
      /^postern: denied_policy: credential "box" does not allow this command; [^\n]*\n$/,
      'the code and message, one line',
    );
    const json = await ssh(['--command', 'rm -rf /', '--json']);
    t.equal(json.code, 255, '--json: 255');
    t.match(JSON.parse(json.stdout.toString()), { error: { code: 'denied_policy', audit_seq: Number } });
    const gone = join(s.h.dir, 'no.sock');
    const unreachable = await ssh(['--command', 'true'], { env: { ...s.h.env, POSTERN_AGENT_SOCKET: gone } });
    t.equal(unreachable.code, 255, 'the daemon not reachable: 255');
    t.equal(
      unreachable.stderr,
      `postern: the postern daemon is not reachable at ${gone} (ENOENT); start it with \`postern daemon\`\n`,
    );
    const usage = await ssh(['--command', 'true', '--timeout-ms', '0']);
    t.equal(usage.code, 2, 'a usage error: 2, nothing sent');
    t.equal(usage.stderr, 'postern: --timeout-ms must be a positive whole number\n');
    for (const r of [refused, json, unreachable, usage]) t.notMatch(r.stderr, STACK);
  });

  await t.test('--reason and POSTERN_AGENT_SOCKET', async (t) => {
    const env = { ...s.h.env, POSTERN_HOME: join(s.h.dir, 'elsewhere'), POSTERN_AGENT_SOCKET: s.sock };
    const r = await ssh(['--command', 'true', '--reason', 'check the box answers'], { env });
    t.equal(r.code, 0, r.stderr);
    t.equal(cards.at(-1)!.action['reason'], 'check the box answers', 'the reason on the card');
  });

  await t.test('a reader that closes the pipe early', async (t) => {
    const r = await ssh(['--command', LARGE], { pipeTo: 'head -c 10' });
    t.equal(r.stdout.toString(), '1\n2\n3\n4\n5\n', 'the reader got its 10 bytes');
    t.equal(r.code, 0, `the remote status: ${r.stderr}`);
    t.equal(r.stderr, '', 'nothing on stderr');
    const json = await ssh(['--command', BOTH, '--json'], { pipeTo: 'head -c 20' });
    t.equal(json.code, 2, '--json: the remote status');
    t.notMatch(json.stderr, STACK);
  });

  t.same(findCanary(Buffer.concat(printed), password), [], 'the password in no byte the CLI printed');
});
