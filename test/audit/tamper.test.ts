// `postern audit verify` and `postern audit head` through the real CLI
// (dist/, a child process): a real journal of 1,200 entries in three
// segments, damaged in representative ways, and the journal `postern init`
// makes, found through the config. Hostile inputs: verify-cli.test.ts.
import t, { Test } from 'tap';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { segmentPath } from '../../shared/audit-format';
import { ed25519Keypair } from '../../shared/crypto';
import { Result, cleanEnv, cli, cliAsync, init, makeHome } from '../helpers/postern';
import { b64, buildJournal, resign, tamper } from '../helpers/journal-fixture';

const N = 1200;
const root = mkdtempSync(join(tmpdir(), 'pt-audit-cli-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const scratch = (): string => join(root, `c${++counter}`);
const env = { env: cleanEnv() };

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
    const [r, json, h, hj] = await Promise.all([
      cliAsync(env, ['audit', 'verify', '--log', j.path, '--pubkey', pubkey, '--expect-head', head]),
      cliAsync(env, ['audit', 'verify', '--log', j.dir, '--json']),
      cliAsync(env, ['audit', 'head', '--log', j.path]),
      cliAsync(env, ['audit', 'head', '--log', j.dir, '--json']),
    ]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stderr, '');
    t.match(r.stdout, `entries checked: ${N}\n`);
    t.match(r.stdout, `checkpoints: ${j.checkpoints.length} (signed through entry ${N - 1}); unsigned tail: 0\n`);
    t.match(r.stdout, `head: ${head}\n`);
    t.match(r.stdout, `key: pinned (${pubkey})\n`);
    t.match(r.stdout, /result: ok\n$/);
    t.equal(json.code, 0);
    t.same(JSON.parse(json.stdout), {
      journal: j.dir,
      ok: true,
      entries: N,
      checkpoints: j.checkpoints.length,
      segments: 3,
      head: j.head,
      keyPinned: false,
      signingKeys: [{ key: pubkey, since: 1 }],
      signedThrough: N - 1,
      unsignedTail: 0,
      problem: null,
    });
    t.equal(h.code, 0, h.stderr);
    t.equal(h.stdout, `${head}\n`);
    t.same(JSON.parse(hj.stdout), { journal: j.dir, seq: N, hash: j.head.hash, head, file: segmentPath(j.path, 2) });
  });

  t.test('damage', async (t) => {
    const prevCp = j.checkpoints[j.checkpoints.length - 2] as number;
    const cut = tamper(j, { op: 'cut', count: 5 }, scratch());
    const torn = tamper(j, { op: 'cut', count: 0 }, scratch());
    appendFileSync(segmentPath(torn, 2), '{"v":1,"seq":');
    // Re-signed entirely under another key: only the pinned key shows it.
    const other = resign(j, scratch(), { key: ed25519Keypair(), genesis: true });
    // The children run side by side; each case is checked on its own result.
    type Case = [string, string[], (t: Test, r: Result) => void];
    const fails =
      (kind: string, seq: number | null, what: string) =>
      (t: Test, r: Result): void =>
        failsWith(t, r, kind, seq, what);
    const cases: Case[] = [
      [
        'flip',
        ['verify', '--log', tamper(j, { op: 'flip', seq: mid, byte: 40 }, scratch())],
        fails('modified', mid, 'a byte of a middle entry'),
      ],
      [
        'delete',
        ['verify', '--log', tamper(j, { op: 'delete', seq: cp }, scratch())],
        fails('deleted', cp, 'a checkpoint deleted'),
      ],
      [
        'duplicate',
        ['verify', '--log', tamper(j, { op: 'duplicate', seq: 501 }, scratch())],
        fails('inserted', 501, 'the segment entry duplicated'),
      ],
      [
        'swap',
        ['verify', '--log', tamper(j, { op: 'swap', seq: 1 }, scratch())],
        fails('reordered', 1, 'the first two swapped'),
      ],
      ['cut', ['verify', '--log', cut], fails('unsigned_tail', prevCp + 1, 'the last 5 cut')],
      [
        'cut, allowed',
        ['verify', '--log', cut, '--allow-unsigned-tail'],
        (t, r) => {
          t.equal(r.code, 0, 'an unsigned tail is accepted when allowed');
          t.match(r.stdout, `unsigned tail: ${N - 5 - prevCp}\n`);
        },
      ],
      [
        'cut, expected head',
        ['verify', '--log', cut, '--allow-unsigned-tail', '--expect-head', head],
        fails('behind_expected_head', N - 4, 'the last 5 cut, expected head'),
      ],
      ['cut, head', ['head', '--log', cut], (t, r) => t.equal(r.stdout, `${N - 5}:${j.hashes[N - 6]}\n`)],
      ['torn', ['verify', '--log', torn], fails('torn_last_write', N + 1, 'a torn last write')],
      ['torn, head', ['head', '--log', torn], (t, r) => t.equal(r.stdout, `${head}\n`, 'head skips the torn line')],
      ['re-signed', ['verify', '--log', other.path], (t, r) => t.equal(r.code, 0, 'consistent under its own key')],
      [
        're-signed, pinned',
        ['verify', '--log', other.path, '--pubkey', pubkey],
        fails('wrong_key', 1, 're-signed, pinned'),
      ],
    ];
    const results = await Promise.all(cases.map(([, args]) => cliAsync(env, ['audit', ...args])));
    cases.forEach(([name, , check], i) => t.test(name, async (t) => check(t, results[i] as Result)));
  });

  t.test("the default journal is the config's audit_log (here: made by `postern init`)", async (t) => {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    const r = init(h, ['--json']);
    t.equal(r.code, 0, r.stderr);
    const key = (JSON.parse(r.stdout) as { audit_public_key: string }).audit_public_key;
    const headLine = cli(h, ['audit', 'head']);
    t.equal(headLine.code, 0, headLine.stderr);
    t.match(headLine.stdout, /^1:[0-9a-f]{64}\n$/);
    const [fresh, ok, wrong] = await Promise.all([
      cliAsync(h, ['audit', 'verify']),
      cliAsync(h, [
        'audit',
        'verify',
        '--allow-unsigned-tail',
        '--pubkey',
        key,
        '--expect-head',
        headLine.stdout.trim(),
      ]),
      cliAsync(h, ['audit', 'verify', '--allow-unsigned-tail', '--pubkey', b64(Buffer.alloc(32, 9))]),
    ]);
    // Only the genesis entry: nothing signed yet.
    failsWith(t, fresh, 'unsigned_tail', 1, 'a fresh journal');
    t.equal(ok.code, 0, ok.stdout + ok.stderr);
    t.match(ok.stdout, `journal: ${join(h.home, 'audit.log')} (1 segment file)`);
    failsWith(t, wrong, 'wrong_key', 1, 'the wrong key pinned');
  });
});
