// `postern audit verify` and `postern audit head` through the real CLI
// (dist/, a child process): a real journal of 1,200 entries in three
// segments, damaged in representative ways; hostile inputs get a one-line
// verdict and exit 1 in bounded memory and time.
import t, { Test } from 'tap';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { segmentPath } from '../../shared/audit-format';
import { ed25519Keypair } from '../../shared/crypto';
import { CLI, Result, cleanEnv, cli, init, makeHome } from '../helpers/postern';
import { b64, buildJournal, makeKeys, resign, tamper } from '../helpers/journal-fixture';

const N = 1200;
const root = mkdtempSync(join(tmpdir(), 'pt-audit-cli-'));
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
  t.equal(r.stderr, `postern: audit verification failed: ${kind}${seq === null ? '' : ` at entry ${seq}`}\n`, `${what}: one line on stderr`);
  t.match(r.stdout, /result: FAILED\n$/);
  t.notMatch(r.stdout + r.stderr, /\n\s+at /, 'no stack trace');
}

t.test('audit verify and head through the CLI', async (t) => {
  const j = await buildJournal(join(root, 'base'), N, { segmentEvery: 500 });
  const pubkey = b64(j.keys.sign.publicKey);
  const head = `${j.head.seq}:${j.head.hash}`;
  const mid = 600;
  const cp = j.checkpoints.find((s) => s > 700) as number;

  t.test('an untouched journal', async (t) => {
    const r = verify('--log', j.path, '--pubkey', pubkey, '--expect-head', head);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stderr, '');
    t.match(r.stdout, `entries checked: ${N}\n`);
    t.match(r.stdout, `checkpoints: ${j.checkpoints.length} (signed through entry ${N - 1}); unsigned tail: 0\n`);
    t.match(r.stdout, `head: ${head}\n`);
    t.match(r.stdout, `key: pinned (${pubkey})\n`);
    t.match(r.stdout, /result: ok\n$/);
    const unpinned = verify('--log', j.dir);
    t.equal(unpinned.code, 0);
    t.match(unpinned.stdout, 'key: not pinned');
    const json = verify('--log', j.path, '--json');
    t.equal(json.code, 0);
    t.same(JSON.parse(json.stdout), { journal: j.path, ok: true, entries: N, checkpoints: j.checkpoints.length, segments: 3, head: j.head, keyPinned: false, signedThrough: N - 1, unsignedTail: 0, problem: null });
    const h = cli(env, ['audit', 'head', '--log', j.path]);
    t.equal(h.code, 0, h.stderr);
    t.equal(h.stdout, `${head}\n`);
    t.same(JSON.parse(cli(env, ['audit', 'head', '--log', j.dir, '--json']).stdout), { journal: j.dir, seq: N, hash: j.head.hash, head, file: segmentPath(j.path, 2) });
  });

  t.test('damage', async (t) => {
    failsWith(t, verify('--log', tamper(j, { op: 'flip', seq: mid, byte: 40 }, scratch())), 'modified', mid, 'a byte of a middle entry');
    failsWith(t, verify('--log', tamper(j, { op: 'delete', seq: cp }, scratch())), 'deleted', cp, 'a checkpoint deleted');
    failsWith(t, verify('--log', tamper(j, { op: 'duplicate', seq: 501 }, scratch())), 'inserted', 501, 'the segment entry duplicated');
    failsWith(t, verify('--log', tamper(j, { op: 'swap', seq: 1 }, scratch())), 'reordered', 1, 'the first two swapped');
    failsWith(t, verify('--log', tamper(j, { op: 'swap', seq: N - 1 }, scratch())), 'reordered', N - 1, 'the last two swapped');

    const cut = tamper(j, { op: 'cut', count: 5 }, scratch());
    const prevCp = j.checkpoints[j.checkpoints.length - 2] as number;
    failsWith(t, verify('--log', cut), 'unsigned_tail', prevCp + 1, 'the last 5 cut');
    const allowed = verify('--log', cut, '--allow-unsigned-tail');
    t.equal(allowed.code, 0, 'an unsigned tail is accepted when allowed');
    t.match(allowed.stdout, `unsigned tail: ${N - 5 - prevCp}\n`);
    failsWith(t, verify('--log', cut, '--allow-unsigned-tail', '--expect-head', head), 'behind_expected_head', N - 4, 'the last 5 cut, expected head');
    t.equal(cli(env, ['audit', 'head', '--log', cut]).stdout, `${N - 5}:${j.hashes[N - 6]}\n`);

    const torn = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(torn, 2), '{"v":1,"seq":');
    failsWith(t, verify('--log', torn), 'torn_last_write', N + 1, 'a torn last write');
    t.equal(cli(env, ['audit', 'head', '--log', torn]).stdout, `${head}\n`, 'head skips the torn line');

    // Re-signed entirely under another key: only the pinned key shows it.
    const other = resign(j, scratch(), { key: ed25519Keypair(), genesis: true });
    t.equal(verify('--log', other.path).code, 0, 'consistent under its own key');
    failsWith(t, verify('--log', other.path, '--pubkey', pubkey), 'wrong_key', 1, 're-signed, pinned');
  });

  t.test('usage errors exit 2 with one line', async (t) => {
    for (const args of [['--expect-head', '12:abc'], ['--expect-head', 'nope'], ['--expect-head', `0:${j.head.hash}`], ['--pubkey', 'abc'], ['--pubkey', Buffer.alloc(31).toString('base64')]]) {
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
    writeFileSync(garbage, Buffer.from(Array.from({ length: 4 << 20 }, (_, i) => (i * 2654435761) >>> 24)));
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

    const cases: Array<[string, string[], string, number | null]> = [
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
      t.ok(m.maxRssKiB > 0 && m.maxRssKiB < 200 * 1024, `${what}: max RSS ${Math.round(m.maxRssKiB / 1024)} MiB < 200 MiB`);
      t.ok(m.seconds < 20, `${what}: ${m.seconds.toFixed(2)} s`);
    }
    const h = measured(['audit', 'head', '--log', longAlone]);
    t.equal(h.result.code, 1, 'head of a file without an entry');
    t.match(h.result.stderr, /^postern: [^\n]+ holds no complete entry[^\n]*\n$/);
    t.ok(h.maxRssKiB < 200 * 1024, `head: max RSS ${Math.round(h.maxRssKiB / 1024)} MiB`);
  });

  t.test('the default journal is the config\'s audit_log (here: made by `postern init`)', async (t) => {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    const r = init(h, ['--json']);
    t.equal(r.code, 0, r.stderr);
    const key = (JSON.parse(r.stdout) as { audit_public_key: string }).audit_public_key;
    const headLine = cli(h, ['audit', 'head']);
    t.equal(headLine.code, 0, headLine.stderr);
    t.match(headLine.stdout, /^1:[0-9a-f]{64}\n$/);
    // Only the genesis entry: nothing signed yet.
    failsWith(t, cli(h, ['audit', 'verify']), 'unsigned_tail', 1, 'a fresh journal');
    const ok = cli(h, ['audit', 'verify', '--allow-unsigned-tail', '--pubkey', key, '--expect-head', headLine.stdout.trim()]);
    t.equal(ok.code, 0, ok.stdout + ok.stderr);
    t.match(ok.stdout, `journal: ${join(h.home, 'audit.log')} (1 segment file)`);
    failsWith(t, cli(h, ['audit', 'verify', '--allow-unsigned-tail', '--pubkey', b64(Buffer.alloc(32, 9))]), 'wrong_key', 1, 'the wrong key pinned');
  });
});

// Runs the CLI under GNU time for its peak RSS.
function measured(args: string[]): { result: Result; maxRssKiB: number; seconds: number } {
  const rssFile = join(root, `rss-${++counter}`);
  const started = process.hrtime.bigint();
  const r = spawnSync('/usr/bin/time', ['-f', '%M', '-o', rssFile, '/usr/bin/env', '-u', 'NODE_OPTIONS', process.execPath, CLI, ...args], {
    env: cleanEnv(),
    encoding: 'utf8',
    timeout: 60_000,
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const maxRssKiB = Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop());
  return { result: { code: r.status, stdout: r.stdout, stderr: r.stderr }, maxRssKiB, seconds };
}
