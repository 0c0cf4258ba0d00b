// Where docs/audit-format.md and the verifier once disagreed, each case with
// the exact verdict, entry and report, through the library and through the
// real CLI (`postern audit verify --json`, exit status and stderr): a
// genesis entry with a wrong seq or prev, a segment file holding an earlier
// segment, a broken checkpoint followed by a deleted entry, a key entry
// whose key_id is not its seq, a journal or segment that is a symbolic link,
// the entries and head of a failed report, and daemon.audit_segment_size.
import t, { Test } from 'tap';
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GENESIS_PREV, encodeEntry, segmentPath } from '../../shared/audit-format';
import { ProblemKind, verifyJournal } from '../../shared/audit-verify';
import { SETTINGS } from '../../shared/config';
import { ed25519Keypair } from '../../shared/crypto';
import { ROOT, cleanEnv, cli } from '../helpers/postern';
import { b64, buildJournal, fieldOffset, rechainFrom, resign, tamper } from '../helpers/journal-fixture';

const root = mkdtempSync(join(tmpdir(), 'pt-audit-format-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const scratch = (): string => join(root, `c${++counter}`);
const env = { env: cleanEnv() };

interface Expected {
  kind: ProblemKind;
  seq: number | null;
  entries: number; // the entries that passed
  head: { seq: number; hash: string } | null; // the last of them
  message?: RegExp;
}

// The same verdict and report from the library and from the CLI.
async function verdict(t: Test, path: string, want: Expected, what: string): Promise<void> {
  const r = await verifyJournal(path);
  t.equal(r.ok, false, `${what}: fails`);
  t.equal(r.problem?.kind, want.kind, `${what}: ${want.kind} (${r.problem?.message})`);
  t.equal(r.problem?.seq, want.seq, `${what}: at entry ${want.seq}`);
  t.equal(r.entries, want.entries, `${what}: ${want.entries} entries passed`);
  t.same(r.head, want.head, `${what}: the head is the last entry that passed`);
  if (want.message) t.match(r.problem?.message, want.message, `${what}: the message`);
  const c = cli(env, ['audit', 'verify', '--log', path, '--json']);
  t.equal(c.code, 1, `${what}: CLI exit 1`);
  t.equal(
    c.stderr,
    `postern: audit verification failed: ${want.kind}${want.seq === null ? '' : ` at entry ${want.seq}`}\n`,
    `${what}: CLI stderr`,
  );
  const report = JSON.parse(c.stdout) as {
    ok: boolean;
    entries: number;
    head: unknown;
    problem: { kind: string; seq: number | null };
  };
  t.match(
    report,
    { ok: false, entries: want.entries, problem: { kind: want.kind, seq: want.seq } },
    `${what}: CLI report`,
  );
  t.same(report.head, want.head, `${what}: CLI head`);
}

t.test('the cases where the format document and the verifier disagreed', async (t) => {
  // audit.log 1-100, .1 101-200, .2 201-300.
  const j = await buildJournal(join(root, 'base'), 300, { segmentEvery: 100 });
  const lines = j.files.flat();
  const at = (seq: number): { seq: number; hash: string } => ({ seq, hash: j.hashes[seq - 1] as string });
  const entry = (seq: number): Record<string, unknown> =>
    JSON.parse((lines[seq - 1] as Buffer).toString()) as Record<string, unknown>;
  t.same([j.types[100], j.types[101], j.types[200]], ['segment', 'key', 'segment']);
  const cp = j.checkpoints.find((s) => s > 101 && s < 190) as number; // a checkpoint inside segment 1
  t.same([j.types[cp - 1], j.types[cp]], ['checkpoint', 'event']);

  t.test('1. a genesis entry with a wrong seq or prev is the genesis entry, modified', async (t) => {
    const g = entry(1);
    const body = {
      type: 'genesis' as const,
      journal_id: g['journal_id'] as string,
      sign_pub: g['sign_pub'] as string,
      box_pub: g['box_pub'] as string,
    };
    const seq7 = tamper(
      j,
      { op: 'replace', seq: 1, line: encodeEntry(7, GENESIS_PREV, g['time'] as string, body) },
      scratch(),
    );
    await verdict(
      t,
      seq7,
      { kind: 'modified', seq: 1, entries: 0, head: null, message: /^the genesis entry was changed: it has seq 7/ },
      'genesis with seq 7',
    );
    const badPrev = tamper(
      j,
      { op: 'replace', seq: 1, line: encodeEntry(1, j.hashes[5] as string, g['time'] as string, body) },
      scratch(),
    );
    await verdict(
      t,
      badPrev,
      { kind: 'modified', seq: 1, entries: 0, head: null },
      'genesis with a prev that is not 64 zeros',
    );
    const alone = scratch();
    writeFileSync(alone, Buffer.concat([encodeEntry(2, GENESIS_PREV, g['time'] as string, body), Buffer.from('\n')]));
    await verdict(
      t,
      alone,
      { kind: 'modified', seq: 1, entries: 0, head: null },
      'a journal of one genesis entry with seq 2',
    );
    // Before the real genesis entry, such a line is extra.
    const before = tamper(
      j,
      { op: 'insert', before: 1, line: encodeEntry(1, j.hashes[5] as string, g['time'] as string, body) },
      scratch(),
    );
    await verdict(
      t,
      before,
      { kind: 'inserted', seq: 1, entries: 0, head: null },
      'a forged genesis entry before the real one',
    );
  });

  t.test('2. a segment file that begins with an earlier segment is a missing segment', async (t) => {
    const copy2 = tamper(j, { op: 'cut', count: 0 }, scratch());
    copyFileSync(segmentPath(copy2, 1), segmentPath(copy2, 2));
    await verdict(
      t,
      copy2,
      {
        kind: 'missing_segment',
        seq: 201,
        entries: 200,
        head: at(200),
        message: /^audit\.log\.2 begins segment 1 \(entry 101\), not segment 2/,
      },
      'segment 1 copied over segment 2',
    );
    const copy1 = tamper(j, { op: 'cut', count: 0 }, scratch());
    copyFileSync(copy1, segmentPath(copy1, 1));
    await verdict(
      t,
      copy1,
      {
        kind: 'missing_segment',
        seq: 101,
        entries: 100,
        head: at(100),
        message: /^audit\.log\.1 begins segment 0 \(entry 1\), not segment 1/,
      },
      'segment 0 copied over segment 1',
    );
  });

  t.test('3. a broken checkpoint is modified unless the next line confirms its bytes', async (t) => {
    // Checkpoint cp signed by another key but naming the journal's, and the chain redone after it.
    const forged = resign(j, scratch(), { key: ed25519Keypair(), only: cp, claim: 'original' });
    const alone = forged.path;
    await verdict(
      t,
      alone,
      { kind: 'bad_signature', seq: cp, entries: cp - 1, head: at(cp - 1) },
      'a forged checkpoint, the chain intact after it',
    );
    const deletedAfter = tamper(forged, { op: 'delete', seq: cp + 1 }, scratch());
    await verdict(
      t,
      deletedAfter,
      {
        kind: 'modified',
        seq: cp,
        entries: cp - 1,
        head: at(cp - 1),
        message: new RegExp(
          `^entry ${cp} \\(audit\\.log\\.1 line ${cp - 100}\\) was changed: checkpoint ${cp}'s signature does not verify`,
        ),
      },
      'a forged checkpoint, then the entry after it deleted',
    );
    // A line put in after it, with the chain going on from the checkpoint: its bytes are confirmed.
    const insertedAfter = tamper(forged, { op: 'insert', before: cp + 1, line: Buffer.from('hello') }, scratch());
    await verdict(
      t,
      insertedAfter,
      { kind: 'bad_signature', seq: cp, entries: cp - 1, head: at(cp - 1) },
      'a forged checkpoint, then an extra line',
    );
  });

  t.test("4. a key entry's key_id must be its own seq", async (t) => {
    const k = entry(102);
    const wrongId = rechainFrom(
      j,
      102,
      encodeEntry(102, k['prev'] as string, k['time'] as string, {
        type: 'key',
        key_id: 2,
        sealed: k['sealed'] as string,
      }),
      scratch(),
    );
    await verdict(
      t,
      wrongId,
      {
        kind: 'modified',
        seq: 102,
        entries: 101,
        head: at(101),
        message: /^key entry 102 \(audit\.log\.1 line 2\) has key_id 2: a key entry's key_id is its own seq/,
      },
      'a key entry naming key 2, the chain redone',
    );
  });

  t.test('5. a symbolic link is refused, never followed', async (t) => {
    const linked = tamper(j, { op: 'cut', count: 0 }, scratch());
    renameSync(linked, `${linked}.real`);
    symlinkSync(`${linked}.real`, linked);
    await verdict(
      t,
      linked,
      {
        kind: 'not_a_journal',
        seq: null,
        entries: 0,
        head: null,
        message: /audit\.log cannot be read \(a symbolic link, never followed\)/,
      },
      'segment 0 a link to the real file',
    );
    const head = cli(env, ['audit', 'head', '--log', linked]);
    t.equal(head.code, 1, 'audit head refuses it too');
    t.equal(
      head.stderr,
      `postern: ${linked} cannot be read (a symbolic link, never followed); give the journal file (segment 0, or its directory) with --log\n`,
    );
    const seg1 = tamper(j, { op: 'cut', count: 0 }, scratch());
    renameSync(segmentPath(seg1, 1), `${seg1}.moved`);
    symlinkSync(`${seg1}.moved`, segmentPath(seg1, 1));
    await verdict(
      t,
      seg1,
      {
        kind: 'missing_segment',
        seq: 101,
        entries: 100,
        head: at(100),
        message: /segment 1 \(\S+audit\.log\.1\) cannot be read \(a symbolic link, never followed\)/,
      },
      'segment 1 a link',
    );
    const lastLinked = tamper(j, { op: 'cut', count: 0 }, scratch());
    renameSync(segmentPath(lastLinked, 2), `${lastLinked}.moved`);
    symlinkSync(`${lastLinked}.moved`, segmentPath(lastLinked, 2));
    const h = cli(env, ['audit', 'head', '--log', lastLinked]);
    t.equal(h.code, 1, 'audit head does not read a linked last segment');
    t.match(h.stderr, /^postern: \S+audit\.log\.2 cannot be read \(a symbolic link, never followed\); [^\n]+\n$/);
  });

  t.test('6. a failed report counts only the entries that passed', async (t) => {
    const ev = j.types.findIndex((type, i) => type === 'event' && i > 140) + 1; // an event in segment 1
    const changed = tamper(
      j,
      { op: 'change', seq: ev, byte: fieldOffset(lines[ev - 1] as Buffer, 'ct') + 3 },
      scratch(),
    );
    await verdict(
      t,
      changed,
      { kind: 'modified', seq: ev, entries: ev - 1, head: at(ev - 1) },
      'an event changed in place',
    );
    // A change of signing key no checkpoint vouches for: the signer entry did not pass.
    const e = entry(ev);
    const signer = rechainFrom(
      j,
      ev,
      encodeEntry(ev, e['prev'] as string, e['time'] as string, {
        type: 'signer',
        sign_pub: b64(ed25519Keypair().publicKey),
      }),
      scratch(),
    );
    t.equal(j.types[ev], 'event', 'an event follows it');
    await verdict(
      t,
      signer,
      { kind: 'unsigned_rotation', seq: ev, entries: ev - 1, head: at(ev - 1) },
      'a signer entry followed by an event',
    );
    const r = await verifyJournal(signer);
    t.same(
      r.signingKeys,
      [{ key: b64(j.keys.sign.publicKey), since: 1 }],
      'the unvouched key is not reported as taking over',
    );
    const before = j.checkpoints.filter((s) => s < ev);
    const lastCp = before[before.length - 1] as number;
    t.match(
      r,
      { checkpoints: before.length, signedThrough: lastCp - 1, unsignedTail: ev - 1 - lastCp },
      `checkpoints, signed-through and tail as of entry ${ev - 1}`,
    );
  });
});

t.test(
  '7. daemon.audit_segment_size: a size with a unit; its default, minimum and maximum are the documented ones',
  async (t) => {
    const doc = readFileSync(join(ROOT, 'docs', 'audit-format.md'), 'utf8').replace(/\s+/g, ' ');
    const m =
      /`daemon\.audit_segment_size` \(a size: [^)]*?default `"(\w+)"`, at least `"(\w+)"`, at most `"(\w+)"`\)/.exec(
        doc,
      );
    t.ok(m, 'the document states the default, the minimum and the maximum');
    const [, def = '', min = '', max = ''] = m ?? [];
    t.equal(SETTINGS.find((s) => s.path === 'daemon.audit_segment_size')?.default, def, `the default is ${def}`);
    const home = mkdtempSync(join(root, 'home-'));
    const withSize = (value: string): { code: number | null; stderr: string } => {
      const config = join(home, 'config.toml');
      writeFileSync(config, `[daemon]\naudit_segment_size = ${value}\n`);
      // audit head reads the config for the journal's path, then finds no journal there.
      return cli({ env: cleanEnv({ POSTERN_HOME: home }) }, ['audit', 'head', '--config', config]);
    };
    const accepted = /^postern: \S+audit\.log does not exist; [^\n]+\n$/;
    // One line, the problem said once (SPEC §5).
    const refused = (why: string): RegExp =>
      new RegExp(
        `^postern: \\S+config\\.toml: a problem in the config: daemon\\.audit_segment_size: ${why}[^\\n]*\\n$`,
      );
    const bytes = (text: string): number =>
      Number(/^\d+/.exec(text)?.[0]) *
      ({ KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 } as Record<string, number>)[text.replace(/^\d+/, '')]!;
    for (const ok of [def, min, max, `${bytes(min)}B`])
      t.match(withSize(`"${ok}"`).stderr, accepted, `"${ok}" is accepted`);
    const below = `${bytes(min) - 1}B`;
    t.match(
      withSize(`"${below}"`).stderr,
      refused(`"${below}": must be at least ${min} \\(one longest journal line\\)`),
      `"${below}" is refused, naming the setting and the minimum`,
    );
    const above = `${bytes(max) + 1}B`;
    t.match(withSize(`"${above}"`).stderr, refused(`"${above}": must be at most ${max}`), `"${above}" is refused`);
    t.match(
      withSize(String(bytes(def))).stderr,
      refused('must be a size string such as "8MiB"'),
      'a number without a unit is refused',
    );
  },
);
