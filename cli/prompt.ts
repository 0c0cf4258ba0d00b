// Reading passphrases and secrets: from a file (`-` for stdin) or from the
// terminal without echo; never from argv or the environment. Everything is
// returned as a Buffer so it can be wiped after use.
import { openSync, readSync, closeSync, fstatSync } from 'node:fs';
import { ReadStream, WriteStream } from 'node:tty';
import { UsageError } from './errors';
import { Refusal } from '../shared/errors';

const MAX_INPUT = 256 * 1024;
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
    fd = path === '-' ? 0 : openSync(path, 'r');
  } catch (e) {
    throw new Refusal('bad_request', `cannot read the ${what} file ${path} (${(e as NodeJS.ErrnoException).code}); check the path`);
  }
  try {
    if (path !== '-' && !fstatSync(fd).isFile()) throw new Refusal('bad_request', `the ${what} file ${path} is not a regular file`);
    const chunks: Buffer[] = [];
    let total = 0;
    const chunk = Buffer.alloc(64 * 1024);
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, chunk, 0, chunk.length, null);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') continue;
        if ((e as NodeJS.ErrnoException).code === 'EOF') break;
        throw e;
      }
      if (n === 0) break;
      total += n;
      if (total > MAX_INPUT) throw new Refusal('bad_request', `the ${what} is larger than ${MAX_INPUT} bytes; check the file`);
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

// Ask on the controlling terminal, echo off. Works with raw mode so the
// characters are never shown; handles backspace and Ctrl-C.
export function askHidden(prompt: string): Promise<Buffer> {
  let fd: number;
  try {
    fd = openSync('/dev/tty', 'r+');
  } catch {
    throw new UsageError(`no terminal to ask for the ${prompt.replace(/:\s*$/, '').toLowerCase()}; pass it with a --*-file option (see --help)`);
  }
  const input = new ReadStream(fd);
  const output = new WriteStream(fd);
  return new Promise((resolve, reject) => {
    const buf = Buffer.alloc(MAX_INPUT);
    let len = 0;
    output.write(prompt);
    input.setRawMode(true);
    input.resume();
    const finish = (err: Error | null): void => {
      input.setRawMode(false);
      input.pause();
      input.removeAllListeners('data');
      output.write('\n');
      input.destroy();
      output.destroy();
      if (err) {
        buf.fill(0);
        reject(err);
      } else {
        const out = Buffer.from(buf.subarray(0, len));
        buf.fill(0);
        resolve(out);
      }
    };
    input.on('data', (data: Buffer) => {
      for (const byte of data) {
        if (byte === 0x0d || byte === 0x0a) return finish(null);
        if (byte === 0x03) return finish(new UsageError('cancelled'));
        if (byte === 0x04 && len === 0) return finish(new UsageError('cancelled'));
        if (byte === 0x7f || byte === 0x08) {
          if (len > 0) len -= 1;
          continue;
        }
        if (len < buf.length) buf[len++] = byte;
      }
      data.fill(0);
    });
  });
}

export async function getPassphrase(opts: { passphraseFile?: string }, prompt = 'Passphrase: '): Promise<Buffer> {
  const pass = opts.passphraseFile ? stripNewline(readInputFile(opts.passphraseFile, 'passphrase')) : await askHidden(prompt);
  if (pass.length === 0) {
    throw new Refusal('bad_request', opts.passphraseFile ? `the passphrase file ${opts.passphraseFile} is empty; put the vault passphrase in it` : 'the passphrase is empty; type the vault passphrase');
  }
  return pass;
}

export async function getSecret(opts: { secretFile?: string }, prompt = 'Secret: '): Promise<Buffer> {
  if (opts.secretFile) return stripNewline(readInputFile(opts.secretFile, 'secret'));
  return askHidden(prompt);
}

export const MIN_PASSPHRASE = 12;

// A new passphrase: from a file, or asked twice on the terminal.
export async function getNewPassphrase(file: string | undefined, what = 'passphrase'): Promise<Buffer> {
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
  if (pass.length === 0) throw new Refusal('bad_request', `the ${what} is empty; choose one of at least ${MIN_PASSPHRASE} characters`);
  if (codePoints(pass) < MIN_PASSPHRASE) {
    pass.fill(0);
    throw new Refusal('bad_request', `the ${what} is too short (at least ${MIN_PASSPHRASE} characters); choose a longer one`);
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
