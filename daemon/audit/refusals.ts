// The journal's user-facing errors: what happened, that the action was not
// performed, and what to do. Paths and errno codes only, never contents.
import { Refusal } from '../../shared/errors';
import { errnoWords } from '../../shared/errno-remedy';

export function errnoCode(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : 'error';
}

function describe(e: unknown): string {
  const code = errnoCode(e);
  const text = e instanceof Error ? (e.message.replace(/^[A-Z]+: /, '').split(',')[0] ?? '') : String(e);
  return code === 'error' ? text : `${code}: ${text}`;
}

function remedy(e: unknown): string {
  return errnoWords(errnoCode(e), 'journal') ?? 'fix the file or its filesystem';
}

// A write or fsync failed: these entries were not recorded.
export function writeFailed(file: string, e: unknown): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} could not be written (${describe(e)}); the action was not performed; ${remedy(e)} and restart the daemon`,
    { errno: errnoCode(e) },
  );
}

// The failed write could not be cut back: nothing more may be appended.
export function failedClosed(file: string, first: Refusal, e: unknown): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} is unusable: after a failed write (${String(first.detail?.['errno'] ?? 'error')}) it could not be cut back to its last complete entry (${describe(e)}); the action was not performed; ${remedy(e)} and restart the daemon, which repairs the end of the journal`,
    { errno: errnoCode(e) },
  );
}

export function cannotOpen(file: string, e: unknown): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} cannot be opened (${describe(e)}); postern records every action before it performs it, so it performs none; ${remedy(e)}`,
    { errno: errnoCode(e) },
  );
}

export function damaged(file: string, offset: number, why: string): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} is damaged at byte ${offset} (${why}) and more than its last write is affected, so it was left untouched; check it with \`postern audit verify\` and restore it from a backup`,
    { offset },
  );
}

export function segmentGap(missing: string, later: string): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal segment ${missing} is missing although ${later} exists, so the journal was left untouched; check it with \`postern audit verify\` and restore the missing segment from a backup`,
  );
}

export function notSameFile(file: string, why: string): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} ${why} since the daemon opened it; the action was not performed; find out what changed it, put the journal back and restart the daemon`,
  );
}

export function closed(file: string): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} is closed (the daemon is stopping); the action was not performed; retry once the daemon is running again`,
  );
}

export function tooLong(kind: string, bytes: number, max: number): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit entry for ${JSON.stringify(kind)} would be ${bytes} bytes, over the journal's limit of ${max}; the action was not performed; this is a bug in postern: report it`,
  );
}

export function alreadyExists(file: string): Refusal {
  return new Refusal(
    'conflict',
    `the audit journal ${file} already exists and init never overwrites a journal; move it aside first if you mean to start a new one`,
  );
}

export function wrongSigningKey(file: string, inForce: string): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the vault's audit signing key is not the key in force in ${file} (${inForce}); checkpoints cannot be signed; the vault and the journal belong to different installations: restore the matching pair`,
  );
}

export function noSigningKey(file: string): Refusal {
  return new Refusal(
    'vault_locked',
    `the audit signing key of ${file} is not loaded yet: unlock the daemon once, then change the key`,
  );
}

export function cannotCreate(file: string, e: unknown): Refusal {
  return new Refusal(
    'audit_unavailable',
    `the audit journal ${file} could not be created (${describe(e)}); ${remedy(e)} and run init again`,
    { errno: errnoCode(e) },
  );
}
