// The refusal for a vault rewrite the filesystem would not take (full disk,
// read-only or immutable directory, permissions). The old file is still in
// place, so the message says nothing changed, names the file and the errno,
// and says what the operator can fix. bad_environment: the cause is the
// machine around postern, not the request and not postern itself.
import { dirname } from 'node:path';
import { Refusal } from '../../shared/errors';
import { errnoWords } from '../../shared/errno-remedy';

export function isErrnoError(e: unknown): e is NodeJS.ErrnoException {
  return (
    e instanceof Error &&
    typeof (e as NodeJS.ErrnoException).code === 'string' &&
    typeof (e as NodeJS.ErrnoException).syscall === 'string'
  );
}

function remedy(code: string, dir: string): string {
  return errnoWords(code, 'vaultDir')?.replace('{dir}', () => dir) ?? `fix ${dir} or its filesystem`;
}

export function vaultWriteFailed(path: string, e: NodeJS.ErrnoException): Refusal {
  const code = e.code ?? 'error';
  // "ENOSPC: no space left on device, write" -> "no space left on device"
  const text = (e.message.replace(/^[A-Z0-9]+: /, '').split(',')[0] ?? '').trim();
  return new Refusal(
    'bad_environment',
    `the vault ${path} could not be written (${code}${text ? `: ${text}` : ''}); nothing was changed; ${remedy(code, dirname(path))}, then retry`,
    { errno: code, path },
  );
}
