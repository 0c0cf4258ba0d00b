// The WGETRC `postern run` sets (cli/run/ca-bundle.ts): the file postern run
// hands wget holds the caller's wgetrc, byte for byte, then ca_certificate.
import t from 'tap';
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { startProxyStack } from '../helpers/proxy-stack';
import { CLI } from '../helpers/postern';

interface R {
  code: number | null;
  stdout: Buffer;
  stderr: string;
  ms: number;
}

t.test('WGETRC under postern run', async (t) => {
  const s = await startProxyStack();
  t.teardown(() => s.close());
  const dir = join(s.h.dir, 'wg');
  mkdirSync(dir);
  // CMD prints the wgetrc it was given, base64 (exact bytes).
  const run = (env: Record<string, string | undefined>, limitS = 15): Promise<R> =>
    new Promise((resolve) => {
      const e: NodeJS.ProcessEnv = { ...s.h.env, ...env };
      for (const [k, v] of Object.entries(env)) if (v === undefined) delete e[k];
      const started = Date.now();
      const p = spawn(
        '/usr/bin/timeout',
        [
          '-s',
          'KILL',
          String(limitS),
          '/usr/bin/env',
          '-u',
          'NODE_OPTIONS',
          process.execPath,
          CLI,
          'run',
          '--credential',
          s.credential,
          '--',
          'sh',
          '-c',
          'base64 -w0 "$WGETRC"',
        ],
        { env: e, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const out: Buffer[] = [];
      let err = '';
      p.stdout.on('data', (d: Buffer) => out.push(d));
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('close', (code) =>
        resolve({
          code,
          stdout: Buffer.from(Buffer.concat(out).toString(), 'base64'),
          stderr: err,
          ms: Date.now() - started,
        }),
      );
    });
  const caLine = /ca_certificate = \/\S+ca-bundle\.pem\n$/;

  await t.test('a caller wgetrc with latin-1 bytes (a password) is kept byte for byte', async (t) => {
    const mine = Buffer.concat([
      Buffer.from('http_user = bob\nhttp_password = p'),
      Buffer.from([0xe4, 0xdf]),
      Buffer.from('w\n'),
    ]);
    const f = join(dir, 'latin1.wgetrc');
    writeFileSync(f, mine);
    const r = await run({ WGETRC: f });
    t.equal(r.code, 0, r.stderr);
    t.same(
      r.stdout.subarray(0, mine.length).toString('hex'),
      mine.toString('hex'),
      'the caller’s bytes first, unchanged',
    );
    t.match(r.stdout.toString('latin1'), caLine);
  });

  await t.test('WGETRC naming a FIFO nobody writes: postern run does not hang', async (t) => {
    const f = join(dir, 'fifo');
    execFileSync('mkfifo', [f]);
    const r = await run({ WGETRC: f }, 12);
    t.not(r.code, null, 'not killed');
    t.ok(r.ms < 10_000, `CMD ran promptly (took ${r.ms} ms, exit ${r.code}; stderr ${r.stderr.slice(0, 200)})`);
    t.equal(r.code, 0);
  });

  await t.test("HOME unset, no WGETRC: the passwd entry's home is where wget looks", async (t) => {
    // The .wgetrc of this uid's passwd home (written for the test when
    // there is none, and removed after it).
    const own = join(userInfo().homedir, '.wgetrc');
    if (!existsSync(own)) {
      writeFileSync(own, '# the passwd home wgetrc\n');
      t.teardown(() => rmSync(own, { force: true }));
    }
    const r = await run({ HOME: undefined, WGETRC: undefined });
    t.equal(r.code, 0, r.stderr);
    const got = r.stdout.toString('latin1');
    const ours = /ca_certificate = \S+\n$/.exec(got)?.[0] ?? '<no ca_certificate line>';
    const mine = readFileSync(own, 'latin1');
    t.equal(
      got,
      (mine === '' || mine.endsWith('\n') ? mine : `${mine}\n`) + ours,
      'that .wgetrc byte for byte, then ca_certificate',
    );
  });

  await t.test('the caller sets ca_certificate and check_certificate = off: kept, ours last', async (t) => {
    const f = join(dir, 'own.wgetrc');
    writeFileSync(f, 'ca_certificate = /etc/mine.pem\ncheck_certificate = off');
    const r = await run({ WGETRC: f });
    t.equal(r.code, 0, r.stderr);
    const text = r.stdout.toString();
    t.match(text, /^ca_certificate = \/etc\/mine\.pem\ncheck_certificate = off\nca_certificate = \S+\n$/);
  });

  await t.test('~/.wgetrc a symlink: followed', async (t) => {
    const home = join(dir, 'home');
    mkdirSync(home);
    writeFileSync(join(dir, 'real.wgetrc'), 'tries = 3\n');
    symlinkSync(join(dir, 'real.wgetrc'), join(home, '.wgetrc'));
    const r = await run({ HOME: home, WGETRC: undefined });
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout.toString(), /^tries = 3\nca_certificate = /);
  });

  await t.test('an unreadable caller wgetrc: run still works (only ours)', async (t) => {
    const f = join(dir, 'unreadable.wgetrc');
    writeFileSync(f, 'tries = 9\n');
    chmodSync(f, 0);
    const r = await run({ WGETRC: f });
    t.equal(r.code, 0, r.stderr);
    // root reads anything; otherwise only our line
    t.match(r.stdout.toString(), caLine);
  });
});
