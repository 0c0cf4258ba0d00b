// `postern audit verify` through the real CLI on hostile input: each gets a
// one-line verdict and exit 1 within bounded memory (peak RSS measured with
// GNU time) and time; malformed options are usage errors (exit 2).
import t, { Test } from 'tap';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { segmentPath } from '../../shared/audit-format';
import { ed25519Keypair } from '../../shared/crypto';
import { CLI, Result, cleanEnv, cli } from '../helpers/postern';
import { b64, buildJournal, makeKeys, resign, tamper } from '../helpers/journal-fixture';

const N = 1200;
const root = mkdtempSync(join(tmpdir(), 'pt-audit-cli2-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const scratch = (): string => join(root, `c${++counter}`);
const env = { env: cleanEnv() };
const verify = (...args: string[]): Result => cli(env, ['audit', 'verify', ...args]);

// Exit 1, the kind and entry on the `problem:` line, one line on stderr, no stack trace.
function failsWith(t: Test, r: Result, kind: string, seq: number | null, what: string): void {
  t.equal(r.code, 1, `${what}: exit 1 (${r.stderr.trim()})`);
  const problems = r.stdout.split('\n').filter((l) => l.startsWith('problem: '));
  t.equal(problems.length, 1, `${what}: one problem line`);
  t.match(problems[0] ?? '', `problem: ${seq === null ? 'no entry number' : `entry ${seq}`}: ${kind} (`, what);
  t.equal(
    r.stderr,
    `postern: audit verification failed: ${kind}${seq === null ? '' : ` at entry ${seq}`}\n`,
    `${what}: one line on stderr`,
  );
  t.notMatch(r.stdout + r.stderr, /\n\s+at /, 'no stack trace');
}

t.test('hostile input and bad options', async (t) => {
  const j = await buildJournal(join(root, 'base'), N, { segmentEvery: 500 });
  const pubkey = b64(j.keys.sign.publicKey);
  const cp = j.checkpoints.find((s) => s > 700) as number;

  t.test('usage errors exit 2 with one line', async (t) => {
    for (const args of [
      ['--expect-head', '12:abc'],
      ['--expect-head', `0:${j.head.hash}`],
      ['--pubkey', Buffer.alloc(31).toString('base64')],
    ]) {
      const r = verify('--log', j.path, ...args);
      t.equal(r.code, 2, args.join(' '));
      t.equal(r.stdout, '');
      t.match(r.stderr, /^postern: --(expect-head|pubkey) must be [^\n]+\n$/);
    }
  });

  t.test('hostile inputs: one verdict, exit 1, bounded memory and time', async (t) => {
    const d = scratch();
    mkdirSync(d);
    const empty = join(d, 'empty');
    writeFileSync(empty, '');
    const garbage = join(d, 'garbage');
    writeFileSync(garbage, randomBytes(4 << 20));
    const foreign = await buildJournal(scratch(), 300, { keys: await makeKeys() });
    // A valid chain with one checkpoint signed by another key.
    const strangeSig = resign(j, scratch(), { key: ed25519Keypair(), only: cp });
    // 100 MiB lines, written sparsely: after a whole journal, and alone.
    const longAfter = tamper(j, { op: 'cut', count: 0 }, scratch());
    const last = segmentPath(longAfter, 2);
    truncateSync(last, statSync(last).size + 100 * 1024 * 1024);
    appendFileSync(last, '\n');
    const longAlone = join(d, 'long');
    writeFileSync(longAlone, '');
    truncateSync(longAlone, 100 * 1024 * 1024);

    // One last line that is not an entry (a write cut short), and a journal without its genesis entry.
    const garbageLast = tamper(j, { op: 'insert', before: N + 1, line: Buffer.from('{"v":1,"seq":') }, scratch());
    const noGenesis = tamper(j, { op: 'delete', seq: 1 }, scratch());

    const cases: Array<[string, string[], string, number | null]> = [
      ['a last line that is not an entry', ['--log', garbageLast], 'torn_last_write', N + 1],
      ['the genesis entry deleted', ['--log', noGenesis], 'deleted', 1],
      ['an empty file', ['--log', empty], 'not_a_journal', null],
      ['binary garbage', ['--log', garbage], 'not_a_journal', null],
      ['a journal from another vault, pinned', ['--log', foreign.path, '--pubkey', pubkey], 'wrong_key', 1],
      ['a checkpoint signed by another key', ['--log', strangeSig.path], 'wrong_key', cp],
      ['a 100 MiB line after the journal', ['--log', longAfter], 'modified', N + 1],
      ['a 100 MiB file without a newline', ['--log', longAlone], 'not_a_journal', null],
    ];
    for (const [what, args, kind, seq] of cases) {
      const m = measured(['audit', 'verify', ...args]);
      failsWith(t, m.result, kind, seq, what);
      t.ok(
        m.maxRssKiB > 0 && m.maxRssKiB < 200 * 1024,
        `${what}: max RSS ${Math.round(m.maxRssKiB / 1024)} MiB < 200 MiB`,
      );
      t.ok(m.seconds < 20, `${what}: ${m.seconds.toFixed(2)} s`);
    }
    const h = measured(['audit', 'head', '--log', longAlone]);
    t.equal(h.result.code, 1, 'head of a file without an entry');
    t.match(
      h.result.stderr,
      /^postern: [^\n]+ ends in more than 65536 bytes without a newline, longer than any journal entry; run `postern audit verify --log [^\n]+` to find the damage\n$/,
    );
    t.ok(h.maxRssKiB < 200 * 1024, `head: max RSS ${Math.round(h.maxRssKiB / 1024)} MiB`);
  });
});

// Runs the CLI under GNU time for its peak RSS.
function measured(args: string[]): { result: Result; maxRssKiB: number; seconds: number } {
  const rssFile = join(root, `rss-${++counter}`);
  const started = process.hrtime.bigint();
  const r = spawnSync(
    '/usr/bin/time',
    ['-f', '%M', '-o', rssFile, '/usr/bin/env', '-u', 'NODE_OPTIONS', process.execPath, CLI, ...args],
    {
      env: cleanEnv(),
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const maxRssKiB = Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop());
  return { result: { code: r.status, stdout: r.stdout, stderr: r.stderr }, maxRssKiB, seconds };
}
