// `postern request ssh --stdin-file F` and `postern request http --data-file
// F` with a file that cannot be read (SPEC §5): exit 2, one line on stderr
// naming the option, the file and what to do, no stack trace; with --json
// the same message as a `usage` error. The file is read before the daemon is
// asked (none runs here: asking it would be exit 3).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, cli, makeHome, Result } from '../helpers/postern';

const STACK = /^\s+at .+(\(.*:\d+:\d+\)|:\d+:\d+)$|\b(TypeError|ReferenceError|RangeError|Error):/m;
const NOBODY = 65534;

t.test('an option file that cannot be read', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const dir = join(h.dir, 'a-directory');
  mkdirSync(dir);
  const missing = join(h.dir, 'missing');
  const underFile = join(h.file('plain', 'x'), 'below');
  const loop = join(h.dir, 'loop');
  symlinkSync(loop, loop);

  const ssh = ['request', 'ssh', '--credential', 'box', '--command', 'true', '--stdin-file'];
  const http = ['request', 'http', '--credential', 'api', '--url', 'https://api.example.test/', '--data-file'];
  const cases: [string[], string, string][] = [
    [ssh, dir, 'is a directory; name a file'],
    [ssh, missing, 'no such file; check the path'],
    [ssh, underFile, 'a part of the path is not a directory; check the path'],
    [ssh, loop, 'too many symbolic links; check the path'],
    [http, dir, 'is a directory; name a file'],
    [http, missing, 'no such file; check the path'],
  ];
  for (const [args, file, why] of cases) {
    const option = args.at(-1)!;
    const message = `${option} ${JSON.stringify(file)}: ${why}`;
    const r = cli(h, [...args, file]);
    t.equal(r.code, 2, `${option} ${file}: exit 2`);
    t.equal(r.stdout, '');
    t.equal(r.stderr, `postern: ${message}\n`);
    const j = cli(h, [...args, file, '--json']);
    t.equal(j.code, 2);
    t.same(JSON.parse(j.stdout), { error: { code: 'usage', message } }, `${option} --json`);
    t.notMatch(r.stderr + j.stdout + j.stderr, STACK, 'no stack trace');
  }

  await t.test('a file the user may not read', async (t) => {
    // h.dir is root's, mode 0700: another user cannot reach the file.
    const file = h.file('secret-input', 'x');
    const asNobody = (args: string[]): Result => {
      const r = spawnSync(
        '/usr/bin/setpriv',
        [
          '--reuid',
          String(NOBODY),
          '--regid',
          String(NOBODY),
          '--clear-groups',
          '/usr/bin/env',
          '-u',
          'NODE_OPTIONS',
          process.execPath,
          CLI,
          ...args,
        ],
        { env: h.env, encoding: 'utf8', timeout: 60_000 },
      );
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    for (const args of [ssh, http]) {
      const r = asNobody([...args, file]);
      t.equal(r.code, 2, r.stderr);
      t.equal(r.stdout, '');
      t.equal(
        r.stderr,
        `postern: ${args.at(-1)!} ${JSON.stringify(file)}: permission denied; check the file's permissions\n`,
      );
    }
  });
});
