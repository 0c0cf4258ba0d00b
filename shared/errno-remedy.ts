// What a failed file operation's errno means to the person who must act,
// one row per errno, in the words of each place that reports one: the audit
// journal (the operator fixes the daemon's file: what to do), the vault's
// directory (the same, `{dir}` standing for the directory), and a file
// named on the command line, to read or to write (what went wrong, then
// what to do). Each place frames the words in its own message and has its
// own words for an errno it has none for here.

export interface ErrnoWords {
  journal?: string;
  vaultDir?: string;
  fileRead?: string;
  fileWritten?: string;
}

const VAULT_DIR_PERMISSIONS =
  "fix the permissions of {dir} (the daemon's user must be able to create and rename files in it; `lsattr -d` shows an immutable flag)";
const PERMISSION_DENIED = "permission denied; check the file's permissions";

export const ERRNO_REMEDY: Readonly<Record<string, ErrnoWords>> = {
  ENOSPC: {
    journal: 'free space on the filesystem that holds it',
    vaultDir: 'free space on the filesystem that holds {dir}',
    fileWritten: 'no space left on the device; free some or name a file elsewhere',
  },
  EDQUOT: {
    journal: 'raise the disk quota or free space',
    vaultDir: 'free space or raise the disk quota for {dir}',
  },
  EROFS: {
    journal: 'remount its filesystem read-write',
    vaultDir: 'remount the filesystem that holds {dir} read-write',
    fileWritten: 'the file system is read-only; name a file elsewhere',
  },
  EIO: {
    journal: 'check the disk (kernel log) and the file',
    vaultDir: 'check the disk that holds {dir} (kernel log)',
  },
  EACCES: {
    journal: 'give the daemon user access to the file again',
    vaultDir: VAULT_DIR_PERMISSIONS,
    fileRead: PERMISSION_DENIED,
    fileWritten: PERMISSION_DENIED,
  },
  EPERM: {
    vaultDir: VAULT_DIR_PERMISSIONS,
    fileRead: PERMISSION_DENIED,
    fileWritten: PERMISSION_DENIED,
  },
  ENOENT: {
    journal: 'check the path (and its directory); restore the journal from a backup if it was removed',
    fileRead: 'no such file; check the path',
    fileWritten: 'no such directory; check the path',
  },
  ENOTDIR: {
    fileRead: 'a part of the path is not a directory; check the path',
    fileWritten: 'a part of the path is not a directory; check the path',
  },
  EISDIR: {
    fileRead: 'is a directory; name a file',
    fileWritten: 'is a directory; name a file',
  },
  ELOOP: {
    journal: 'replace the symbolic link with the journal file itself',
    fileRead: 'too many symbolic links; check the path',
    fileWritten: 'too many symbolic links; check the path',
  },
  ENAMETOOLONG: {
    fileRead: 'the path is too long; check it',
    fileWritten: 'the path is too long; check it',
  },
  EBADF: { journal: 'find out what closed or replaced the file' },
  EEXIST: { journal: 'move the unexpected file aside' },
  // Not an errno of the kernel's: the journal's own word for a path that is
  // not a regular file.
  ENOTREG: { journal: 'replace it with the journal file' },
};

// The words `place` has for `code`, or undefined (an unknown errno, or one
// this place has no words for).
export function errnoWords(code: unknown, place: keyof ErrnoWords): string | undefined {
  if (typeof code !== 'string' || !Object.hasOwn(ERRNO_REMEDY, code)) return undefined;
  return ERRNO_REMEDY[code]?.[place];
}
