// `postern audit show` through the real CLI: a journal the daemon wrote is
// listed in full (text and JSON) and from --since on; the listing stops
// quietly when its reader goes away (a real pipe closed after the first
// line, and `| head`), and fails in one line on any other write error;
// --log must name a regular file (a directory stands for its audit.log), so
// a directory, a FIFO or a missing file is one line and exit 1, without
// hanging and before the passphrase is asked; a 100 MiB line is reported as
// not an entry within bounded memory and time; a bad --since is a usage
// error.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Journal } from '../../daemon/audit/journal';
import { segmentPath } from '../../shared/audit-format';
import { CLI, Result, cli, init, makeHome, startDaemon } from '../helpers/postern';

const h = makeHome();
t.teardown(() => h.cleanup());
const root = mkdtempSync(join(tmpdir(), 'pt-audit-show-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const pass = ['--passphrase-file', h.passFile];
const show = (...args: string[]): Result => cli(h, ['audit', 'show', ...args]);
const lineCount = (file: string): number => readFileSync(file).toString('latin1').split('\n').length - 1;
const NOT_REGULAR = (file: string): string =>
  `postern: ${file} cannot be read (not a regular file); give the journal file (segment 0, or its directory) with --log\n`;

// The JSON lines of a listing.
function parsed(r: Result): Array<Record<string, unknown>> {
  return r.stdout
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

// Runs the CLI under GNU time for its peak RSS.
function measured(args: string[]): { result: Result; maxRssKiB: number; seconds: number } {
  const rssFile = join(root, `rss-${Math.random().toString(36).slice(2)}`);
  const started = process.hrtime.bigint();
  const r = spawnSync(
    '/usr/bin/time',
    ['-f', '%M', '-o', rssFile, '/usr/bin/env', '-u', 'NODE_OPTIONS', process.execPath, CLI, ...args],
    { env: h.env, encoding: 'utf8', timeout: 60_000 },
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const maxRssKiB = Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop());
  return { result: { code: r.status, stdout: r.stdout, stderr: r.stderr }, maxRssKiB, seconds };
}

t.test('audit show', async (t) => {
  t.equal(init(h).code, 0);
  const journal = join(h.home, 'audit.log');
  // A daemon run writes real events: start, unlock, lock, stop.
  const d = await startDaemon(h);
  t.equal(cli(h, ['unlock', ...pass]).code, 0);
  t.equal(cli(h, ['lock']).code, 0);
  t.equal(await d.stop(), 0);
  const n = lineCount(journal);
  t.ok(n >= 8, `${n} entries`);

  t.test('the whole journal, and from --since on', async (t) => {
    const all = show('--json', ...pass);
    t.equal(all.code, 0, all.stderr);
    t.equal(all.stderr, '');
    const entries = parsed(all);
    t.same(
      entries.map((e) => e['seq']),
      Array.from({ length: n }, (_, i) => i + 1),
      'every entry, in order',
    );
    t.equal(entries[0]?.['type'], 'genesis');
    const kinds = entries.filter((e) => e['type'] === 'event').map((e) => e['kind']);
    for (const k of ['daemon_start', 'unlock', 'lock', 'daemon_stop'])
      t.ok(kinds.includes(k), `the ${k} event is decrypted`);
    t.notOk(
      entries.some((e) => e['undecryptable'] === true || e['undecodable'] === true),
      'every entry read',
    );

    const text = show(...pass);
    t.equal(text.code, 0, text.stderr);
    const lines = text.stdout.split('\n').filter((l) => l.length > 0);
    t.equal(lines.length, n);
    lines.forEach((l, i) =>
      t.match(l, new RegExp(`^ {0,5}${i + 1} \\d{4}-\\d\\d-\\d\\dT[0-9:.]+Z \\S+ \\{`), `text line ${i + 1}`),
    );

    const from3 = show('--json', '--since', '3', ...pass);
    t.equal(from3.code, 0, from3.stderr);
    t.same(
      parsed(from3).map((e) => e['seq']),
      Array.from({ length: n - 2 }, (_, i) => i + 3),
      '--since 3 starts at entry 3',
    );
    t.same(parsed(from3), entries.slice(2), 'the same entries as the full listing');
    const beyond = show('--since', String(n + 1), ...pass);
    t.equal(beyond.code, 0);
    t.equal(beyond.stdout, '', 'nothing after the last entry');

    // A directory stands for the journal in it.
    const viaDir = show('--json', '--log', h.home, ...pass);
    t.equal(viaDir.code, 0, viaDir.stderr);
    t.equal(viaDir.stdout, all.stdout);
  });

  t.test('--since must be an entry number: usage error, exit 2', async (t) => {
    for (const bad of ['abc', '0', '-1', '1.5', '0x2', '', '02', '9007199254740993']) {
      const r = show(`--since=${bad}`, ...pass);
      t.equal(r.code, 2, `--since=${JSON.stringify(bad)}: exit 2`);
      t.equal(r.stdout, '');
      t.equal(
        r.stderr,
        `postern: --since must be an entry number (1 or more, decimal digits), not ${JSON.stringify(bad)}\n`,
      );
    }
  });

  t.test('lines that are not entries are shown as such, and the listing goes on', async (t) => {
    const dir = join(root, 'damaged');
    mkdirSync(dir);
    const copy = join(dir, 'audit.log');
    copyFileSync(journal, copy);
    appendFileSync(copy, 'not json\n{"v":1,"seq":');
    const r = show('--json', '--log', copy, ...pass);
    t.equal(r.code, 0, r.stderr);
    const entries = parsed(r);
    t.equal(entries.length, n + 2);
    const garbage = entries[n] as Record<string, unknown>;
    t.same(Object.keys(garbage), ['undecodable', 'file', 'line', 'why']);
    t.match(garbage, { undecodable: true, file: 'audit.log', line: n + 1, why: /\S/ }, 'where, and why');
    t.same(entries[n + 1], {
      undecodable: true,
      file: 'audit.log',
      line: n + 2,
      why: 'an incomplete last line (a write cut short)',
    });
  });

  // A journal of thousands of entries over several segments, written by
  // the daemon's writer on a copy of this home's journal (so the vault's
  // box key reads it): far more output than a pipe holds.
  const bigDir = join(root, 'big');
  mkdirSync(bigDir);
  const big = join(bigDir, 'audit.log');
  const EVENTS = 4000;
  copyFileSync(journal, big);
  const w = await Journal.open({ path: big, segmentSize: 256 * 1024 });
  for (let i = 0; i < EVENTS; i += 100)
    await Promise.all(
      Array.from({ length: 100 }, (_, k) => w.append({ kind: 'http_intent', credential: 'github', n: i + k })),
    );
  await w.close();
  let bigEntries = 0;
  let bigBytes = 0;
  for (let k = 0; statSync(segmentPath(big, k), { throwIfNoEntry: false }); k++) {
    bigEntries += lineCount(segmentPath(big, k));
    bigBytes += statSync(segmentPath(big, k)).size;
  }

  t.test('a journal over several segments is listed in full', async (t) => {
    t.ok(statSync(segmentPath(big, 3), { throwIfNoEntry: false }), 'at least four segments');
    const r = show('--json', '--log', big, ...pass);
    t.equal(r.code, 0, r.stderr);
    const entries = parsed(r);
    t.equal(entries.length, bigEntries);
    t.ok(
      entries.every((e, i) => e['seq'] === i + 1),
      'in order across segments',
    );
    t.equal(entries.filter((e) => e['kind'] === 'http_intent').length, EVENTS, 'every event decrypted');
  });

  t.test('the reader goes away: exit 0, nothing on stderr', async (t) => {
    t.ok(bigBytes > 1024 * 1024, `${bigBytes} bytes of journal: far more than a pipe holds`);
    const p = spawn(
      '/usr/bin/env',
      ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'audit', 'show', '--log', big, ...pass],
      { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let first = '';
    let stderr = '';
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    p.stdout.on('data', (b: Buffer) => {
      first += b.toString();
      if (first.includes('\n')) p.stdout.destroy();
    });
    const killer = setTimeout(() => p.kill('SIGKILL'), 30_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      p.on('close', (c, s) => r([c, s])),
    );
    clearTimeout(killer);
    t.match(first, /^ {5}1 \S+ genesis /, 'the first line was read');
    t.equal(signal, null, 'not killed');
    t.equal(code, 0, 'exit 0');
    t.equal(stderr, '', 'no error, no stack trace');

    const sh = spawnSync(
      '/bin/bash',
      [
        '-c',
        `set -o pipefail; /usr/bin/env -u NODE_OPTIONS "${process.execPath}" "${CLI}" audit show --log "${big}" --passphrase-file "${h.passFile}" | head -2`,
      ],
      { env: h.env, encoding: 'utf8', timeout: 30_000 },
    );
    t.equal(sh.status, 0, `| head -2: exit 0 (${sh.stderr})`);
    t.equal(sh.stderr, '');
    t.equal(sh.stdout.split('\n').length, 3, 'two lines');

    // Any other write error is a failure, in one line.
    const full = openSync('/dev/full', 'w');
    try {
      const r = spawnSync(
        '/usr/bin/env',
        ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'audit', 'show', '--log', big, ...pass],
        { env: h.env, encoding: 'utf8', stdio: ['ignore', full, 'pipe'], timeout: 30_000 },
      );
      t.equal(r.status, 1, 'stdout on a full disk: exit 1');
      t.equal(r.stderr, 'postern: cannot write the listing to stdout (ENOSPC); check where the output goes\n');
    } finally {
      closeSync(full);
    }
  });

  t.test('--log must be a regular file: one line, exit 1, no passphrase asked', async (t) => {
    const empty = join(root, 'emptydir');
    mkdirSync(empty);
    let r = show('--log', empty);
    t.equal(r.code, 1);
    t.equal(
      r.stderr,
      `postern: ${join(empty, 'audit.log')} does not exist; give the journal file (segment 0, or its directory) with --log\n`,
    );
    t.equal(r.stdout, '');

    const nested = join(root, 'nested');
    mkdirSync(join(nested, 'audit.log'), { recursive: true });
    r = show('--log', nested);
    t.equal(r.code, 1);
    t.equal(r.stderr, NOT_REGULAR(join(nested, 'audit.log')), 'a directory named audit.log');

    const fifo = join(root, 'fifo');
    t.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const started = Date.now();
    const f = spawnSync('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'audit', 'show', '--log', fifo], {
      env: h.env,
      encoding: 'utf8',
      timeout: 15_000,
    });
    t.equal(f.error, undefined, 'did not hang');
    t.equal(f.status, 1);
    t.equal(f.stderr, NOT_REGULAR(fifo));
    t.ok(Date.now() - started < 15_000);

    // A FIFO in place of a later segment: the entries before it are shown, then one line and exit 1.
    const withFifo = join(root, 'withfifo');
    mkdirSync(withFifo);
    const seg0 = join(withFifo, 'audit.log');
    copyFileSync(segmentPath(big, 0), seg0);
    copyFileSync(segmentPath(big, 2), segmentPath(seg0, 2));
    t.equal(spawnSync('mkfifo', [segmentPath(seg0, 1)]).status, 0);
    const g = spawnSync(
      '/usr/bin/env',
      ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'audit', 'show', '--log', seg0, ...pass],
      { env: h.env, encoding: 'utf8', timeout: 15_000 },
    );
    t.equal(g.error, undefined, 'did not hang');
    t.equal(g.status, 1);
    const listed = g.stdout.split('\n').filter((l) => l);
    t.equal(listed.length, lineCount(seg0), 'segment 0 listed');
    t.match(listed[listed.length - 1], new RegExp(`^ *${lineCount(seg0)} `), 'up to its last entry');
    t.equal(
      g.stderr,
      `postern: segment 1 (${segmentPath(seg0, 1)}) cannot be read (not a regular file), so the entries from there on cannot be read; run \`postern audit verify\` to see what is damaged\n`,
    );
    // The same through a pipe whose reader starts late: the listing fills
    // the pipe and waits in the process, and the failure's exit must not
    // drop what waits (it lost the last entries under load).
    const slow = spawnSync(
      '/bin/sh',
      [
        '-c',
        '/usr/bin/env -u NODE_OPTIONS "$0" "$1" audit show --log "$2" --passphrase-file "$3" | (sleep 1; cat)',
        process.execPath,
        CLI,
        seg0,
        h.passFile,
      ],
      { env: h.env, encoding: 'utf8', timeout: 15_000, maxBuffer: 64 * 1024 * 1024 },
    );
    t.equal(slow.error, undefined, 'did not hang');
    t.equal(slow.stdout.split('\n').filter((l) => l).length, lineCount(seg0), 'every entry of segment 0, read late');

    r = show('--log', join(root, 'missing'));
    t.equal(r.code, 1);
    t.equal(
      r.stderr,
      `postern: ${join(root, 'missing')} does not exist; give the journal file (segment 0, or its directory) with --log\n`,
    );
  });

  t.test('a 100 MiB line: reported as not an entry, bounded memory and time', async (t) => {
    // The same listing without the long line: what the vault's KDF and the runtime take anyway.
    const base = measured(['audit', 'show', '--log', journal, ...pass]);
    t.equal(base.result.code, 0, base.result.stderr);
    for (const [what, end] of [
      ['followed by its "\\n"', '\n'],
      ['at the end, without "\\n"', ''],
    ] as const) {
      const dir = join(root, `long${end.length}`);
      mkdirSync(dir);
      const copy = join(dir, 'audit.log');
      copyFileSync(journal, copy);
      truncateSync(copy, statSync(copy).size + 100 * 1024 * 1024);
      if (end) appendFileSync(copy, end);
      const m = measured(['audit', 'show', '--log', copy, ...pass]);
      t.equal(m.result.code, 0, `${what}: exit 0 (${m.result.stderr})`);
      const lines = m.result.stdout.split('\n').filter((l) => l.length > 0);
      t.equal(lines.length, n + 1, `${what}: every entry and the long line`);
      t.equal(lines[n], `?      (audit.log line ${n + 1} is not an entry: the line is longer than 65536 bytes)`, what);
      t.ok(
        m.maxRssKiB > 0 && m.maxRssKiB < base.maxRssKiB + 32 * 1024,
        `${what}: max RSS ${Math.round(m.maxRssKiB / 1024)} MiB, within 32 MiB of the ${Math.round(base.maxRssKiB / 1024)} MiB without it`,
      );
      t.ok(m.seconds < 20, `${what}: ${m.seconds.toFixed(2)} s`);
    }
  });
});
