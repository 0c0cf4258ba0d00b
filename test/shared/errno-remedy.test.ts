// The errno words (shared/errno-remedy.ts) as each place says them, for
// every errno the kernel has (and the journal's own ENOTREG): the audit
// journal's refusals (written, opened, created, cut back), the vault's
// write refusal, and the CLI's line for an option file it cannot read or
// write. Each full message is asserted against the words written out here,
// so no place's text moves when the table does. Then the CLI itself, with
// real paths that fail with the errnos its tests elsewhere do not reach.
import t from 'tap';
import os from 'node:os';
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { cannotCreate, cannotOpen, failedClosed, writeFailed } from '../../daemon/audit/refusals';
import { vaultWriteFailed } from '../../daemon/vault/write-failure';
import { ERRNO_REMEDY, errnoWords } from '../../shared/errno-remedy';
import { Refusal } from '../../shared/errors';
import { cli, makeHome } from '../helpers/postern';

// What the operator is told to do about the journal's file.
const JOURNAL: Record<string, string> = {
  ENOSPC: 'free space on the filesystem that holds it',
  EDQUOT: 'raise the disk quota or free space',
  EIO: 'check the disk (kernel log) and the file',
  EROFS: 'remount its filesystem read-write',
  EBADF: 'find out what closed or replaced the file',
  EEXIST: 'move the unexpected file aside',
  ENOTREG: 'replace it with the journal file',
  ELOOP: 'replace the symbolic link with the journal file itself',
  ENOENT: 'check the path (and its directory); restore the journal from a backup if it was removed',
  EACCES: 'give the daemon user access to the file again',
};
const JOURNAL_OTHERWISE = 'fix the file or its filesystem';

// What the operator is told to do about the vault's directory D.
const VAULT: Record<string, (d: string) => string> = {
  ENOSPC: (d) => `free space on the filesystem that holds ${d}`,
  EDQUOT: (d) => `free space or raise the disk quota for ${d}`,
  EACCES: (d) =>
    `fix the permissions of ${d} (the daemon's user must be able to create and rename files in it; \`lsattr -d\` shows an immutable flag)`,
  EPERM: (d) =>
    `fix the permissions of ${d} (the daemon's user must be able to create and rename files in it; \`lsattr -d\` shows an immutable flag)`,
  EROFS: (d) => `remount the filesystem that holds ${d} read-write`,
  EIO: (d) => `check the disk that holds ${d} (kernel log)`,
};

// What the CLI says of a file named by an option.
const READ: Record<string, string> = {
  ENOENT: 'no such file; check the path',
  ENOTDIR: 'a part of the path is not a directory; check the path',
  EISDIR: 'is a directory; name a file',
  EACCES: "permission denied; check the file's permissions",
  EPERM: "permission denied; check the file's permissions",
  ELOOP: 'too many symbolic links; check the path',
  ENAMETOOLONG: 'the path is too long; check it',
};
const WRITE: Record<string, string> = {
  ...READ,
  ENOENT: 'no such directory; check the path',
  EROFS: 'the file system is read-only; name a file elsewhere',
  ENOSPC: 'no space left on the device; free some or name a file elsewhere',
};

const CODES = [...Object.keys(os.constants.errno), 'ENOTREG', 'constructor', 'toString'];

// A name every object inherits is no errno of any table.
function own<V>(map: Record<string, V>, code: string): V | undefined {
  return Object.hasOwn(map, code) ? map[code] : undefined;
}

function failure(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error('what the kernel says, write'), { code, syscall: 'write' });
}

t.test('every errno, as each place says it', async (t) => {
  const first = new Refusal('audit_unavailable', 'x', { errno: 'ENOSPC' });
  for (const code of CODES) {
    const e = failure(code);
    const fix = own(JOURNAL, code) ?? JOURNAL_OTHERWISE;
    const why = `${code}: what the kernel says`;
    t.strictSame(
      writeFailed('/j/audit.log', e).toJSON(),
      {
        code: 'audit_unavailable',
        message: `the audit journal /j/audit.log could not be written (${why}); the action was not performed; ${fix} and restart the daemon`,
        errno: code,
      },
      `journal write, ${code}`,
    );
    t.equal(
      cannotOpen('/j/audit.log', e).message,
      `the audit journal /j/audit.log cannot be opened (${why}); postern records every action before it performs it, so it performs none; ${fix}`,
      `journal open, ${code}`,
    );
    t.equal(
      cannotCreate('/j/audit.log', e).message,
      `the audit journal /j/audit.log could not be created (${why}); ${fix} and run init again`,
      `journal create, ${code}`,
    );
    t.equal(
      failedClosed('/j/audit.log', first, e).message,
      `the audit journal /j/audit.log is unusable: after a failed write (ENOSPC) it could not be cut back to its last complete entry (${why}); the action was not performed; ${fix} and restart the daemon, which repairs the end of the journal`,
      `journal cut back, ${code}`,
    );
    // A directory with "$&" in it: the words are not a replacement pattern.
    const dir = '/home/$&x';
    t.strictSame(
      vaultWriteFailed(`${dir}/vault`, e).toJSON(),
      {
        code: 'bad_environment',
        message: `the vault ${dir}/vault could not be written (${code}: what the kernel says); nothing was changed; ${own(VAULT, code)?.(dir) ?? `fix ${dir} or its filesystem`}, then retry`,
        errno: code,
        path: `${dir}/vault`,
      },
      `vault, ${code}`,
    );
    t.equal(errnoWords(code, 'fileRead'), own(READ, code), `option file read, ${code}`);
    t.equal(errnoWords(code, 'fileWritten'), own(WRITE, code), `option file written, ${code}`);
  }
  t.equal(errnoWords(undefined, 'fileRead'), undefined, 'no code, no words');
  // Every word of the table is one some place says.
  for (const [code, words] of Object.entries(ERRNO_REMEDY)) {
    t.ok(CODES.includes(code), `${code} is checked above`);
    t.strictSame(
      Object.keys(words).sort(),
      [JOURNAL[code] && 'journal', VAULT[code] && 'vaultDir', READ[code] && 'fileRead', WRITE[code] && 'fileWritten']
        .filter(Boolean)
        .sort(),
      `${code}: the places with words for it`,
    );
  }
});

t.test('the CLI, on paths that fail for real', async (t) => {
  const h = makeHome();
  const ro = join(h.dir, 'read-only');
  mkdirSync(ro);
  // A read-only filesystem, mounted for this test (it runs as root).
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,ro', 'tmpfs', ro]);
  t.teardown(() => {
    execFileSync('umount', ['-l', ro]);
    h.cleanup();
  });
  const loop = join(h.dir, 'loop');
  symlinkSync(loop, loop);
  const long = join(h.dir, 'n'.repeat(300));
  const underFile = join(h.file('plain', 'x'), 'below');
  const http = ['request', 'http', '--credential', 'api', '--url', 'https://api.example.test/'];
  const cases: [string[], string][] = [
    [['-o', join(ro, 'out')], 'the file system is read-only; name a file elsewhere'],
    [['-o', long], 'the path is too long; check it'],
    [['-o', loop], 'too many symbolic links; check the path'],
    [['-o', underFile], 'a part of the path is not a directory; check the path'],
    [['--data-file', long], 'the path is too long; check it'],
  ];
  for (const [[option, file], why] of cases) {
    const r = cli(h, [...http, option!, file!]);
    t.equal(r.code, 2, `${option} ${file}: exit 2`);
    t.equal(r.stdout, '');
    t.equal(r.stderr, `postern: ${option} ${JSON.stringify(file)}: ${why}\n`, `${option}: ${why}`);
  }
});
