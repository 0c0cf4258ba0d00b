// Reading passphrases and secrets: from a file (`-` for stdin) or from the
// terminal without echo; never from argv or the environment. Everything is
// returned as a Buffer so it can be wiped after use.
import { openSync, readSync, closeSync, fstatSync, constants } from 'node:fs';
import { UsageError } from './errors';
import { SecretCollector } from './secret-collector';
import { askOnTerminal } from './terminal-prompt';
import { Refusal } from '../shared/errors';

const MAX_INPUT = 256 * 1024;
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
let stdinTaken: string | null = null;

// Read a whole file (or stdin for `-`) into a Buffer, without following it
// into a string.
export function readInputFile(path: string, what: string): Buffer {
  if (path === '-') {
    if (stdinTaken) throw new UsageError(`both ${stdinTaken} and ${what} read from stdin (-); give one of them a file`);
    stdinTaken = what;
  }
  let fd: number;
  try {
    // Non-blocking: a FIFO nobody writes to reads as empty at once instead
    // of blocking the open for ever; one with a writer (`<(op read …)`) is
    // waited for below.
    fd = path === '-' ? 0 : openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    // The command line names a file that is not there (or not readable): a
    // usage error, as for every option that names a file.
    throw new UsageError(`cannot read the ${what} file ${path} (${(e as NodeJS.ErrnoException).code}); check the path`);
  }
  try {
    // A regular file, or a pipe: `--passphrase-file <(op read …)` hands over
    // /dev/fd/N, the read end of a pipe. A directory, a device or a socket
    // is a mistake.
    const st = fstatSync(fd);
    if (path === '-' && st.isDirectory())
      throw new Refusal(
        'bad_request',
        `the ${what} is to be read from stdin (-), but stdin is a directory; redirect a file`,
      );
    if (path !== '-' && !st.isFile() && !st.isFIFO())
      throw new UsageError(`the ${what} file ${path} is not a regular file or a pipe; name a file, or use - for stdin`);
    const chunks: Buffer[] = [];
    let total = 0;
    const chunk = Buffer.alloc(64 * 1024);
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, chunk, 0, chunk.length, null);
      } catch (e) {
        // A pipe whose writer has not written yet.
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') {
          Atomics.wait(PAUSE, 0, 0, 10);
          continue;
        }
        if ((e as NodeJS.ErrnoException).code === 'EOF') break;
        throw e;
      }
      if (n === 0) break;
      total += n;
      if (total > MAX_INPUT)
        throw new Refusal('bad_request', `the ${what} is larger than ${MAX_INPUT} bytes; check the file`);
      chunks.push(Buffer.from(chunk.subarray(0, n)));
    }
    chunk.fill(0);
    const all = Buffer.concat(chunks);
    for (const c of chunks) c.fill(0);
    return all;
  } finally {
    if (path !== '-') closeSync(fd);
  }
}

// Remove exactly one trailing newline (\n or \r\n), wiping the original.
export function stripNewline(buf: Buffer): Buffer {
  let end = buf.length;
  if (end > 0 && buf[end - 1] === 0x0a) {
    end -= 1;
    if (end > 0 && buf[end - 1] === 0x0d) end -= 1;
  }
  const out = Buffer.from(buf.subarray(0, end));
  buf.fill(0);
  return out;
}

// Ask on the controlling terminal, echo off, for one line (a passphrase, a
// token, a password). Extra pasted lines are dropped, never left for the
// shell.
export function askHidden(prompt: string, what = prompt.replace(/:\s*$/, '').toLowerCase()): Promise<Buffer> {
  const collector = new SecretCollector(
    'line',
    MAX_INPUT,
    `the ${what} is longer than ${MAX_INPUT} bytes; check what was typed or pasted, or give it in a file (see --help)`,
  );
  return askOnTerminal(prompt, what, collector);
}

export const MAX_PRIVATE_KEY = 64 * 1024;
export const PRIVATE_KEY_PROMPT = 'Private key (paste it; it ends at its END line, or press Ctrl-D): ';

// Ask on the controlling terminal, echo off, for a private key pasted as a
// whole: lines up to "-----END ... PRIVATE KEY-----", or to Ctrl-D.
export function askPrivateKey(prompt = PRIVATE_KEY_PROMPT): Promise<Buffer> {
  const collector = new SecretCollector(
    'private-key',
    MAX_PRIVATE_KEY,
    `the pasted private key is larger than ${MAX_PRIVATE_KEY / 1024} KiB, more than any supported key; check what was pasted, or give the key file with --secret-file`,
  );
  return askOnTerminal(prompt, 'private key', collector);
}

export async function getPassphrase(opts: { passphraseFile?: string }, prompt = 'Vault passphrase: '): Promise<Buffer> {
  const pass = opts.passphraseFile
    ? stripNewline(readInputFile(opts.passphraseFile, 'passphrase'))
    : await askHidden(prompt);
  if (pass.length === 0) {
    throw new Refusal(
      'bad_request',
      opts.passphraseFile
        ? `the passphrase file ${opts.passphraseFile} is empty; put the vault passphrase in it`
        : 'the passphrase is empty; type the vault passphrase',
    );
  }
  return pass;
}

export async function getSecret(opts: { secretFile?: string }, prompt = 'Secret: '): Promise<Buffer> {
  if (opts.secretFile) return stripNewline(readInputFile(opts.secretFile, 'secret'));
  return askHidden(prompt);
}

export const MIN_PASSPHRASE = 12;

// A new passphrase: from a file, or asked twice on the terminal.
export async function getNewPassphrase(file: string | undefined, what = 'vault passphrase'): Promise<Buffer> {
  let pass: Buffer;
  if (file) pass = stripNewline(readInputFile(file, `new ${what}`));
  else {
    pass = await askHidden(`New ${what}: `);
    const again = await askHidden(`Repeat the new ${what}: `);
    const same = again.equals(pass);
    again.fill(0);
    if (!same) {
      pass.fill(0);
      throw new Refusal('bad_request', `the two ${what}s differ; run the command again`);
    }
  }
  if (pass.length === 0)
    throw new Refusal('bad_request', `the ${what} is empty; choose one of at least ${MIN_PASSPHRASE} characters`);
  if (codePoints(pass) < MIN_PASSPHRASE) {
    pass.fill(0);
    throw new Refusal(
      'bad_request',
      `the ${what} is too short (at least ${MIN_PASSPHRASE} characters); choose a longer one`,
    );
  }
  return pass;
}

// Characters in UTF-8 bytes, counted without decoding into a string: every
// byte that is not a continuation byte (10xxxxxx) starts a character.
export function codePoints(buf: Buffer): number {
  let n = 0;
  for (const b of buf) if ((b & 0xc0) !== 0x80) n += 1;
  return n;
}
