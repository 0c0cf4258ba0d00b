// The journal's size and growth over the last hour in `postern status`, and
// `postern doctor` warning when the journal's filesystem is nearly full
// (SPEC §9): the reading of a journal's files with entries of several ages
// and segments, a real daemon's status, and doctor on a small tmpfs.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { journalUsage, MIN_FREE_BYTES, MIN_FREE_FRACTION } from '../../cli/commands/journal-usage';
import { cli, init, makeHome, startDaemon } from '../helpers/postern';

const line = (time: number, pad: number): string =>
  `{"v":1,"seq":1,"prev":"00","time":"${new Date(time).toISOString()}","type":"event","x":"${'a'.repeat(pad)}"}\n`;

t.test('growth over the last hour: the bytes of the lines written within it, across segments', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pt-ju-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const now = Date.parse('2026-12-01T12:00:00.000Z');
  const path = join(dir, 'audit.log');
  const old = [line(now - 3 * 3600_000, 10), line(now - 2 * 3600_000, 100_000), line(now - 3601_000, 70_000)];
  const recent = [line(now - 3599_000, 90_000), line(now - 60_000, 50)];
  const newest = [line(now - 1000, 200_000), line(now - 10, 5)];
  // Segment 0 holds the old lines and one recent one; segment 1 the newest.
  writeFileSync(path, old.join('') + recent.join(''));
  writeFileSync(`${path}.1`, newest.join(''));
  const u = journalUsage(path, now);
  const bytes = [...old, ...recent, ...newest].reduce((n, l) => n + l.length, 0);
  t.same(u, {
    bytes,
    segments: 2,
    last_hour_bytes: [...recent, ...newest].reduce((n, l) => n + l.length, 0),
    younger_than_an_hour: false,
  });

  // All of it recent.
  writeFileSync(path, recent.join(''));
  t.same(journalUsage(path, now), {
    bytes: bytes - old.join('').length,
    segments: 2,
    last_hour_bytes: bytes - old.join('').length,
    younger_than_an_hour: true,
  });

  // Only old lines in segment 1, and a torn last line.
  writeFileSync(path, old.join(''));
  writeFileSync(`${path}.1`, old.join('') + '{"v":1,"seq":9,"ti');
  t.same(journalUsage(path, now), {
    bytes: 2 * old.join('').length + 18,
    segments: 2,
    last_hour_bytes: 18,
    younger_than_an_hour: false,
  });
});

t.test('postern status shows the journal size and its growth', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  // The journal may grow while status runs (a checkpoint after the unlock):
  // its size is read before and after, and status's figure lies between.
  const files = (): string[] => readdirSync(h.home).filter((f) => /^audit\.log(\.\d+)?$/.test(f));
  const size = (): number => files().reduce((n, f) => n + statSync(join(h.home, f)).size, 0);
  const before = size();
  const r = cli(h, ['status', '--json']);
  const after = size();
  t.equal(r.code, 0, r.stderr);
  const s = JSON.parse(r.stdout) as { journal: { bytes: number } & Record<string, unknown> };
  t.ok(s.journal.bytes >= before && s.journal.bytes <= after, `${before} ≤ ${s.journal.bytes} ≤ ${after}`);
  t.same(s.journal, {
    path: join(h.home, 'audit.log'),
    bytes: s.journal.bytes,
    segments: files().length,
    last_hour_bytes: s.journal.bytes,
    younger_than_an_hour: true,
  });
  const text = cli(h, ['status']);
  t.match(
    text.stdout,
    /^journal: {6}\d+\.\d (KiB|MiB) in 1 segment file, \+\d+\.\d (KiB|MiB) in the last hour \(all of it: the journal is younger than an hour\)$/m,
  );
});

t.test('doctor: the journal filesystem, ok with room, a warning when nearly full', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  interface Finding {
    level: string;
    what: string;
    fix?: string;
  }
  const findings = (): { result: string; findings: Finding[] } =>
    JSON.parse(cli(h, ['doctor', '--json']).stdout) as { result: string; findings: Finding[] };
  const here = statfsSync(h.home);
  const roomy = here.bavail * here.bsize >= MIN_FREE_BYTES && here.bavail >= here.blocks * MIN_FREE_FRACTION;
  const f = findings().findings.find((x) => x.what.startsWith('journal filesystem'));
  t.equal(f?.level, roomy ? 'ok' : 'warn', String(f?.what));
  t.match(f?.what, /free of/);

  // The journal on a 2 MiB tmpfs: nearly full by the 1 GiB bound.
  const mnt = mkdtempSync(join(tmpdir(), 'pt-small-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'tmpfs', mnt]);
  t.teardown(() => {
    execFileSync('umount', ['-l', mnt]);
    rmSync(mnt, { recursive: true, force: true });
  });
  const cfg = join(h.home, 'config.toml');
  writeFileSync(cfg, `[daemon]\naudit_log = "${join(mnt, 'audit.log')}"\n`, { mode: 0o600 });
  const r = findings();
  const warn = r.findings.find((x) => x.what.startsWith('journal filesystem'));
  t.equal(warn?.level, 'warn');
  t.match(
    warn?.what,
    new RegExp(
      `^journal filesystem \\(${mnt}\\): \\d+\\.\\d (KiB|MiB) free of 2\\.0 MiB, nearly full \\(less than 1\\.0 GiB or 5 %\\)$`,
    ),
  );
  t.match(warn?.fix, /free space there, or move daemon\.audit_log to a larger filesystem/);
});
